// Package workflow is rflow's project model: it loads rflow.yaml (networks,
// wallets, contracts and workflows, inline or through include globs), checks
// every definition, and compiles every ${{ }} expression against a typed
// environment that depends on the workflow's trigger.
//
// Everything else in rflow (the engine in package jobs, chain triggers, the
// relayer and the HTTP server) executes what this package builds, so the
// loader reports all problems at once with file:line:col positions and never
// panics on any input.
//
// A workflow's definition is also reduced to a canonical JSON Spec with a
// stable Hash: deploy generations pin that Spec, and CompileSpec rebuilds
// the same Workflow from it later.
package workflow
