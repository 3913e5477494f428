// Package jobs is rflow's engine: River job args and workers for steps,
// the claim path that turns trigger occurrences into runs, the step journal
// discipline (state before side effect, outcome with the successor in one
// transaction), guards, reorg responses, rehearsals, the cron scheduler and
// the engine's maintenance. Files are named by the part of a run's life they
// hold, so the directory listing is the map:
//
//	engine*.go       the Engine and its Config (engine.go: what it is made
//	                 of), deploys and syncs of definitions (engine_deploy.go),
//	                 the relayer it sends through (engine_relayer.go), crash
//	                 points (engine_faults.go), metrics and traces
//	                 (engine_observer.go, engine_trace.go), and what is in
//	                 flight at shutdown (engine_inflight.go)
//	claim*.go        trigger occurrences into runs: the claim gate and the
//	                 first step's job in one transaction (claim.go), the job
//	                 args of a first step (claim_first_step.go), synthetic
//	                 event occurrences (claim_event_occurrence.go)
//	trigger_*.go     where occurrences come from: chain triggers and wait
//	                 feeds built from the deployed generations
//	                 (trigger_chain.go), cron ticks (trigger_cron.go), and
//	                 occurrences that fail at once (trigger_failure.go)
//	advance*.go      moving a run: the plan of a generation (advance_plan.go),
//	                 running pure steps and parking effects (advance.go),
//	                 settling an attempt and resuming at a step
//	                 (advance_resume.go)
//	step_*.go        one file per step kind and its helpers: the kind table
//	                 (step_kinds.go), the step job (step_worker.go), its
//	                 inline continuation to the steps after its own
//	                 (step_carry.go) and its timeouts (step_timeout.go),
//	                 http_call and notify
//	                 (step_http*.go), send (step_send*.go: hand-off to the
//	                 relayer, cancel, retry rules), delay (step_delay.go),
//	                 wait_for (step_wait*.go: parking and matching), approval
//	                 gates (step_approval*.go), and a settle that fails after
//	                 its effect (step_settle_failure.go)
//	guard_*.go       throttle, rate limits and the circuit breaker
//	reorg*.go        on_reorg responses to orphaned runs, and logs re-included
//	                 after their decision (reorg_late.go)
//	rehearsal.go     replays and workflow tests under their own names,
//	                 queues or schemas
//	maintenance_*.go the engine's upkeep: ledger and guard-window cleanup,
//	                 repairing runs whose job is gone, retiring a discarded
//	                 dev chain
package jobs
