package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// WorkflowRow is a deployed workflow.
type WorkflowRow struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	SpecHash   string `json:"spec_hash"`
	Paused     bool   `json:"paused"`
	// PausedAt and PausedReason say since when and why a paused workflow
	// is paused (a circuit breaker trip or an operator).
	PausedAt     *time.Time `json:"paused_at,omitempty"`
	PausedReason string     `json:"paused_reason,omitempty"`
	UpdatedAt    time.Time  `json:"updated_at"`
	// Source is who deployed the current generation: a project file
	// ("file") or the API ("api").
	Source WorkflowSource `json:"source"`
	// RetiredAt is set once `rflow workflows deploy` retired the workflow
	// because its project file no longer has it: its triggers stopped.
	RetiredAt *time.Time `json:"retired_at,omitempty"`
	Spec      []byte     `json:"-"`
}

// RetiredError is a run asked of a retired workflow.
type RetiredError struct {
	Workflow string
	At       time.Time
}

func (e *RetiredError) Error() string {
	return fmt.Sprintf("workflow %s was retired at %s (its project file no longer has it): it starts no runs; "+
		"deploy it again to bring it back", e.Workflow, e.At.UTC().Format(time.RFC3339))
}

// WorkflowSource is who deployed a workflow's current generation.
type WorkflowSource string

const (
	// SourceFile: a project file, by `rflow start`, `rflow dev` or
	// `rflow workflows deploy`.
	SourceFile WorkflowSource = "file"
	// SourceAPI: PUT /v1/workflows/{name}.
	SourceAPI WorkflowSource = "api"
)

// workflowColumns are the columns scanWorkflow reads, in its order.
const workflowColumns = `name, generation, spec_hash, paused, paused_at, coalesce(paused_reason, ''), updated_at, source, retired_at, spec`

func scanWorkflow(row pgx.Row) (WorkflowRow, error) {
	var w WorkflowRow
	err := row.Scan(&w.Name, &w.Generation, &w.SpecHash, &w.Paused, &w.PausedAt, &w.PausedReason, &w.UpdatedAt, &w.Source, &w.RetiredAt, &w.Spec)
	return w, err
}

// Deployed is the outcome of a deploy or of a start-up sync.
type Deployed struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	Changed    bool   `json:"changed"`
	// Previous is the generation this deploy replaced (0: the first).
	Previous int64 `json:"previous_generation,omitempty"`
	// SameAs is the older generation whose spec this new one repeats: a
	// deliberate rollback (generations only grow).
	SameAs int64 `json:"same_spec_as,omitempty"`
	// Superseded, set by a start-up sync only, is the older generation the
	// offered spec equals: a newer one (Generation) replaced it, so it was
	// not deployed again.
	Superseded int64 `json:"superseded_generation,omitempty"`
	// Retired, set by `rflow workflows deploy` only, marks a workflow the
	// project file no longer has, retired by that deploy.
	Retired bool `json:"retired,omitempty"`
}

// DeployWorkflow stores spec as the current definition of name: the
// explicit deploy (PUT /v1/workflows, `rflow workflows deploy`). The
// generation increases whenever the spec hash differs from the current one,
// even when it equals an older generation (a rollback is a new generation),
// and every generation stays loadable so runs in flight keep executing the
// spec they were claimed under.
func DeployWorkflow(ctx context.Context, tx pgx.Tx, name, hash string, spec []byte) (Deployed, error) {
	return deployWorkflow(ctx, tx, name, hash, spec, false)
}

// DeployWorkflowFromAPI is DeployWorkflow for a definition that arrived
// through PUT /v1/workflows/{name}: a new generation is marked from_api,
// so the engine compiles it under the rules of an untrusted definition
// (workflow.OriginAPI) whenever it loads it.
func DeployWorkflowFromAPI(ctx context.Context, tx pgx.Tx, name, hash string, spec []byte) (Deployed, error) {
	return deployWorkflow(ctx, tx, name, hash, spec, true)
}

func deployWorkflow(ctx context.Context, tx pgx.Tx, name, hash string, spec []byte, fromAPI bool) (Deployed, error) {
	var gen int64
	err := tx.QueryRow(ctx, `
		INSERT INTO rflow.workflows AS w (name, generation, spec_hash, spec)
		VALUES ($1, 1, $2, $3)
		ON CONFLICT (name) DO UPDATE
			SET generation = w.generation + 1, spec_hash = EXCLUDED.spec_hash, spec = EXCLUDED.spec, updated_at = now()
			WHERE w.spec_hash <> EXCLUDED.spec_hash
		RETURNING generation`, name, hash, spec).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		// Same hash: nothing changed.
		err = tx.QueryRow(ctx, `SELECT generation FROM rflow.workflows WHERE name = $1`, name).Scan(&gen)
		if err != nil {
			return Deployed{}, fmt.Errorf("deploy %s: %w", name, err)
		}
		return Deployed{Name: name, Generation: gen}, nil
	}
	if err != nil {
		return Deployed{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	same, err := generationWithHash(ctx, tx, name, hash)
	if err != nil {
		return Deployed{}, err
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO rflow.workflow_generations (workflow_name, generation, spec_hash, spec, from_api)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, name, gen, hash, spec, fromAPI)
	if err != nil {
		return Deployed{}, fmt.Errorf("deploy %s: record generation: %w", name, err)
	}
	return Deployed{Name: name, Generation: gen, Changed: true, Previous: gen - 1, SameAs: same}, nil
}

// SyncWorkflow is the start-up deploy of a process's own project file. It
// deploys spec only when it is new (its hash was never deployed for name);
// a spec equal to the current generation changes nothing, and a spec equal
// to an older, superseded generation is not deployed again (Superseded
// names that generation): a process restarting with an old file in a
// rolling deploy, or after PUT /v1/workflows, must not roll the workflow
// back. Rolling back on purpose is DeployWorkflow.
func SyncWorkflow(ctx context.Context, tx pgx.Tx, name, hash string, spec []byte) (Deployed, error) {
	var gen int64
	var cur string
	// Lock the row, so two processes starting at once with the same new
	// file deploy it once, and one with an old file sees the new one.
	err := tx.QueryRow(ctx, `SELECT generation, spec_hash FROM rflow.workflows WHERE name = $1 FOR UPDATE`,
		name).Scan(&gen, &cur)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return DeployWorkflow(ctx, tx, name, hash, spec)
	case err != nil:
		return Deployed{}, fmt.Errorf("sync %s: %w", name, err)
	case cur == hash:
		return Deployed{Name: name, Generation: gen}, nil
	}
	old, err := generationWithHash(ctx, tx, name, hash)
	if err != nil {
		return Deployed{}, err
	}
	if old != 0 {
		return Deployed{Name: name, Generation: gen, Superseded: old}, nil
	}
	return DeployWorkflow(ctx, tx, name, hash, spec)
}

// generationWithHash is the newest recorded generation of name whose spec
// has hash, or 0.
func generationWithHash(ctx context.Context, db DBTX, name, hash string) (int64, error) {
	var gen *int64
	err := db.QueryRow(ctx, `
		SELECT max(generation) FROM rflow.workflow_generations WHERE workflow_name = $1 AND spec_hash = $2`,
		name, hash).Scan(&gen)
	if err != nil {
		return 0, fmt.Errorf("generations of %s: %w", name, err)
	}
	if gen == nil {
		return 0, nil
	}
	return *gen, nil
}

// WorkflowSpec loads the spec of one generation of a workflow, and whether
// it was deployed through the API (DeployWorkflowFromAPI).
func WorkflowSpec(ctx context.Context, db DBTX, name string, generation int64) (spec []byte, fromAPI bool, err error) {
	err = db.QueryRow(ctx, `
		SELECT spec, from_api FROM rflow.workflow_generations WHERE workflow_name = $1 AND generation = $2`,
		name, generation).Scan(&spec, &fromAPI)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("workflow %s generation %d: %w", name, generation, ErrNotFound)
	}
	return spec, fromAPI, err
}

// GetWorkflow returns one deployed workflow.
func GetWorkflow(ctx context.Context, db DBTX, name string) (*WorkflowRow, error) {
	w, err := scanWorkflow(db.QueryRow(ctx, `SELECT `+workflowColumns+` FROM rflow.workflows WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("workflow %s: %w", name, ErrNotFound)
	}
	return &w, err
}

// ListWorkflows returns every deployed live workflow of ns, by name, under
// its local name: rehearsals (see rehearsal.go) and other projects'
// workflows are not listed, so nothing live schedules, shows or runs them.
func ListWorkflows(ctx context.Context, db DBTX, ns Namespace) ([]WorkflowRow, error) {
	rows, err := db.Query(ctx, `SELECT `+workflowColumns+` FROM rflow.workflows WHERE `+ns.filter("name")+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowRow, error) { return scanWorkflow(r) })
	for i := range out {
		out[i].Name, _ = ns.Local(out[i].Name)
	}
	return out, err
}

// PausedByOperator is the reason SetWorkflowPaused records for a pause.
const PausedByOperator = "paused by an operator"

// SetWorkflowPaused pauses or resumes a workflow. A paused workflow's
// claims still pass the claim gate and wait, unstarted, for the resume;
// runs already started continue. Pausing a paused workflow keeps its
// original time and reason (a circuit breaker's, say); resuming records
// when, so the circuit breaker counts failures from then on.
func SetWorkflowPaused(ctx context.Context, db DBTX, name string, paused bool) error {
	return setWorkflowPaused(ctx, db, name, paused, PausedByOperator)
}

// PauseWorkflow is SetWorkflowPaused(…, true) recording reason as why
// (rflow workflows pause --reason); an empty reason is PausedByOperator.
func PauseWorkflow(ctx context.Context, db DBTX, name, reason string) error {
	if reason == "" {
		reason = PausedByOperator
	}
	return setWorkflowPaused(ctx, db, name, true, reason)
}

func setWorkflowPaused(ctx context.Context, db DBTX, name string, paused bool, reason string) error {
	tag, err := db.Exec(ctx, `
		UPDATE rflow.workflows SET
			paused_at = CASE WHEN $2 THEN coalesce(paused_at, now()) END,
			paused_reason = CASE WHEN $2 THEN coalesce(paused_reason, $3) END,
			resumed_at = CASE WHEN paused AND NOT $2 THEN now() ELSE resumed_at END,
			paused = $2, updated_at = now()
		WHERE name = $1`, name, paused, reason)
	if err != nil {
		return fmt.Errorf("pause %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("workflow %s: %w", name, ErrNotFound)
	}
	return nil
}

// WorkflowGenerations maps every deployed live workflow of ns (by stored
// name) to its current generation: a cheap poll for "did any definition
// change". Rehearsals and other projects' workflows are left out, so a
// live process never ingests a trigger for one, and so are retired
// workflows, whose triggers stopped.
func WorkflowGenerations(ctx context.Context, db DBTX, ns Namespace) (map[string]int64, error) {
	rows, err := db.Query(ctx, `SELECT name, generation FROM rflow.workflows WHERE retired_at IS NULL AND `+ns.filter("name"))
	if err != nil {
		return nil, fmt.Errorf("workflow generations: %w", err)
	}
	out := map[string]int64{}
	var name string
	var gen int64
	_, err = pgx.ForEachRow(rows, []any{&name, &gen}, func() error {
		out[name] = gen
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflow generations: %w", err)
	}
	return out, nil
}

// LockWorkflowGeneration returns name's current generation and holds a
// share lock on it for the rest of tx: a deploy waits until tx ends, so
// work committed in tx under that generation cannot interleave with a
// newer one.
func LockWorkflowGeneration(ctx context.Context, tx pgx.Tx, name string) (int64, error) {
	var gen int64
	err := tx.QueryRow(ctx, `SELECT generation FROM rflow.workflows WHERE name = $1 FOR SHARE`, name).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("workflow %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("lock workflow %s: %w", name, err)
	}
	return gen, nil
}

// MarkDeployed records who deployed name's current generation and brings a
// retired workflow back: deploying it again is how it returns.
func MarkDeployed(ctx context.Context, tx pgx.Tx, name string, source WorkflowSource) error {
	if _, err := tx.Exec(ctx, `
		UPDATE rflow.workflows SET source = $2, retired_at = NULL
		WHERE name = $1 AND (source <> $2 OR retired_at IS NOT NULL)`, name, source); err != nil {
		return fmt.Errorf("deploy %s: record its source: %w", name, err)
	}
	return nil
}

// FileWorkflows lists the live workflows of ns that its project file
// deployed and that are not retired, by stored name.
func FileWorkflows(ctx context.Context, db DBTX, ns Namespace) ([]Deployed, error) {
	rows, err := db.Query(ctx, `
		SELECT name, generation FROM rflow.workflows
		WHERE source = 'file' AND retired_at IS NULL AND `+ns.filter("name")+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("workflows deployed from a file: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Deployed, error) {
		var d Deployed
		err := r.Scan(&d.Name, &d.Generation)
		return d, err
	})
}

// RetireWorkflows retires the workflows of ns that its project file
// deployed and that are not in keep (the file's own, by stored name):
// their triggers stop (WorkflowGenerations leaves them out, the claim gate
// claims nothing for them), their runs in flight finish on their
// generation. Workflows deployed through the API, and every other
// project's, are not touched. It returns the retired ones.
func RetireWorkflows(ctx context.Context, tx pgx.Tx, ns Namespace, keep []string) ([]Deployed, error) {
	rows, err := tx.Query(ctx, `
		UPDATE rflow.workflows SET retired_at = now(), updated_at = now()
		WHERE source = 'file' AND retired_at IS NULL AND `+ns.filter("name")+` AND NOT (name = ANY($1))
		RETURNING name, generation`, keep)
	if err != nil {
		return nil, fmt.Errorf("retire workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Deployed, error) {
		d := Deployed{Retired: true}
		err := r.Scan(&d.Name, &d.Generation)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("retire workflows: %w", err)
	}
	slices.SortFunc(out, func(a, b Deployed) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
