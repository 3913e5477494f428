package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// sharedProject is one of two projects on one database and one chain:
// both have workflows named deposit (an event trigger on the same
// contract, parked on a wait_for of the same contract's Claimed) and hook
// (manual, under a durable rate limit of one run an hour and a budget),
// and one workflow only it has.
const sharedProject = `
name: %[1]s
networks:
  - { name: local, chain_id: 31337, rpc: %[2]q, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %[3]q, start_block: 0 }
workflows:
  - name: deposit
    trigger: { event: { contract: Vault, event: Deposit } }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.event.amount }}" }
          confirmations: 1
      - { id: tell, http_call: { method: POST, url: "%[4]s/%[1]s/deposit" } }
  - name: hook
    trigger: { manual: {} }
    rate_limit: { max: 1, per: 1h, durable: true }
    budgets: [{ name: spend, asset: native, cap: "1 ether", window: 24h }]
    steps:
      - { id: tell, http_call: { method: POST, url: "%[4]s/%[1]s/hook" } }
  - name: only_%[1]s
    trigger: { manual: {} }
    steps:
      - { id: pause, delay: 1s }
`

type sharedRuns struct {
	Runs []struct {
		Project  string `json:"project"`
		Workflow string `json:"workflow"`
		Status   string `json:"status"`
	} `json:"runs"`
}

// TestTwoProjectsShareADatabase runs two projects with same-named
// workflows on one database and one anvil chain, each with its own `rflow
// start`: each process claims and runs only its own project's runs (its
// River queue, its rows), the rate-limit windows and budgets are apart, a
// deploy of one retires nothing of the other, and runs list shows the
// current project's runs unless --all-projects.
func TestTwoProjectsShareADatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	s := newPathCounter(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := map[string]string{}
	for _, p := range []string{"alpha", "beta"} {
		config[p] = filepath.Join(dir, p+".yaml")
		require.NoError(t, os.WriteFile(config[p], []byte(fmt.Sprintf(sharedProject, p, node.URL, em.Address.Hex(), s.URL)), 0o644))
	}
	db := storetest.URL(t)
	pool := openPool(t, db)
	alpha := startRflow(t, db, config["alpha"], "")
	waitProjects(t, pool, "alpha")
	beta := startRflow(t, db, config["beta"], "")
	waitProjects(t, pool, "alpha", "beta")
	clients := nodeClients(t, pool)

	// Both wait feeds follow the contract before the events come.
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(DISTINCT task) FROM indexer.cursors WHERE task LIKE '%wait/%'`).Scan(&n)
		return err == nil && n == 2
	}, 60*time.Second, 100*time.Millisecond, "a wait feed per project; alpha:\n%s\nbeta:\n%s", alpha.out, beta.out)
	em.Deposit(7)
	node.Mine(2)
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.waits WHERE status = 'waiting'`).Scan(&n)
		return err == nil && n == 2
	}, 60*time.Second, 100*time.Millisecond, "one parked run per project; alpha:\n%s\nbeta:\n%s", alpha.out, beta.out)
	em.Transact("claim", big.NewInt(7))
	node.Mine(3)
	for _, p := range []string{"alpha", "beta"} {
		for range 2 { // the second is throttled by its own project's window only
			_, stderr, code := rflowCmd(t, "--database-url", db, "run", "hook", "-c", config[p])
			require.Equal(t, 0, code, stderr)
		}
	}
	require.Eventually(t, func() bool {
		return s.hits("/alpha/deposit") == 1 && s.hits("/beta/deposit") == 1 && s.hits("/alpha/hook") == 1 && s.hits("/beta/hook") == 1
	}, 60*time.Second, 100*time.Millisecond, "hits %v; alpha:\n%s\nbeta:\n%s", s.seen, alpha.out, beta.out)
	time.Sleep(time.Second)
	require.Equal(t, 1, s.hits("/alpha/hook"), "one run an hour per project")
	require.Equal(t, 1, s.hits("/beta/hook"))

	// The rows: two workflows of each name, each project's runs under its
	// own names, throttled apart.
	counts := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT workflow_name || '/' || status, count(*) FROM rflow.workflow_runs GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		counts[k] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"deposit/completed": 1, "beta.deposit/completed": 1,
		"hook/completed": 1, "hook/throttled": 1, "beta.hook/completed": 1, "beta.hook/throttled": 1}, counts)
	var budgets []string
	require.NoError(t, pgxCollect(ctx, pool, `SELECT workflow_name || ':' || name FROM rflow.budgets ORDER BY 1`, &budgets))
	require.Equal(t, []string{"beta.hook:spend", "hook:spend"}, budgets)

	// River: each project's jobs in its own queue, worked by its own
	// process only.
	type jobRow struct {
		Workflow, Queue string
		By              []string
	}
	jrows, err := pool.Query(ctx, `
		SELECT r.workflow_name, j.queue, j.attempted_by FROM river.river_job j
		JOIN rflow.workflow_runs r ON r.id::text = coalesce(j.args->>'run_id', j.args->>0)
		WHERE j.kind IN ('rflow.step', 'rflow.step.first')`)
	require.NoError(t, err)
	var jobs []jobRow
	for jrows.Next() {
		var j jobRow
		require.NoError(t, jrows.Scan(&j.Workflow, &j.Queue, &j.By))
		jobs = append(jobs, j)
	}
	require.NoError(t, jrows.Err())
	require.NotEmpty(t, jobs)
	for _, j := range jobs {
		project, queue := "alpha", "default"
		if j.Workflow == "beta.deposit" || j.Workflow == "beta.hook" {
			project, queue = "beta", "project_beta"
		}
		require.Equal(t, queue, j.Queue, "job of %s", j.Workflow)
		for _, by := range j.By {
			require.Equal(t, clients[project], by, "a job of %s was worked by another project's process", j.Workflow)
		}
	}

	// runs list: the project's own, under local names; --all-projects:
	// both, each with its project.
	list := func(args ...string) sharedRuns {
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db, "runs", "list", "-o", "json"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var l sharedRuns
		require.NoError(t, json.Unmarshal([]byte(out), &l), out)
		return l
	}
	for _, p := range []string{"alpha", "beta"} {
		l := list("-c", config[p])
		require.Len(t, l.Runs, 3, "%s's runs", p)
		for _, r := range l.Runs {
			require.Contains(t, []string{"deposit", "hook"}, r.Workflow)
			require.Empty(t, r.Project)
		}
		require.Len(t, list("-c", config[p], "--workflow", "hook").Runs, 2)
	}
	all := list("-c", config["alpha"], "--all-projects")
	require.Len(t, all.Runs, 6)
	perProject := map[string]int{}
	for _, r := range all.Runs {
		require.Contains(t, []string{"deposit", "hook"}, r.Workflow)
		perProject[r.Project]++
	}
	require.Equal(t, map[string]int{"alpha": 3, "beta": 3}, perProject)
	out, stderr, code := rflowCmd(t, "--database-url", db, "budgets", "ls", "-c", config["beta"], "-o", "json")
	require.Equal(t, 0, code, stderr)
	var bl []struct {
		Workflow string `json:"workflow"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &bl), out)
	require.Len(t, bl, 1)
	require.Equal(t, "hook", bl[0].Workflow)

	// A deploy of beta's file retires what beta's file lacks, never
	// alpha's workflows, though beta has no only_alpha.
	out, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", config["beta"])
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "retired", out)
	require.NotContains(t, out, "only_alpha", out)
	var retired int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflows WHERE retired_at IS NOT NULL`).Scan(&retired))
	require.Zero(t, retired)
	ls, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "ls", "-c", config["beta"], "-o", "json")
	require.Equal(t, 0, code, stderr)
	var wfs []store.WorkflowRow
	require.NoError(t, json.Unmarshal([]byte(ls), &wfs))
	var names []string
	for _, w := range wfs {
		names = append(names, w.Name)
	}
	require.Equal(t, []string{"deposit", "hook", "only_beta"}, names)

	// Another project's run is not this project's to show or cancel.
	var alphaRun string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM rflow.workflow_runs WHERE workflow_name = 'hook' AND status = 'throttled'`).Scan(&alphaRun))
	_, _, code = rflowCmd(t, "--database-url", db, "runs", "cancel", alphaRun, "-c", config["beta"])
	require.Equal(t, 1, code)
	_, _, code = rflowCmd(t, "--database-url", db, "runs", "show", alphaRun, "-c", config["beta"])
	require.Equal(t, 1, code)
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM rflow.workflow_runs WHERE id = $1`, alphaRun).Scan(&status))
	require.Equal(t, "throttled", status)
	alpha.stop(t)
	beta.stop(t)
}

// TestUpgradeAnotherProjectStartsFirst: a database an earlier version
// left with project alpha's bare workflows and runs; after the upgrade,
// project beta starts first. Beta does not adopt alpha's workflows (its
// own are apart), its deploy retires none of them, and alpha, started
// again, finds its workflows and runs as they were.
func TestUpgradeAnotherProjectStartsFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	s := newPathCounter(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := map[string]string{}
	for _, p := range []string{"alpha", "beta"} {
		config[p] = filepath.Join(dir, p+".yaml")
		require.NoError(t, os.WriteFile(config[p], []byte(fmt.Sprintf(sharedProject, p, node.URL, em.Address.Hex(), s.URL)), 0o644))
	}
	db := storetest.URL(t)
	pool := openPool(t, db)
	alpha := startRflow(t, db, config["alpha"], "")
	_, stderr, code := rflowCmd(t, "--database-url", db, "run", "hook", "-c", config["alpha"])
	require.Equal(t, 0, code, stderr)
	require.Eventually(t, func() bool { return s.hits("/alpha/hook") == 1 }, 60*time.Second, 100*time.Millisecond, "output:\n%s", alpha.out)
	alpha.stop(t)
	// What the database of an earlier version holds: the same rows, no
	// rflow.projects (migration 039 not applied yet).
	_, err := pool.Exec(ctx, `DROP TABLE rflow.projects; DELETE FROM rflow.schema_migrations WHERE version = 39`)
	require.NoError(t, err)

	beta := startRflow(t, db, config["beta"], "")
	waitProjects(t, pool, "alpha", "beta")
	var prefix string
	require.NoError(t, pool.QueryRow(ctx, `SELECT prefix FROM rflow.projects WHERE name = 'beta'`).Scan(&prefix))
	require.Equal(t, "beta.", prefix, "beta did not adopt alpha's bare workflows")
	_, stderr, code = rflowCmd(t, "--database-url", db, "run", "hook", "-c", config["beta"])
	require.Equal(t, 0, code, stderr)
	require.Eventually(t, func() bool { return s.hits("/beta/hook") == 1 }, 60*time.Second, 100*time.Millisecond, "output:\n%s", beta.out)
	out, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", config["beta"])
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "retired", out)
	var retired int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflows WHERE retired_at IS NOT NULL`).Scan(&retired))
	require.Zero(t, retired, "beta's deploy retired none of alpha's workflows")
	beta.stop(t)

	alpha = startRflow(t, db, config["alpha"], "")
	out, stderr, code = rflowCmd(t, "--database-url", db, "runs", "list", "-c", config["alpha"], "-o", "json")
	require.Equal(t, 0, code, stderr)
	var l sharedRuns
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	require.Len(t, l.Runs, 1)
	require.Equal(t, "hook", l.Runs[0].Workflow)
	require.Equal(t, "completed", l.Runs[0].Status)
	ls, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "ls", "-c", config["alpha"], "-o", "json")
	require.Equal(t, 0, code, stderr)
	var wfs []store.WorkflowRow
	require.NoError(t, json.Unmarshal([]byte(ls), &wfs))
	require.Len(t, wfs, 3)
	for _, w := range wfs {
		require.Nil(t, w.RetiredAt, w.Name)
	}
	alpha.stop(t)
}

// waitProjects waits until the projects have registered on the database.
func waitProjects(t *testing.T, pool *pgxpool.Pool, projects ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got []string
		err := pgxCollect(context.Background(), pool, `SELECT name FROM rflow.projects ORDER BY name`, &got)
		return err == nil && slices.Equal(got, projects)
	}, 60*time.Second, 100*time.Millisecond, "projects %v registered", projects)
}

// nodeClients maps each live process's project to its River client id.
func nodeClients(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.Eventually(t, func() bool {
		rows, err := pool.Query(context.Background(), `SELECT project, client_id FROM rflow.nodes`)
		if err != nil {
			return false
		}
		defer rows.Close()
		for rows.Next() {
			var p, c string
			if rows.Scan(&p, &c) == nil {
				out[p] = c
			}
		}
		return len(out) == 2
	}, 60*time.Second, 100*time.Millisecond)
	return out
}

func pgxCollect(ctx context.Context, pool *pgxpool.Pool, sql string, into *[]string) error {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	*into = nil
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return err
		}
		*into = append(*into, v)
	}
	return rows.Err()
}

// TestMigrateRegistersTheProject: `rflow migrate -c` registers the file's
// project (how an upgraded database's owner claims its bare workflows
// before another project starts), and a read command registers none.
func TestMigrateRegistersTheProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string) string {
		path := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(path, []byte("name: "+name+"\nworkflows:\n  - name: w\n    trigger: { manual: {} }\n"+
			"    steps:\n      - { id: d, delay: 1s }\n"), 0o644))
		return path
	}
	db := storetest.URL(t)
	pool := openPool(t, db)
	_, stderr, code := rflowCmd(t, "--database-url", db, "runs", "list", "-c", write("reader"))
	require.Equal(t, 0, code, stderr)
	_, stderr, code = rflowCmd(t, "--database-url", db, "migrate", "-c", write("owner"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "project owner (the database's home project)")
	_, stderr, code = rflowCmd(t, "--database-url", db, "migrate", "-c", write("second"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "project second: workflows stored as second.<name>, River queue project_second")
	var got []string
	require.NoError(t, pgxCollect(ctx, pool, `SELECT name || '=' || prefix FROM rflow.projects ORDER BY name`, &got))
	require.Equal(t, []string{"owner=", "second=second."}, got)
}

const payProject = `
name: %[1]s
networks:
  - { name: local, chain_id: 31337, rpc: %[2]q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %[3]q }
workflows:
  - name: pay
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "1 gwei", window: 24h }]
    steps:
      - id: send
        send: { wallet: ops, network: local, to: %[4]q, value: "${{ gwei(1) }}", budget: petty }
`

// Two projects each have a wallet named ops, with different keys, and a
// workflow pay that sends from it under a budget of one send a day: each
// project's sends are signed by its own key (from its own address) and
// driven by its own process, and neither budget counts the other's spend.
func TestTwoProjectsSendFromTheirOwnWallets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	_, to := anviltest.Key(t, 0)
	dir := t.TempDir()
	config, from := map[string]string{}, map[string]string{}
	for i, p := range []string{"alpha", "beta"} {
		_, addr := anviltest.Key(t, 2+i)
		from[p] = addr.Hex()
		config[p] = filepath.Join(dir, p+".yaml")
		require.NoError(t, os.WriteFile(config[p], []byte(fmt.Sprintf(payProject, p, node.URL, "0x"+anviltest.DevKeys[2+i], to.Hex())), 0o644))
	}
	db := storetest.URL(t)
	pool := openPool(t, db)
	alpha := startRflow(t, db, config["alpha"], "")
	waitProjects(t, pool, "alpha")
	beta := startRflow(t, db, config["beta"], "")
	waitProjects(t, pool, "alpha", "beta")
	clients := nodeClients(t, pool)
	for _, p := range []string{"alpha", "beta"} {
		_, stderr, code := rflowCmd(t, "--database-url", db, "run", "pay", "-c", config[p])
		require.Equal(t, 0, code, stderr)
	}
	require.Eventually(t, func() bool {
		node.Mine(1)
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`).Scan(&n)
		return err == nil && n == 2
	}, 90*time.Second, 200*time.Millisecond, "both sends confirmed; alpha:\n%s\nbeta:\n%s", alpha.out, beta.out)

	rows, err := pool.Query(ctx, `
		SELECT r.workflow_name, t.from_address, t.status FROM relayer.transactions t
		JOIN rflow.workflow_runs r ON t.external_id LIKE 'rflow:' || r.id::text || ':%'`)
	require.NoError(t, err)
	got := map[string]string{}
	for rows.Next() {
		var wf, addr, status string
		require.NoError(t, rows.Scan(&wf, &addr, &status))
		require.Equal(t, "confirmed", status)
		got[wf] = addr
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 2)
	require.True(t, strings.EqualFold(from["alpha"], got["pay"]), "alpha's send is from alpha's key: %v", got)
	require.True(t, strings.EqualFold(from["beta"], got["beta.pay"]), "beta's send is from beta's key: %v", got)

	// Every relayer job of beta's send ran in beta's queue, in beta's process.
	jrows, err := pool.Query(ctx, `SELECT queue, attempted_by FROM river.river_job WHERE kind LIKE 'relayer%' AND kind <> 'relayer_recover'`)
	require.NoError(t, err)
	queues := map[string]bool{}
	for jrows.Next() {
		var q string
		var by []string
		require.NoError(t, jrows.Scan(&q, &by))
		queues[q] = true
		project := map[string]string{"default": "alpha", "project_beta": "beta"}[q]
		require.NotEmpty(t, project, "relayer job in queue %s", q)
		for _, c := range by {
			require.Equal(t, clients[project], c, "a %s relayer job was worked by another project's process", project)
		}
	}
	require.NoError(t, jrows.Err())
	require.Equal(t, map[string]bool{"default": true, "project_beta": true}, queues)

	// Each budget spent its one send: neither counts the other's.
	var spent []string
	require.NoError(t, pgxCollect(ctx, pool, `SELECT workflow_name || ':' || status FROM rflow.budget_reservations ORDER BY 1`, &spent))
	require.Equal(t, []string{"beta.pay:spent", "pay:spent"}, spent)
	alpha.stop(t)
	beta.stop(t)
}

// rflow status counts the runs of its own project only: two projects on
// one database, one run waiting in the first and two in the second.
func TestStatusCountsItsOwnProject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string) string {
		path := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(path, []byte("name: "+name+"\nworkflows:\n  - name: w\n    trigger: { manual: {} }\n"+
			"    steps:\n      - { id: d, delay: 1h }\n"), 0o644))
		return path
	}
	db := storetest.URL(t)
	owner, second := write("owner"), write("second")
	for config, runs := range map[string]int{owner: 1, second: 2} {
		_, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", config)
		require.Equal(t, 0, code, stderr)
		for range runs {
			_, stderr, code = rflowCmd(t, "--database-url", db, "run", "w", "-c", config)
			require.Equal(t, 0, code, stderr)
		}
	}
	for config, want := range map[string]int64{owner: 1, second: 2} {
		require.Eventually(t, func() bool {
			out, stderr, code := rflowCmd(t, "--database-url", db, "status", "-o", "json", "-c", config)
			require.Equal(t, 0, code, stderr)
			var o overview
			require.NoError(t, json.Unmarshal([]byte(out), &o), out)
			return o.Runs.Queued+o.Runs.Waiting == want
		}, 30*time.Second, 200*time.Millisecond, config)
		out, stderr, code := rflowCmd(t, "--database-url", db, "status", "-o", "json", "-c", config)
		require.Equal(t, 0, code, stderr)
		var o overview
		require.NoError(t, json.Unmarshal([]byte(out), &o), out)
		require.Equal(t, want, o.Runs.Queued+o.Runs.Waiting+o.Runs.Running, "%s: %s", config, out)
	}
}
