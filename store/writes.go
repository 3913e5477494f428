package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Writes queues the journal writes of one engine transaction — a step's
// outcome, new step rows, foreach progress, the run's new state — and sends
// them to Postgres in one round trip (a pgx batch). Fenced writes (a step
// outcome at an attempt, a run update at a run attempt) that match no row
// make Send report false: another worker or an operator moved the run on,
// and the caller must roll back.
type Writes struct {
	// Journal is the step journal the writes go to (the zero value: runs).
	Journal Journal

	batch    pgx.Batch
	reads    []func(pgx.BatchResults) error
	moved    bool
	orphaned bool
}

const settleStepSQL = `
	SET status = $4, output = COALESCE($5::jsonb, output), error = $6, attempt = attempt + $7,
		started_at = COALESCE($8, started_at), wake_at = COALESCE($9, wake_at), held_at = NULL,
		finished_at = CASE WHEN $4 IN ('completed', 'failed') THEN now() END
	WHERE run_id = $1 AND step_key = $2 AND attempt = $3 AND status IN ('queued', 'retrying', 'waiting', 'running')`

// SettleStep queues an attempt's outcome, fenced on the step still being
// incomplete at that attempt.
func (w *Writes) SettleStep(runID uuid.UUID, key string, attempt int, o StepOutcome) {
	bump := 0
	if o.NextAttempt {
		bump = 1
	}
	w.batch.Queue(`UPDATE `+w.Journal.steps()+settleStepSQL, [16]byte(runID), key, attempt, o.Status, jsonText(o.Output), o.Error, bump, o.StartedAt, o.WakeAt)
	w.fenced(fmt.Sprintf("settle step %s of run %s", key, runID))
}

// SetStepOutput queues an overwrite of a step's status and output (foreach
// progress; the row is locked by the caller).
func (w *Writes) SetStepOutput(runID uuid.UUID, key string, status StepStatus, output []byte) {
	w.batch.Queue(`
		UPDATE `+w.Journal.steps()+` SET status = $3, output = $4::jsonb,
			finished_at = CASE WHEN $3 IN ('completed', 'failed') THEN now() END
		WHERE run_id = $1 AND step_key = $2`, [16]byte(runID), key, status, jsonText(output))
	w.exec(fmt.Sprintf("update step %s of run %s", key, runID))
}

// InsertSteps queues journal rows (of one run or many) as one statement.
// Existing rows are left alone (ON CONFLICT DO NOTHING); after Send,
// created holds the rows that were new, so a replayed advance enqueues
// nothing twice.
func (w *Writes) InsertSteps(steps []NewStep, created map[StepRef]bool) {
	switch len(steps) {
	case 0:
		return
	case 1:
		w.insertStep(steps[0], created)
		return
	}
	n := len(steps)
	runIDs := make([][16]byte, n)
	keys, ids, kinds, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	inputs, outputs, errs := make([]*string, n), make([]*string, n), make([]*string, n)
	wakes := make([]*time.Time, n)
	carriers := make([]*int64, n)
	for i, s := range steps {
		runIDs[i], keys[i], ids[i], kinds[i], statuses[i] = s.RunID, s.Key, s.StepID, s.Kind, string(s.Status)
		inputs[i], outputs[i], errs[i], wakes[i], carriers[i] = jsonText(s.Input), jsonText(s.Output), s.Error, s.WakeAt, s.Carrier
	}
	w.batch.Queue(`
		INSERT INTO `+w.Journal.steps()+` (run_id, step_key, step_id, kind, status, input, output, error, wake_at, finished_at, carrier_job)
		SELECT s.run_id, s.key, s.id, s.kind, s.status, s.input::jsonb, s.output::jsonb, s.error, s.wake,
			CASE WHEN s.status IN ('completed', 'skipped', 'failed') THEN now() END, s.carrier
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::timestamptz[], $10::bigint[]) AS s(run_id, key, id, kind, status, input, output, error, wake, carrier)
		ON CONFLICT (run_id, step_key) DO NOTHING
		RETURNING run_id, step_key`, runIDs, keys, ids, kinds, statuses, inputs, outputs, errs, wakes, carriers)
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("journal %d step(s): %w", n, err)
		}
		var ref StepRef
		_, err = pgx.ForEachRow(rows, []any{&ref.RunID, &ref.Key}, func() error { created[ref] = true; return nil })
		if err != nil {
			return fmt.Errorf("journal %d step(s): %w", n, err)
		}
		return nil
	})
}

// insertStep is InsertSteps of one row (a step's one successor, the
// common case) without the arrays: encoding and unnesting nine one-element
// arrays cost more than the row.
func (w *Writes) insertStep(s NewStep, created map[StepRef]bool) {
	w.batch.Queue(`
		INSERT INTO `+w.Journal.steps()+` (run_id, step_key, step_id, kind, status, input, output, error, wake_at, finished_at, carrier_job)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9,
			CASE WHEN $5 IN ('completed', 'skipped', 'failed') THEN now() END, $10)
		ON CONFLICT (run_id, step_key) DO NOTHING`,
		[16]byte(s.RunID), s.Key, s.StepID, s.Kind, string(s.Status), jsonText(s.Input), jsonText(s.Output), s.Error, s.WakeAt, s.Carrier)
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("journal step %s of run %s: %w", s.Key, s.RunID, err)
		}
		if tag.RowsAffected() == 1 {
			created[StepRef{RunID: s.RunID, Key: s.Key}] = true
		}
		return nil
	})
}

// UpdateRun queues a run's new state, fenced on the run being unfinished
// and still at attempt.
//
// A run's update returns whether the run is orphaned (its log left the
// canonical chain; see Orphaned): the row is locked by the update, so the
// answer holds until commit.
func (w *Writes) UpdateRun(id uuid.UUID, attempt int, u RunUpdate) {
	q := `
		UPDATE ` + w.Journal.runs() + `
		SET status = $3, position = NULLIF($4, ''), epoch = $5, error = $6, failed_step = $7, wake_at = $8,
			updated_at = now(),
			finished_at = CASE WHEN $3 IN ('completed', 'failed', 'cancelled') THEN now() END
		WHERE id = $1 AND attempt = $2 AND status NOT IN ('completed', 'failed', 'cancelled', 'reincluded')`
	args := []any{[16]byte(id), attempt, u.Status, u.Position, u.Epoch, u.Error, u.FailedStep, u.WakeAt}
	what := fmt.Sprintf("update run %s", id)
	if w.Journal != RunJournal {
		w.batch.Queue(q, args...)
		w.fenced(what)
		return
	}
	w.batch.Queue(q+` RETURNING orphaned_at IS NOT NULL`, args...)
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		var orphaned bool
		switch err := br.QueryRow().Scan(&orphaned); {
		case errors.Is(err, pgx.ErrNoRows):
			w.moved = true
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		}
		w.orphaned = w.orphaned || orphaned
		return nil
	})
}

// Orphaned reports, after Send, whether a run UpdateRun wrote is orphaned.
func (w *Writes) Orphaned() bool { return w.orphaned }

// RunChange is one run's new state for UpdateRuns, fenced on attempt.
type RunChange struct {
	ID      uuid.UUID
	Attempt int
	RunUpdate
}

// UpdateRuns queues many runs' new states as one statement, fenced as
// UpdateRun is (every run must match). A claim batch that parks its runs at
// their first step (a delay, a wait, an approval) changes every run it
// created: one UPDATE per run cost more than the claim gate itself.
func (w *Writes) UpdateRuns(changes []RunChange) {
	seen := make(map[uuid.UUID]bool, len(changes))
	for _, c := range changes {
		seen[c.ID] = true
	}
	if len(changes) < 2 || len(seen) < len(changes) {
		// One statement per run: a run twice would match once.
		for _, c := range changes {
			w.UpdateRun(c.ID, c.Attempt, c.RunUpdate)
		}
		return
	}
	n := len(changes)
	ids := make([][16]byte, n)
	attempts, epochs := make([]int32, n), make([]int32, n)
	statuses, positions := make([]string, n), make([]string, n)
	errs, failed := make([]*string, n), make([]*string, n)
	wakes := make([]*time.Time, n)
	for i, c := range changes {
		ids[i], attempts[i], epochs[i] = c.ID, int32(c.Attempt), int32(c.Epoch)
		statuses[i], positions[i], errs[i], failed[i], wakes[i] = string(c.Status), c.Position, c.Error, c.FailedStep, c.WakeAt
	}
	w.batch.Queue(`
		UPDATE `+w.Journal.runs()+` r
		SET status = u.status, position = NULLIF(u.position, ''), epoch = u.epoch, error = u.error,
			failed_step = u.failed_step, wake_at = u.wake_at, updated_at = now(),
			finished_at = CASE WHEN u.status IN ('completed', 'failed', 'cancelled') THEN now() END
		FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::timestamptz[])
			AS u(id, attempt, status, position, epoch, error, failed_step, wake_at)
		WHERE r.id = u.id AND r.attempt = u.attempt AND r.status NOT IN ('completed', 'failed', 'cancelled', 'reincluded')`,
		ids, attempts, statuses, positions, epochs, errs, failed, wakes)
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("update %d run(s): %w", n, err)
		}
		if tag.RowsAffected() < int64(n) {
			w.moved = true
		}
		return nil
	})
}

// Len is the number of queued statements.
func (w *Writes) Len() int { return w.batch.Len() }

// Send runs every queued statement in tx, in order, in one round trip. It
// reports false when a fenced write matched no row.
func (w *Writes) Send(ctx context.Context, tx pgx.Tx) (bool, error) {
	if w.batch.Len() == 0 {
		return true, nil
	}
	br := tx.SendBatch(ctx, &w.batch)
	for _, read := range w.reads {
		if err := read(br); err != nil {
			br.Close()
			return false, err
		}
	}
	if err := br.Close(); err != nil {
		return false, err
	}
	return !w.moved, nil
}

func (w *Writes) exec(what string) {
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

func (w *Writes) fenced(what string) {
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if tag.RowsAffected() == 0 {
			w.moved = true
		}
		return nil
	})
}

func jsonText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// CopySteps writes the first journal rows of runs that have none yet (runs
// just claimed) with COPY: nothing can conflict, so it skips the
// ON CONFLICT and RETURNING that InsertSteps needs.
func CopySteps(ctx context.Context, tx pgx.Tx, steps []NewStep) error {
	if len(steps) == 0 {
		return nil
	}
	now := time.Now()
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"rflow", "step_runs"},
		[]string{"run_id", "step_key", "step_id", "kind", "status", "input", "output", "error", "wake_at", "finished_at"},
		pgx.CopyFromSlice(len(steps), func(i int) ([]any, error) {
			s := steps[i]
			var finished *time.Time
			switch s.Status {
			case StepCompleted, StepSkipped, StepFailed:
				finished = &now
			}
			return []any{[16]byte(s.RunID), s.Key, s.StepID, s.Kind, string(s.Status), jsonText(s.Input), jsonText(s.Output), s.Error, s.WakeAt, finished}, nil
		}))
	if err != nil {
		return fmt.Errorf("journal %d first step(s): %w", len(steps), err)
	}
	return nil
}
