package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// peerWorkflows is how many workflows each side of the peer benchmark
// starts, by peerClients concurrent clients.
const (
	peerWorkflows = 1000
	peerClients   = 50
)

// endpoint is the local HTTP endpoint every step of both sides POSTs to.
// It records, per run, when its third call (/c) first arrived; the run is
// named by the Idempotency-Key header, "<run>:<step>" on both sides.
type endpoint struct {
	*httptest.Server
	mu    sync.Mutex
	third map[string]time.Time
}

func newEndpoint(b *testing.B) *endpoint {
	e := &endpoint{third: map[string]time.Time{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/c" {
			run, _, _ := strings.Cut(r.Header.Get("Idempotency-Key"), ":")
			e.mu.Lock()
			if _, seen := e.third[run]; !seen {
				e.third[run] = time.Now()
			}
			e.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	b.Cleanup(e.Close)
	return e
}

func (e *endpoint) thirdCall(run string) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.third[run]
	return t, ok
}

// peerSide is what one side of the peer benchmark measured: per workflow,
// when its client started it, when it was done (by that side's own
// account) and when its third HTTP call arrived.
type peerSide struct {
	started, done, third []time.Time
}

func (s peerSide) rate() float64 {
	first, last := slices.MinFunc(s.started, time.Time.Compare), slices.MaxFunc(s.done, time.Time.Compare)
	return float64(len(s.started)) / last.Sub(first).Seconds()
}

// latencies returns p50 and p99 of end - started.
func (s peerSide) latencies(end []time.Time) (p50, p99 time.Duration) {
	d := make([]time.Duration, len(end))
	for i := range end {
		d[i] = end[i].Sub(s.started[i])
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100]
}

// rflowWebhookProject is a 3-step http_call workflow triggered by a
// webhook, exactly once by its idempotency key.
func rflowWebhookProject(b *testing.B, url string) string {
	config := filepath.Join(b.TempDir(), "rflow.yaml")
	require.NoError(b, os.WriteFile(config, []byte(fmt.Sprintf(`
name: peer
workflows:
  - name: three
    trigger: { webhook: { idempotency_key: "${{ headers['x-idempotency-key'] }}" } }
    steps:
      - { id: a, http_call: { method: POST, url: "%[1]s/a" } }
      - { id: b, http_call: { method: POST, url: "%[1]s/b" } }
      - { id: c, http_call: { method: POST, url: "%[1]s/c" } }
`, url)), 0o644))
	return config
}

// startRflowHTTP starts `rflow start --http` (default settings otherwise)
// on a fresh database with the webhook project and waits for /readyz.
func startRflowHTTP(b *testing.B, bin, url string) (api string, pool *pgxpool.Pool) {
	db := storetest.URL(b)
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	addr := fmt.Sprintf("127.0.0.1:%d", anviltest.FreePort(b))
	startRflow(b, bin, db, rflowWebhookProject(b, url), "--http", addr)
	api = "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api, pool
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("rflow start not ready at %s after 1m", api)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postHook sends webhook i and returns the run id of the reply.
func postHook(client *http.Client, api string, key string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, api+"/hooks/three", bytes.NewReader([]byte(`{"n":1}`)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("webhook %s: %s: %s", key, resp.Status, body)
	}
	var reply struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		return "", fmt.Errorf("webhook %s: %w", key, err)
	}
	return reply.RunID, nil
}

// rflowSide starts n webhook runs with clients concurrent clients and
// waits for all to complete. A run is done at its finished_at (the
// transaction that completed its last step, on this machine's clock).
func rflowSide(b *testing.B, api string, pool *pgxpool.Pool, ep *endpoint, n, clients int) peerSide {
	ctx := context.Background()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = clients
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	s := peerSide{started: make([]time.Time, n), done: make([]time.Time, n), third: make([]time.Time, n)}
	runs := make([]string, n)
	next := make(chan int)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	prefix := uuid.NewString()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s.started[i] = time.Now()
				id, err := postHook(client, api, fmt.Sprintf("%s-%d", prefix, i))
				if err != nil {
					errs <- err
					return
				}
				runs[i] = id
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	require.NoError(b, <-errs)
	waitCount(b, pool, fmt.Sprintf(`SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed' AND id = ANY('{%s}'::uuid[])`,
		strings.Join(runs, ",")), n)
	finished := map[string]time.Time{}
	rows, err := pool.Query(ctx, `SELECT id::text, finished_at FROM rflow.workflow_runs WHERE id = ANY($1::uuid[])`, runs)
	require.NoError(b, err)
	for rows.Next() {
		var id string
		var at time.Time
		require.NoError(b, rows.Scan(&id, &at))
		finished[id] = at
	}
	require.NoError(b, rows.Err())
	for i, id := range runs {
		s.done[i] = finished[id]
		t, ok := ep.thirdCall(id)
		require.True(b, ok, "run %s completed without its third call", id)
		s.third[i] = t
	}
	return s
}
