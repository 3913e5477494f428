package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// A workflow run end to end on Postgres: a claim passes the claim gate and
// journals the run's first step with its job in one transaction; the engine
// performs each step as a River job and journals its outcome with the next
// step's row; pure steps (the skipped if) cost no job at all.
func Example() {
	ctx := context.Background()
	pool, closeDB, err := storetest.Open(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeDB()
	url := pool.Config().ConnString()

	// The endpoint the workflow calls.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path": %q, "got": %s}`, r.URL.Path, orNull(body))
	}))
	defer hook.Close()

	dir, err := os.MkdirTemp("", "rflow-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rflow.yaml")
	project := strings.ReplaceAll(`
name: example
workflows:
  - name: greet
    trigger: { manual: {} }
    steps:
      - id: hello
        http_call: { method: POST, url: "{{URL}}/hello", body: { name: "${{ trigger.input.name }}" } }
      - id: vip
        if: "${{ trigger.input.name == 'grace' }}"
        http_call: { url: "{{URL}}/vip" }
      - id: bye
        http_call: { method: POST, url: "{{URL}}/bye", body: { to: "${{ steps.hello.output.body.got.name }}" } }
`, "{{URL}}", hook.URL)
	if err := os.WriteFile(path, []byte(project), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	p, err := workflow.Load(path, workflow.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}

	engine, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: p, FetchCooldown: time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := engine.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Stop(ctx)
	if _, err := engine.SyncWorkflows(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// Claim the occurrence "order-1" twice: one run.
	payload, _ := json.Marshal(trigger.ManualPayload{Input: json.RawMessage(`{"name": "ada"}`)})
	claim := store.Claim{Workflow: "greet", TriggerKey: "order-1", TriggerKind: trigger.Manual, Trigger: payload}
	var id uuid.UUID
	for range 2 {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var created bool
			var err error
			id, created, err = engine.StartRunTx(ctx, tx, claim)
			fmt.Println("created:", created)
			return err
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}

	var run *store.Run
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if run, err = store.GetRun(ctx, pool, id, false); err != nil || run.Status.Terminal() {
			break
		}
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run:", run.Status)
	steps, err := store.RunSteps(ctx, pool, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	byKey := map[string]*store.StepRun{}
	for _, s := range steps {
		byKey[s.Key] = s
	}
	for _, k := range []string{"hello", "vip", "bye"} {
		fmt.Printf("%s: %s (attempt %d)\n", k, byKey[k].Status, byKey[k].Attempt)
	}
	// Each step's response is journaled; bye posted what hello's echoed.
	var bye struct {
		Body struct {
			Got struct {
				To string `json:"to"`
			} `json:"got"`
		} `json:"body"`
	}
	if err := json.Unmarshal(byKey["bye"].Output, &bye); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("bye sent to:", bye.Body.Got.To)
	// Output:
	// created: true
	// created: false
	// run: completed
	// hello: completed (attempt 1)
	// vip: skipped (attempt 1)
	// bye: completed (attempt 1)
	// bye sent to: ada
}

func orNull(b []byte) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}
