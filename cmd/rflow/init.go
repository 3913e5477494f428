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
		Usage:     "scaffold a project: rflow.yaml, an ABI and one workflow",
		ArgsUsage: "[dir]",
		Description: "Writes rflow.yaml, abis/Emitter.json and workflows/deposits.yaml into dir (default: the\n" +
			"current directory). Existing files are never overwritten.",
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("init takes at most one directory")
			}
			dir := c.Args().First()
			if dir == "" {
				dir = "."
			}
			files, err := scaffold(dir)
			if err != nil {
				return err
			}
			for _, f := range files {
				fmt.Fprintln(c.App.Writer, "created", f)
			}
			fmt.Fprintf(c.App.Writer, "\nNext: rflow validate -c %s\n", filepath.Join(dir, "rflow.yaml"))
			return nil
		},
	}
}

// scaffold writes a new project into dir and returns the paths it created.
// It refuses to start when any of them exists, so nothing is half-written
// over a user's files.
func scaffold(dir string) ([]string, error) {
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
		{filepath.Join("workflows", "deposits.yaml"), []byte(initWorkflow)},
	}
	var exist []string
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if _, err := os.Lstat(p); err == nil {
			exist = append(exist, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if len(exist) > 0 {
		return nil, fmt.Errorf("not overwriting %s: choose an empty directory (rflow init DIR) or move the file(s) away",
			strings.Join(exist, ", "))
	}
	var created []string
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return created, fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		// O_EXCL: a file that appeared since the check is still not overwritten.
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
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
# ${VAR} is replaced by an environment variable when the file is loaded (a
# missing variable is an error); ${{ expr }} is an expression evaluated when a
# step runs.

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
    chain_id: 31337                  # anvil's default; rflow checks the node agrees
    rpc: http://127.0.0.1:8545       # or a list [url1, url2] for failover
    confirmations: 2                 # depth at which events count as final
    block_poll_interval: 500ms

# Wallets sign sends. Keep keys out of this file:
# wallets:
#   - name: ops
#     private_key: ${OPS_PRIVATE_KEY}

contracts:
  - name: Emitter
    abi: ./abis/Emitter.json         # plain ABI JSON, or a Foundry/Hardhat artifact
    network: local
    # The first contract anvil's first dev account deploys lands here.
    address: "0x5FbDB2315678afecb367f032d93F642f64180aa3"
    start_block: 0

workflows:
  - include: workflows/*.yaml        # one file per workflow (or a list per file)
`

const initWorkflow = `# One run per Deposit event, once it has the network's confirmations.
# Run it: rflow start -c rflow.yaml   (then deposit on the Emitter contract)
name: on-deposit
trigger:
  event:
    contract: Emitter
    event: Deposit
    where: "${{ event.amount > 0 }}"  # runs only for matching events
steps:
  # Every request carries Idempotency-Key: <run id>:<step>, stable across
  # retries, so the receiver can drop duplicates.
  - id: record
    http_call:
      method: POST
      url: https://example.com/deposits   # your endpoint
      body:
        sender: "${{ event.sender }}"
        amount: "${{ event.amount }}"
        tx: "${{ event.tx_hash }}"
      timeout: 10s
      retry: { max_attempts: 5, backoff: exponential }

  # Steps run in order; 'if' skips one. Amounts are exact uint256 values.
  - id: alert
    if: "${{ event.amount >= ether('1') }}"
    notify:
      webhook: https://example.com/alerts  # or slack: / discord: with a hook URL
      text: "large deposit: ${{ format_units(event.amount, 18) }} ETH from ${{ event.sender }}"
`
