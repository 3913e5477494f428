package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/workflow"
)

// Flags of `rflow start` that override the project's idempotency: block.
const (
	flagClientRetention        = "client-retention"
	flagDeterministicRetention = "deterministic-retention"
)

func retentionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagClientRetention,
			Usage: "how long a client command's response stays replayable, e.g. 24h, 2d (default: the project's idempotency.client_retention, else 24h)"},
		&cli.StringFlag{Name: flagDeterministicRetention,
			Usage: "retention of deterministic commands (cancellation, Idempotency-Class: automatic), at least 7d (default: the project's idempotency.deterministic_retention, else 14d)"},
	}
}

// retention is the project's command-ledger retention with the flags of c
// applied over it. A bad or too short value is a usage error naming the
// flag and the minimum.
func retention(c *cli.Context, p *workflow.Project) (workflow.Idempotency, error) {
	r := p.Idempotency
	if r.ClientRetention == 0 || r.DeterministicRetention == 0 {
		r = workflow.DefaultIdempotency()
	}
	if v := c.String(flagClientRetention); v != "" {
		d, err := workflow.ParseRetention(v)
		if err != nil {
			return r, usagef("--%s: %v", flagClientRetention, err)
		}
		r.ClientRetention = d
	}
	if v := c.String(flagDeterministicRetention); v != "" {
		d, err := workflow.ParseRetention(v)
		if err == nil {
			err = workflow.CheckDeterministicRetention(d)
		}
		if err != nil {
			return r, usagef("--%s: %v", flagDeterministicRetention, err)
		}
		r.DeterministicRetention = d
	}
	return r, nil
}

// describeRetention is the start-up log value of r.
func describeRetention(r workflow.Idempotency) string {
	return fmt.Sprintf("client %s, deterministic %s", r.ClientRetention, r.DeterministicRetention)
}
