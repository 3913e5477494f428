package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// devGenerations runs rflow dev's project one generation at a time. Every
// accepted edit (projectWatch) is a new generation of the whole project:
// the engine stops as on SIGTERM (no new claims; steps in flight reach
// their journal), and a new one starts on the new project, so every
// workflow is compiled against its networks, wallets, contracts and
// notifiers, and every trigger runs from what it declares. Runs in flight
// keep the workflow generation they started on and go on under the new
// engine. A generation that does not start is refused whole: the previous
// one starts again.
type devGenerations struct {
	base  engineOptions // all but project, ready and deploy
	watch *projectWatch
	view  *devView
	// first is told once the first generation is up (it starts the view's
	// run watcher and prints the console line).
	first func(*jobs.Engine)
}

// run runs generations until ctx ends.
func (g *devGenerations) run(ctx context.Context, project *workflow.Project) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	defer func() { stopWatch(); watcher.Wait() }()
	var (
		current  = project
		previous *workflow.Project
		change   *projectChange // what the current generation applies; nil for the first
		gen      = 1
		watching bool
	)
	for {
		o := g.base
		o.project = current
		if gen > 1 {
			o.deploy = g.deployer(change)
		}
		genCtx, stop := context.WithCancel(ctx)
		up := make(chan struct{})
		next := make(chan projectChange, 1)
		o.ready = func(e *jobs.Engine) {
			close(up)
			if gen == 1 {
				g.first(e)
			} else {
				g.generationUp(gen, change)
			}
			if !watching {
				watching = true
				watcher.Go(func() { g.watch.run(watchCtx) })
			}
			// Only a running generation takes an edit: one that arrives
			// while it starts waits for it.
			go func() {
				select {
				case c := <-g.watch.changes:
					next <- c
					stop()
				case <-genCtx.Done():
				}
			}()
		}
		err := runEngine(genCtx, o)
		stop()
		if ctx.Err() != nil {
			return err
		}
		switch {
		case err != nil && !isClosed(up) && previous != nil:
			// Refused whole: the previous generation starts again (and
			// its workflows are deployed again, should the refused one
			// have got that far).
			g.view.reloadFailed(change.files, fmt.Errorf("the new project did not start: %w", err))
			current, previous = previous, nil
			change = &projectChange{project: current, files: change.files, rollback: true}
			gen--
		case err != nil:
			return err
		default:
			select {
			case c := <-next:
				previous, current, change = current, c.project, &c
				gen++
			default:
				return nil // stopped without an edit: only ctx does that
			}
		}
		if o.listener != nil {
			if g.base.listener, err = relisten(ctx, o.listener); err != nil {
				return err
			}
		}
	}
}

// deployer deploys the new generation's workflows on purpose, as `rflow
// workflows deploy` does: the file is the truth under rflow dev, so an
// edit back to an older definition rolls back to it. The project's sources
// are stored with them, as a deploy stores them, so `runs retry` and
// `workflows resume` without the files compile against this generation.
func (g *devGenerations) deployer(change *projectChange) func(context.Context, *jobs.Engine) error {
	return func(ctx context.Context, e *jobs.Engine) error {
		var deployed []store.Deployed
		err := pgx.BeginFunc(ctx, g.base.db.Pool, func(tx pgx.Tx) error {
			var err error
			if deployed, err = e.DeployWorkflows(ctx, tx, nil); err != nil {
				return err
			}
			return saveSources(ctx, tx, e.Project())
		})
		if err != nil {
			return err
		}
		for _, d := range deployed {
			if !d.Changed {
				continue
			}
			file := change.files
			if wf := change.project.Workflow(d.Name); wf != nil && wf.Pos.File != "" {
				file = g.watch.rel(wf.Pos.File)
			}
			g.view.reloaded(file, d)
		}
		return nil
	}
}

// generationUp says that the project's generation gen runs.
func (g *devGenerations) generationUp(gen int, change *projectChange) {
	if change.rollback {
		g.view.printf("%s project generation %d runs again", g.view.stamp(time.Now()), gen)
		return
	}
	g.view.printf("%s reloaded %s: project generation %d runs (%d workflow(s); runs in flight keep their workflow generation)",
		g.view.stamp(time.Now()), change.files, gen, len(change.project.Workflows))
}

// checkInFlight refuses a project that cannot finish the runs in flight:
// each runs on the generation it was claimed under, which the new project
// must still compile (a contract, wallet or notifier it names must stay).
func checkInFlight(ctx context.Context, pool *pgxpool.Pool, p *workflow.Project) error {
	ns, err := store.LookupNamespace(ctx, pool, p.Name)
	if err != nil {
		return err
	}
	gens, err := store.InFlightGenerations(ctx, pool, ns)
	if err != nil {
		return err
	}
	var problems []string
	for _, g := range gens {
		spec, fromAPI, err := store.WorkflowSpec(ctx, pool, g.Workflow, g.Generation)
		if err != nil {
			return err
		}
		origin := workflow.OriginFile
		if fromAPI {
			origin = workflow.OriginAPI
		}
		if _, err := workflow.CompileSpec(p, spec, origin); err != nil {
			problems = append(problems, fmt.Sprintf("%s generation %d has %d run(s) in flight, which the new project cannot finish: %v",
				g.Workflow, g.Generation, g.Runs, err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (let them finish, or cancel them with rflow runs cancel, then save again)", strings.Join(problems, "; "))
	}
	return nil
}

// relisten listens again on the address of ln, which the previous
// generation's HTTP server closed when it stopped.
func relisten(ctx context.Context, ln net.Listener) (net.Listener, error) {
	addr := ln.Addr().String()
	_ = ln.Close() // a generation that never served leaves it open
	var err error
	for range 20 {
		var next net.Listener
		if next, err = net.Listen("tcp", addr); err == nil {
			return next, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("listen on %s again after a reload: %w", addr, err)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
