// Command temporalbench is the Temporal side of rflow's peer benchmark
// (bench/peer_test.go): the same workflow as rflow's side — three steps,
// each an HTTP POST to a local endpoint — as a Temporal workflow of three
// activities, with a worker in this process. It starts -n workflows as fast
// as -concurrency clients can, waits for each to finish and prints, as one
// JSON object, when each was started and when its result came back.
//
// It is its own module so that the Temporal SDK never becomes a
// dependency of rflow itself.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const taskQueue = "bench"

// result is what the benchmark reads: per workflow, its start and end in
// Unix nanoseconds of this machine's clock.
type result struct {
	Started []int64 `json:"started"`
	Done    []int64 `json:"done"`
	Failed  int     `json:"failed"`
	Error   string  `json:"error,omitempty"`
}

func main() {
	addr := flag.String("address", "127.0.0.1:7233", "Temporal frontend")
	url := flag.String("url", "", "the endpoint the activities POST to")
	n := flag.Int("n", 1000, "workflows to start")
	concurrency := flag.Int("concurrency", 50, "clients starting workflows at once")
	pollers := flag.Int("pollers", 0, "the worker's workflow and activity task pollers each (0: the SDK's default, 2)")
	flag.Parse()
	res, err := run(*addr, *url, *n, *concurrency, *pollers)
	if err != nil {
		res.Error = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	if err != nil {
		os.Exit(1)
	}
}

func run(addr, url string, n, concurrency, pollers int) (result, error) {
	ctx := context.Background()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(client.Options{HostPort: addr, Logger: logger})
	if err != nil {
		return result{}, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64 // as rflow's
	calls := &caller{http: &http.Client{Transport: transport, Timeout: 30 * time.Second}, url: url}
	w := worker.New(c, taskQueue, worker.Options{MaxConcurrentWorkflowTaskPollers: pollers, MaxConcurrentActivityTaskPollers: pollers})
	w.RegisterWorkflow(ThreeCalls)
	w.RegisterActivityWithOptions(calls.Call, activity.RegisterOptions{Name: "Call"})
	if err := w.Start(); err != nil {
		return result{}, fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	res := result{Started: make([]int64, n), Done: make([]int64, n)}
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Failed++
		if firstErr == nil {
			firstErr = err
		}
	}
	// The clients only start workflows, as rflow's only post webhooks;
	// each started workflow's result is awaited on its own goroutine.
	next := make(chan int)
	var starting, waiting sync.WaitGroup
	prefix := time.Now().UnixNano()
	for range concurrency {
		starting.Add(1)
		go func() {
			defer starting.Done()
			for i := range next {
				start := time.Now()
				r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-%d-%d", prefix, i), TaskQueue: taskQueue}, ThreeCalls, i)
				res.Started[i] = start.UnixNano()
				if err != nil {
					fail(err)
					continue
				}
				waiting.Add(1)
				go func() {
					defer waiting.Done()
					if err := r.Get(ctx, nil); err != nil {
						fail(err)
					}
					res.Done[i] = time.Now().UnixNano()
				}()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	starting.Wait()
	waiting.Wait()
	return res, firstErr
}

// ThreeCalls is the benchmark's workflow: three activities in sequence,
// each a POST to the endpoint.
func ThreeCalls(ctx workflow.Context, i int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	for _, step := range []string{"a", "b", "c"} {
		if err := workflow.ExecuteActivity(ctx, "Call", step, i).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

type caller struct {
	http *http.Client
	url  string
}

// Call POSTs to the endpoint's /step with an idempotency key, as rflow's
// http_call does.
func (c *caller) Call(ctx context.Context, step string, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/"+step, nil)
	if err != nil {
		return err
	}
	info := activity.GetInfo(ctx)
	req.Header.Set("Idempotency-Key", info.WorkflowExecution.ID+":"+step)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %s", step, resp.Status)
	}
	return nil
}
