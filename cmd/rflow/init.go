package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/devchain"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "scaffold a project: rflow.yaml, a contract (ABI and bytecode) and one workflow",
		ArgsUsage: "[dir]",
		Description: "Writes rflow.yaml, abis/Emitter.json, contracts/Emitter.bin, workflows/deposits.yaml and\n" +
			"tests/deposits.test.yaml into dir (default: the current directory), which must be empty or new.\n" +
			"`rflow dev --project dir` then runs it on a dev chain; `rflow test dir` runs its test. --force\n" +
			"writes into a non-empty directory and replaces those five files if they exist; other files are\n" +
			"left alone.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "write into a non-empty directory, replacing the scaffold's files"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("init takes at most one directory")
			}
			dir := c.Args().First()
			if dir == "" {
				dir = "."
			}
			files, err := scaffold(dir, c.Bool("force"))
			if err != nil {
				return err
			}
			for _, f := range files {
				fmt.Fprintln(c.App.Writer, "created", f)
			}
			fmt.Fprintf(c.App.Writer, "\nSee a run: rflow dev --project %s\nTest it:   rflow test %s\n", dir, dir)
			return nil
		},
	}
}

// scaffold writes a new project into dir and returns the paths it created.
// Unless force, it refuses a directory that holds anything, so nothing is
// half-written among a user's files.
func scaffold(dir string, force bool) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	files := []struct {
		path string
		body []byte
	}{
		{"rflow.yaml", []byte(fmt.Sprintf(initProject, projectSlug(filepath.Base(abs))))},
		{filepath.Join("abis", "Emitter.json"), devchain.EmitterABI()},
		{filepath.Join("contracts", "Emitter.bin"), append(devchain.EmitterBin(), '\n')},
		{filepath.Join("workflows", "deposits.yaml"), []byte(initWorkflow)},
		{filepath.Join("tests", "deposits.test.yaml"), []byte(initTest)},
	}
	if !force {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if len(entries) > 0 {
			names := make([]string, 0, 3)
			for _, e := range entries[:min(3, len(entries))] {
				names = append(names, e.Name())
			}
			if len(entries) > 3 {
				names = append(names, "…")
			}
			return nil, fmt.Errorf("%s is not empty (%s): choose a new directory (rflow init DIR), or pass --force to write the scaffold's files there, replacing any of the same name",
				dir, strings.Join(names, ", "))
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	var created []string
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return created, fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		// Without --force, O_EXCL: a file that appeared since the check is
		// still not overwritten.
		fh, err := os.OpenFile(p, flags, 0o644)
		if err != nil {
			return created, fmt.Errorf("create %s: %w", p, err)
		}
		_, werr := fh.Write(f.body)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return created, fmt.Errorf("write %s: %w", p, werr)
		}
		created = append(created, p)
	}
	return created, nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// projectSlug makes a project name from a directory name.
func projectSlug(base string) string {
	s := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if s == "" {
		return "my-project"
	}
	return s
}

const initProject = `# rflow project file. Reference: docs/workflows.md in the rflow repository.
#
# See a run now:   rflow dev --project .
#   starts an embedded Postgres and a dev chain that mines a block every
#   second, deploys contracts/Emitter.bin there, emits a Deposit every few
#   seconds and runs this project against it, with a local endpoint for the
#   steps. It sets the ${RFLOW_DEV_*} variables below.
# On your own node: rflow start -c rflow.yaml
#   the defaults after :- apply: anvil's chain, and the address anvil's
#   first dev account deploys its first contract at. A plain anvil mines
#   only when it gets a transaction, so events would wait for their
#   confirmation forever: run it as anvil --block-time 1, then deploy and
#   deposit with Foundry's cast (the key is anvil's first, public, dev key):
#     K=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80
#     cast send --private-key $K --create $(cat contracts/Emitter.bin)
#     cast send --private-key $K 0x5FbDB2315678afecb367f032d93F642f64180aa3 "deposit(uint256)" 1000
#
# ${VAR} is replaced by an environment variable when the file is loaded (a
# missing variable is an error; ${VAR:-default} falls back to the default);
# ${{ expr }} is an expression evaluated when a step runs.

# The project name keys the embedded database's data directory and the
# locks that keep two processes from double-running the same project.
name: %s

# Where runs and steps are journaled. Without it (and without --database-url
# or DATABASE_URL) rflow starts an embedded Postgres, which is for development.
# database_url: ${DATABASE_URL}

# The environment variables workflows may read, as ${{ env.NAME }}; no other
# variable is visible to them.
# env: [SLACK_URL]

networks:
  - name: local
    chain_id: ${RFLOW_DEV_CHAIN_ID:-31337}       # rflow checks the node agrees
    rpc: ${RFLOW_DEV_RPC:-http://127.0.0.1:8545}  # or a list [url1, url2] for failover
    # Depth at which events count as final: 1 is the block that holds the
    # event, so runs start one block after it. Fine on a dev chain, which
    # never reorgs (and mines on an interval); production chains want more.
    confirmations: 1
    block_poll_interval: 500ms

# Wallets sign sends. Keep keys out of this file:
# wallets:
#   - name: ops
#     private_key: ${OPS_PRIVATE_KEY}

contracts:
  - name: Emitter                    # contracts/Emitter.bin is its bytecode
    abi: ./abis/Emitter.json         # plain ABI JSON, or a Foundry/Hardhat artifact
    network: local
    address: ${RFLOW_DEV_CONTRACT:-0x5FbDB2315678afecb367f032d93F642f64180aa3}
    start_block: ${RFLOW_DEV_START_BLOCK:-0}

workflows:
  - include: workflows/*.yaml        # one file per workflow (or a list per file)
`

const initWorkflow = `# One run per Deposit event, once it has the network's confirmations.
name: on-deposit
trigger:
  event:
    contract: Emitter
    event: Deposit
    where: "${{ event.amount > 0 }}"  # runs only for matching events
steps:
  # Every request carries Idempotency-Key: <run id>:<step>, stable across
  # retries, so the receiver can drop duplicates. rflow dev serves
  # /dev/echo (it echoes the body and rates amounts from 1 ether "gold")
  # and /dev/notify; replace the default with your endpoint.
  - id: record
    http_call:
      method: POST
      url: ${RFLOW_DEV_ENDPOINT:-http://127.0.0.1:8090}/dev/echo
      body:
        sender: "${{ event.sender }}"
        amount: "${{ event.amount }}"
        tx: "${{ event.tx_hash }}"
      timeout: 10s
      retry: { max_attempts: 5, backoff: exponential }

  # Steps run in order and read earlier steps' journaled output; 'if' skips
  # one. Amounts are exact uint256 values.
  - id: alert
    if: "${{ event.amount >= ether('1') }}"
    notify:
      webhook: ${RFLOW_DEV_ENDPOINT:-http://127.0.0.1:8090}/dev/notify  # or slack: / discord: with a hook URL
      text: "large deposit: ${{ format_units(event.amount, 18) }} ETH from ${{ event.sender }} (rated ${{ steps.record.output.body.tier }})"
`

const initTest = `# A workflow test: rflow test feeds the workflow these occurrences, answers
# its HTTP requests from the stubs below and checks what comes out. It runs
# on the project's database under a namespaced name (test_<uuid>__on-deposit)
# that no live process ever runs, and deletes its rows when done.
# Format: docs/testing.md in the rflow repository.
workflow: on-deposit
tests:
  - name: a large deposit is recorded and alerts
    given:
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 2000000000000000000 }
    http:
      - method: POST
        url: http://127.0.0.1:8090/dev/echo
        body: { tier: gold }
      - method: POST
        url: http://127.0.0.1:8090/dev/notify
    expect:
      status: completed
      steps: { ran: [record, alert], skipped: [] }
      requests:
        - method: POST
          url: http://127.0.0.1:8090/dev/echo
          body: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: "2000000000000000000" }
        - method: POST
          url: http://127.0.0.1:8090/dev/notify
          body: { text: "large deposit: 2 ETH from 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 (rated gold)" }

  - name: a small deposit is recorded without an alert
    given:
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 1000 }
    http:
      - { method: POST, url: "http://127.0.0.1:8090/dev/echo", body: { tier: bronze } }
    expect:
      status: completed
      steps: { ran: [record], skipped: [alert] }

  - name: the where condition drops an empty deposit
    given:
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 0 }
    expect:
      runs: 0
`
