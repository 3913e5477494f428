package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
)

// overview is the one-screen state of a deployment, as its database knows
// it: what `rflow status` prints and the live view's status panel shows.
type overview struct {
	Networks []networkStatus `json:"networks"`
	Runs     runTally        `json:"runs"`
	// Consoles are the console URLs the live processes serve.
	Consoles []string `json:"consoles"`
}

// networkStatus is one network's head and how far rflow has read it.
type networkStatus struct {
	Network string `json:"network"`
	ChainID int64  `json:"chain_id"`
	// Head is the newest block known to exist (the node's last answer or
	// the window's head); HeadAgeSeconds how old that block is by its
	// timestamp (null: never polled).
	Head           int64    `json:"head"`
	HeadAgeSeconds *float64 `json:"head_age_seconds"`
	// Indexed is the head tracker's newest block; Behind is Head - Indexed.
	Indexed int64 `json:"indexed"`
	Behind  int64 `json:"behind"`
	// Triggers is the slowest chain trigger's cursor (null: none on this
	// network); CatchingUp says it trails the head by more than
	// backfillGap blocks: a backfill.
	Triggers   *int64 `json:"triggers_at"`
	CatchingUp bool   `json:"catching_up"`
}

// runTally counts the runs of live workflows (not rehearsals).
type runTally struct {
	Queued    int64 `json:"queued"`
	Running   int64 `json:"running"`
	Waiting   int64 `json:"waiting"`
	Throttled int64 `json:"throttled"`
	Failed    int64 `json:"failed"`
	Completed int64 `json:"completed"`
	Cancelled int64 `json:"cancelled"`
}

// backfillGap is how far a trigger may trail its network's head before the
// overview calls it catching up: more than confirmations commonly hold
// back, fewer than a start block in the past puts behind.
const backfillGap = 64

// loadOverview reads ns's project's overview: a handful of small queries.
// The heads are the chains' (shared by every project on the database); the
// trigger cursors, runs and consoles are the project's.
func loadOverview(ctx context.Context, db store.DBTX, ns store.Namespace) (overview, error) {
	var o overview
	heads, err := store.HeadProgresses(ctx, db)
	if err != nil {
		return o, err
	}
	cursors, err := store.TriggerCursors(ctx, db, ns)
	if err != nil {
		return o, err
	}
	at := map[int64]int64{}
	for _, c := range cursors {
		at[c.ChainID] = c.Block
	}
	for _, h := range heads {
		if h.Window < 0 && !h.LeaseLive {
			continue // a chain no process tracks now (a dev chain gone)
		}
		n := networkStatus{Network: h.Network, ChainID: h.ChainID, Head: h.Head(), Indexed: h.Window,
			Behind: max(0, h.Head()-h.Window)}
		if n.Network == "" {
			n.Network = fmt.Sprintf("chain %d", h.ChainID)
		}
		if h.Polled {
			age := h.NodeHeadAge.Seconds()
			n.HeadAgeSeconds = &age
		}
		if b, ok := at[h.ChainID]; ok {
			n.Triggers = &b
			n.CatchingUp = n.Head-b > backfillGap
		}
		o.Networks = append(o.Networks, n)
	}
	counts, err := store.LiveRunCounts(ctx, db, ns)
	if err != nil {
		return o, err
	}
	o.Runs = tally(counts)
	consoles, err := store.LiveConsoles(ctx, db, ns)
	if err != nil {
		return o, err
	}
	o.Consoles = []string{}
	for _, c := range consoles {
		o.Consoles = append(o.Consoles, c.URL)
	}
	if o.Networks == nil {
		o.Networks = []networkStatus{}
	}
	return o, nil
}

func tally(counts map[store.RunStatus]int64) runTally {
	var t runTally
	for s, n := range counts {
		switch {
		case s == store.RunQueued:
			t.Queued += n
		case s == store.RunRunning:
			t.Running += n
		case s == store.RunThrottled:
			t.Throttled += n
		case s.Waiting():
			t.Waiting += n
		case s == store.RunFailed:
			t.Failed += n
		case s == store.RunCompleted:
			t.Completed += n
		case s == store.RunCancelled:
			t.Cancelled += n
		}
	}
	return t
}

// lines renders o for a person, one line per network, then the runs and
// the console. progress, when set, adds a backfill's share done (the live
// view knows where the backfill stood when it started watching).
func (o overview) lines(progress func(networkStatus) string) []string {
	var out []string
	for _, n := range o.Networks {
		age := "never polled"
		if n.HeadAgeSeconds != nil {
			age = roundAge(*n.HeadAgeSeconds) + " old"
		}
		line := fmt.Sprintf("%-12s head %d (%s), %s", n.Network, n.Head, age, behindText(n))
		if n.Triggers != nil && n.CatchingUp {
			line += fmt.Sprintf("; backfill at block %d, %d to go", *n.Triggers, n.Head-*n.Triggers)
			if progress != nil {
				line += progress(n)
			}
		}
		out = append(out, line)
	}
	r := o.Runs
	runs := fmt.Sprintf("runs         %d running, %d waiting", r.Running+r.Queued, r.Waiting+r.Throttled)
	if r.Throttled > 0 {
		runs += fmt.Sprintf(" (%d throttled)", r.Throttled)
	}
	runs += fmt.Sprintf(", %d failed, %d completed", r.Failed, r.Completed)
	out = append(out, runs)
	if len(o.Consoles) > 0 {
		out = append(out, "console      "+strings.Join(o.Consoles, ", "))
	}
	return out
}

func behindText(n networkStatus) string {
	switch {
	case n.Indexed < 0:
		return "no block indexed yet"
	case n.Behind == 0:
		return "in sync"
	}
	return fmt.Sprintf("%d block(s) behind", n.Behind)
}

// roundAge prints an age in seconds as people read it: 4s, 3m10s, 2h5m.
func roundAge(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "one screen: each network's head, its age and blocks behind, backfill progress, run counts, the console URL",
		Description: "Reads the database only: works beside a running `rflow start` or `rflow dev`, or after it stopped.\n" +
			"-o json prints the same as one object (networks, runs, consoles).",
		Flags: []cli.Flag{configFlag(), outputFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "it shows the whole project"); err != nil {
				return err
			}
			if err := checkOutput(c); err != nil {
				return err
			}
			db, err := openExisting(c, projectName(c), newLogger(c))
			if err != nil {
				return err
			}
			defer db.Close()
			ns, err := readNamespace(c.Context, db.Pool, fileProjectName(c))
			if err != nil {
				return err
			}
			o, err := loadOverview(c.Context, db.Pool, ns)
			if err != nil {
				return err
			}
			if done, err := printJSON(c, o); done || err != nil {
				return err
			}
			if len(o.Networks) == 0 {
				fmt.Fprintln(c.App.Writer, "networks     none tracked yet")
			}
			for _, l := range o.lines(nil) {
				fmt.Fprintln(c.App.Writer, l)
			}
			if len(o.Consoles) == 0 {
				fmt.Fprintln(c.App.Writer, "console      none (no running process serves --http)")
			}
			return nil
		},
	}
}
