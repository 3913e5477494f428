package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
)

// printRunNotes prints what `runs show` says about a run besides its
// status: a trigger fired by hand, and an orphaned run (its block left the
// canonical chain).
func printRunNotes(w io.Writer, run *store.Run) {
	var t struct {
		Synthetic bool `json:"synthetic"`
	}
	if json.Unmarshal(run.Trigger, &t) == nil && t.Synthetic {
		fmt.Fprintf(w, "          synthetic: fired by hand with rflow run --event, not emitted on chain\n")
	}
	if run.OrphanedAt != nil {
		block := ""
		if run.BlockNumber != nil {
			block = fmt.Sprintf(" %d", *run.BlockNumber)
		}
		fmt.Fprintf(w, "orphaned  %s: its block%s was reorged away (see the reorg response below and docs/reorgs.md)\n",
			run.OrphanedAt.UTC().Format(time.RFC3339), block)
	}
}

// printRepairs says when a pending step of the run had lost its River job
// and rflow enqueued it again.
func printRepairs(w io.Writer, repairs []store.Repair) {
	for _, r := range repairs {
		of := ""
		if r.Response != nil {
			of = " of its on_reorg response " + *r.Response
		}
		fmt.Fprintf(w, "repaired  %s: step %s%s (attempt %d) had lost its River job (deleted or lost in a restore); enqueued again\n",
			r.RepairedAt.UTC().Format(time.RFC3339), r.StepKey, of, r.Attempt)
	}
}

// stepDetail is the DETAIL column of a step: its error, else for a send its
// transaction hash (from the output, or the relayer while it is pending),
// else its output.
func stepDetail(ctx context.Context, q store.DBTX, s *store.StepRun) string {
	if s.Error != nil {
		return oneLine(*s.Error, 70)
	}
	if s.Kind == "send" {
		// A completed send's output has the hash; a waiting one's names
		// the relayer's transaction, which has it once broadcast.
		var out struct {
			Hash       string `json:"hash"`
			Status     string `json:"status"`
			ExternalID string `json:"external_id"`
		}
		if json.Unmarshal(s.Output, &out) != nil || out.ExternalID == "" {
			return oneLine(string(s.Output), 70)
		}
		value := ""
		if v := s.SentValue(); v != "" {
			value = ", value " + v
		}
		if out.Hash != "" {
			return "tx " + out.Hash + " " + out.Status + value
		}
		tx, err := store.RelayerTxByExternalID(ctx, q, out.ExternalID)
		switch {
		case err == nil && tx.Hash != nil:
			return "tx " + *tx.Hash + " " + tx.Status + value
		case err == nil:
			return "tx not broadcast yet (" + tx.Status + ")" + value
		case !errors.Is(err, store.ErrRelayerTxNotFound):
			return "tx: " + oneLine(err.Error(), 60)
		}
	}
	if len(s.Output) > 0 {
		return oneLine(string(s.Output), 70)
	}
	return ""
}

// printWaits prints the wait_for conditions of a run (`runs show`): what
// each step awaits, its depth and deadline, and the event it holds.
func printWaits(w io.Writer, waits []*store.Wait) {
	for _, wt := range waits {
		fmt.Fprintf(w, "\nwait      %s (attempt %d): %s\n", wt.StepKey, wt.Attempt, wt.Status)
		cond := wt.Contract + "." + wt.Event
		if wt.Where != nil {
			cond += " where ${{ " + *wt.Where + " }}"
		}
		depth := fmt.Sprintf("%d confirmation(s)", wt.Confirmations)
		if wt.Finality != nil {
			depth = "until " + *wt.Finality
		}
		fmt.Fprintf(w, "  awaits  %s on chain %d, %s, from block %d\n", cond, wt.ChainID, depth, wt.FromBlock)
		if wt.Deadline != nil {
			fmt.Fprintf(w, "  timeout %s, then %s\n", wt.Deadline.UTC().Format(time.RFC3339), wt.OnTimeout)
		}
		if wt.CandBlock != nil && len(wt.EventData) > 0 {
			what := "candidate"
			switch wt.Status {
			case store.WaitMatched:
				what = "matched"
			case store.WaitArmed:
				what = "armed by"
			}
			var ev struct {
				TxHash string `json:"tx_hash"`
			}
			_ = json.Unmarshal(wt.EventData, &ev)
			fmt.Fprintf(w, "  %s tx %s (block %d, log %d)\n", what, ev.TxHash, *wt.CandBlock, *wt.CandIndex)
			fmt.Fprintf(w, "  event   %s\n", oneLine(string(wt.EventData), 200))
		}
	}
}

// printResponses prints a run's on_reorg responses under `runs show`: the
// reorg, what was decided and the compensation steps.
func printResponses(ctx context.Context, db store.DBTX, out io.Writer, rs []*server.Response) error {
	for _, r := range rs {
		fmt.Fprintf(out, "\nreorg response %s\n  fork      block %d on chain %d, depth %d (old %s, new %s)\n  status    %s\n",
			r.ID, r.ForkBlock, r.ChainID, r.Depth, shortHash(r.OldHash), shortHash(r.NewHash), responseStatus(r))
		if r.Error != nil {
			fmt.Fprintf(out, "  error     %s\n", *r.Error)
		}
		if r.ReincludedAt != nil {
			fmt.Fprintf(out, "  back      %s: the log was re-included after this decision (docs/reorgs.md)\n",
				r.ReincludedAt.UTC().Format(time.RFC3339))
		}
		steps, err := store.JournalSteps(ctx, db, store.ReorgJournal, r.ID)
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			continue
		}
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
		printSteps(ctx, db, w, steps)
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func responseStatus(r *server.Response) string {
	switch store.RunStatus(r.Status) {
	case store.RunPending:
		return fmt.Sprintf("pending: decided once the run's ingestion passes block %d", r.DecideAt)
	case store.RunReincluded:
		return "reincluded: the log is back in the canonical chain; the run went on"
	}
	return r.Status + " (on_reorg compensation)"
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:10] + "…"
	}
	if h == "" {
		return "-"
	}
	return h
}
