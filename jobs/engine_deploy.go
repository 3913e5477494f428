package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Sync is what a start-up sync did, under the project's local workflow
// names (as every Deployed the engine returns).
type Sync struct {
	// Deployed has one entry per workflow of the project file: deployed
	// (Changed), already current, or skipped as superseded (Superseded).
	Deployed []store.Deployed
	// Others are deployed workflows the project file does not declare
	// that were deployed through the API; they stay deployed and keep
	// running.
	Others []store.Deployed
	// Missing are workflows a project file deployed that this one no
	// longer has: their triggers do not run in this process, and
	// `rflow workflows deploy` retires them.
	Missing []store.Deployed
}

// SyncWorkflows is the start-up deploy of the project file: each workflow
// whose spec is new gets a new generation, and a spec equal to a superseded
// generation is left alone (see store.SyncWorkflow), so a process restarting
// with an old file never rolls a newer definition back.
func (e *Engine) SyncWorkflows(ctx context.Context) (Sync, error) {
	var out Sync
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		out = Sync{}
		declared := map[string]bool{}
		for _, wf := range byName(e.stored(e.project.Workflows)) {
			d, err := store.SyncWorkflow(ctx, tx, wf.Name, wf.Hash, wf.Spec)
			if err != nil {
				return err
			}
			if err := budgets.Declare(ctx, tx, wf); err != nil {
				return err
			}
			if d.Superseded == 0 {
				if err := store.MarkDeployed(ctx, tx, wf.Name, store.SourceFile); err != nil {
					return err
				}
			}
			out.Deployed = append(out.Deployed, d)
			declared[wf.Name] = true
		}
		gens, err := store.WorkflowGenerations(ctx, tx, e.ns)
		if err != nil {
			return err
		}
		fromFile, err := store.FileWorkflows(ctx, tx, e.ns)
		if err != nil {
			return err
		}
		file := map[string]bool{}
		for _, d := range fromFile {
			file[d.Name] = true
			if !declared[d.Name] {
				out.Missing = append(out.Missing, d)
			}
		}
		for name, gen := range gens {
			if !declared[name] && !file[name] {
				out.Others = append(out.Others, store.Deployed{Name: name, Generation: gen})
			}
		}
		slices.SortFunc(out.Others, func(a, b store.Deployed) int { return strings.Compare(a.Name, b.Name) })
		return nil
	})
	e.local(out.Deployed)
	e.local(out.Others)
	e.local(out.Missing)
	return out, err
}

// local renames ds to the project's local workflow names, for replies.
func (e *Engine) local(ds []store.Deployed) {
	for i := range ds {
		ds[i].Name, _ = e.ns.Local(ds[i].Name)
	}
}

// RetireMissing retires the workflows this project's file deployed that
// the file no longer has (see store.RetireWorkflows): `rflow workflows
// deploy` of a whole file. Another project's workflows are never among
// them, whatever their names.
func (e *Engine) RetireMissing(ctx context.Context, tx pgx.Tx) ([]store.Deployed, error) {
	keep := make([]string, 0, len(e.project.Workflows))
	for _, wf := range e.project.Workflows {
		keep = append(keep, e.ns.Qualify(wf.Name))
	}
	out, err := store.RetireWorkflows(ctx, tx, e.ns, keep)
	e.local(out)
	return out, err
}

// stored is wfs under their stored names (store.Namespace): what is
// deployed, budgeted and claimed under.
func (e *Engine) stored(wfs []*workflow.Workflow) []*workflow.Workflow {
	out := make([]*workflow.Workflow, len(wfs))
	for i, wf := range wfs {
		out[i] = rehearse(wf, e.ns.Qualify(wf.Name))
	}
	return out
}

// missingFromFile reports the deployed workflows among names that a
// project file deployed and this process's file does not declare: their
// triggers do not run here.
func (e *Engine) missingFromFile(ctx context.Context, names []string) (map[string]bool, error) {
	fromFile, err := store.FileWorkflows(ctx, e.pool, e.ns)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, d := range fromFile {
		local, _ := e.ns.Local(d.Name)
		if e.project.Workflow(local) == nil && slices.Contains(names, d.Name) {
			out[d.Name] = true
		}
	}
	return out, nil
}

// DeployWorkflows deploys the project file's workflows on purpose (all of
// them, or those named): each spec that differs from the current generation
// becomes a new generation, even one equal to an older generation, which is
// how a rollback is done. An unknown name is an error and deploys nothing.
func (e *Engine) DeployWorkflows(ctx context.Context, tx pgx.Tx, names []string) ([]store.Deployed, error) {
	wfs := e.project.Workflows
	if len(names) > 0 {
		wfs = make([]*workflow.Workflow, 0, len(names))
		for _, name := range names {
			wf := e.project.Workflow(name)
			if wf == nil {
				return nil, &unknownWorkflowError{name: name, project: e.project.Name, names: workflowList(e.project.Workflows)}
			}
			wfs = append(wfs, wf)
		}
	}
	out := make([]store.Deployed, 0, len(wfs))
	for _, wf := range byName(e.stored(wfs)) {
		d, err := store.DeployWorkflow(ctx, tx, wf.Name, wf.Hash, wf.Spec)
		if err != nil {
			return nil, err
		}
		if err := budgets.Declare(ctx, tx, wf); err != nil {
			return nil, err
		}
		if err := store.MarkDeployed(ctx, tx, wf.Name, store.SourceFile); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	e.local(out)
	return out, nil
}

// DeployTx validates one workflow definition (YAML or JSON), named by its
// local name, against the project, with the same code as `rflow validate`, and stores it. It is the
// API's deploy, so the definition is untrusted: its ${VAR} references read
// only the env: allowlist. Invalid input returns a *workflow.Diagnostics.
func (e *Engine) DeployTx(ctx context.Context, tx pgx.Tx, name string, src []byte) (store.Deployed, error) {
	wf, err := workflow.ParseWorkflow(e.project, name+".yaml", src)
	if err != nil {
		return store.Deployed{}, err
	}
	if wf.Name != name {
		return store.Deployed{}, fmt.Errorf("definition is named %q but was deployed as %q", wf.Name, name)
	}
	wf = rehearse(wf, e.ns.Qualify(name))
	if err := budgets.Declare(ctx, tx, wf); err != nil {
		return store.Deployed{}, err
	}
	d, err := store.DeployWorkflowFromAPI(ctx, tx, wf.Name, wf.Hash, wf.Spec)
	if err != nil {
		return d, err
	}
	d.Name = name
	return d, store.MarkDeployed(ctx, tx, wf.Name, store.SourceAPI)
}

// unknownWorkflowError is a workflow name the project does not hold: it is
// store.ErrNotFound, with a message that lists the names there are.
type unknownWorkflowError struct{ name, project, names string }

func (e *unknownWorkflowError) Error() string {
	return fmt.Sprintf("workflow %s is not in project %s (its workflows: %s)", e.name, e.project, e.names)
}

func (e *unknownWorkflowError) Unwrap() error { return store.ErrNotFound }

// workflowList names wfs in order, for messages ("none" when empty).
func workflowList(wfs []*workflow.Workflow) string {
	names := make([]string, 0, len(wfs))
	for _, wf := range byName(wfs) {
		names = append(names, wf.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// byName orders workflows by name: processes deploying different files at
// once lock the workflow rows in one order, so they cannot deadlock.
func byName(wfs []*workflow.Workflow) []*workflow.Workflow {
	return slices.SortedFunc(slices.Values(wfs), func(a, b *workflow.Workflow) int { return strings.Compare(a.Name, b.Name) })
}
