package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rflow-dev/rflow/store"
)

// InFlight describes what this process is working now, for a shutdown to
// say what it waits for: the total and, for at most limit of them, "run
// <id> step <key>" for a step (the step a job carries inline, not the
// one it started with), else the job's kind (a relayer batch, say).
func (e *Engine) InFlight(ctx context.Context, limit int) ([]string, int, error) {
	jobs, total, err := store.InFlightJobs(ctx, e.pool, e.client.ID(), limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, describeJob(j))
	}
	return out, total, nil
}

func describeJob(j store.InFlightJob) string {
	step := func(run fmt.Stringer, key string) string {
		if j.Carried != "" {
			key = j.Carried
		}
		return fmt.Sprintf("run %s step %s", run, key)
	}
	switch j.Kind {
	case StepArgs{}.Kind():
		var a StepArgs
		if json.Unmarshal(j.Args, &a) == nil {
			return step(a.RunID, a.StepKey)
		}
	case FirstStepArgs{}.Kind():
		var a FirstStepArgs
		if json.Unmarshal(j.Args, &a) == nil {
			return step(a.RunID, a.StepKey)
		}
	}
	return j.Kind
}
