package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rflow-dev/rflow/store"
)

// The live view's lines about runs: claimed, each step as it settles,
// held by a guard, waiting, finished, waiting for an approval. On a
// terminal each names its run as "workflow shortid"; otherwise as
// run=<id> workflow=<name>.

// who names a run on a terminal line: its workflow and short id.
func (v *devView) who(r *store.Run) string {
	return v.color(ansiBold, r.Workflow) + " " + v.color(ansiDim, shortID(r.ID))
}

// plainWho names a run on a plain line.
func plainWho(r *store.Run) string {
	return fmt.Sprintf("run=%s workflow=%s", r.ID, r.Workflow)
}

func (v *devView) claimed(r *store.Run) {
	if v.tty {
		v.printf("%s %s %s claimed  %s", v.stamp(r.CreatedAt), v.who(r), v.color(ansiCyan, "▸"), v.color(ansiDim, short(r.TriggerKey, 40)))
		return
	}
	v.printf("%s %s claimed key=%s", v.stamp(r.CreatedAt), plainWho(r), r.TriggerKey)
}

func (v *devView) step(r *store.Run, s *store.StepRun) {
	at := stepTime(s)
	took := ""
	if s.StartedAt != nil && s.FinishedAt != nil {
		took = s.FinishedAt.Sub(*s.StartedAt).Round(time.Millisecond).String()
	}
	errText := ""
	if s.Error != nil {
		errText = oneLine(*s.Error, 80)
	}
	if v.tty {
		mark := map[store.StepStatus]string{
			store.StepCompleted: v.color(ansiGreen, "✓"), store.StepFailed: v.color(ansiRed, "✗"),
			store.StepSkipped: v.color(ansiDim, "↷"), store.StepRetrying: v.color(ansiYell, "↻"),
			store.StepWaiting: v.color(ansiYell, "…"), store.StepCancelled: v.color(ansiDim, "⊘"),
		}[s.Status]
		detail := took
		if s.Status != store.StepCompleted {
			detail = strings.TrimSpace(string(s.Status) + " " + errText)
		}
		if hash := sentHash(s); hash != "" {
			detail = strings.TrimSpace(detail + " tx " + short(hash, 12) + " " + s.SentValue())
		}
		v.printf("%s %s %s %-12s %s", v.stamp(at), v.who(r), mark, s.Key, v.color(ansiDim, detail))
		for _, n := range v.takeNotes(r.ID, s.Key) {
			v.printf("%s %s %s %s", v.stamp(at), v.who(r), v.color(ansiYell, "✉"), n)
		}
		return
	}
	line := plainLine(fmt.Sprintf("%s %s step=%s %s", v.stamp(at), plainWho(r), s.Key, s.Status), took, errText)
	if hash := sentHash(s); hash != "" {
		line += " tx=" + hash
		if value := s.SentValue(); value != "" {
			line += fmt.Sprintf(" value=%q", value)
		}
	}
	for _, n := range v.takeNotes(r.ID, s.Key) {
		line += fmt.Sprintf(" notify=%q", n)
	}
	v.printf("%s", line)
}

// sentHash is the transaction hash a send step's output records (empty for
// other steps, and for a send not yet mined).
func sentHash(s *store.StepRun) string {
	if len(s.Output) == 0 {
		return ""
	}
	var out struct {
		Hash string `json:"hash"`
	}
	if json.Unmarshal(s.Output, &out) != nil {
		return ""
	}
	return out.Hash
}

// until formats when a held or waiting run is offered again.
func (v *devView) until(t time.Time) string {
	if v.tty {
		return t.Local().Format("15:04:05")
	}
	return t.UTC().Format(time.RFC3339)
}

// held says a run waits for its workflow's throttle, rate limit or
// concurrency, and until when.
func (v *devView) held(r *store.Run) {
	word := v.heldWord(r.Workflow)
	if v.tty {
		detail := word
		if r.WakeAt != nil {
			detail += " until " + v.until(*r.WakeAt)
		}
		v.printf("%s %s %s %s", v.stamp(r.UpdatedAt), v.who(r), v.color(ansiYell, "⏸"), detail)
		return
	}
	line := fmt.Sprintf("%s %s %s guard=%q", v.stamp(r.UpdatedAt), plainWho(r), r.Status, word)
	if r.WakeAt != nil {
		line += " until=" + v.until(*r.WakeAt)
	}
	v.printf("%s", line)
}

// waitingWords says in words what a waiting run waits for.
var waitingWords = map[store.RunStatus]string{
	store.RunWaitingDelay:    "waiting: delay",
	store.RunWaitingTx:       "waiting for its transaction",
	store.RunWaitingEvent:    "waiting for an event",
	store.RunWaitingApproval: "waiting for an approval",
}

func (v *devView) runStatus(r *store.Run) {
	at := r.UpdatedAt
	took := ""
	if r.FinishedAt != nil {
		at = *r.FinishedAt
		took = r.FinishedAt.Sub(r.CreatedAt).Round(time.Millisecond).String()
	}
	errText := ""
	if r.Error != nil {
		errText = oneLine(*r.Error, 80)
	}
	if !v.tty {
		line := plainLine(fmt.Sprintf("%s %s %s", v.stamp(at), plainWho(r), r.Status), took, errText)
		if r.Status.Waiting() && r.WakeAt != nil {
			line += " until=" + v.until(*r.WakeAt)
		}
		v.printf("%s", line)
		return
	}
	mark, word := v.color(ansiYell, "⏸"), string(r.Status)
	switch r.Status {
	case store.RunCompleted:
		mark, word = v.color(ansiGreen, "✓"), v.color(ansiGreen, "completed")
	case store.RunFailed:
		mark, word = v.color(ansiRed, "✗"), v.color(ansiRed, "failed")
	case store.RunCancelled:
		mark = v.color(ansiDim, "⊘")
	default:
		if w := waitingWords[r.Status]; w != "" {
			word = w
		}
		if r.WakeAt != nil {
			word += " until " + v.until(*r.WakeAt)
		}
	}
	detail := strings.TrimSpace(took + " " + errText)
	if took != "" {
		detail = "in " + detail
	}
	v.printf("%s %s %s %s %s", v.stamp(at), v.who(r), mark, word, v.color(ansiDim, detail))
}

// plainLine appends the duration and error of a key=value line.
func plainLine(line, took, errText string) string {
	if took != "" {
		line += " took=" + took
	}
	if errText != "" {
		line += fmt.Sprintf(" error=%q", errText)
	}
	return line
}

// approvalWaiting says what a pending approval of run r would send and how
// to decide it.
func (v *devView) approvalWaiting(r *store.Run, a *store.Approval) {
	short := store.ShortID(a.ID)
	if v.tty {
		v.printf("%s %s %s %s  approve: rflow approve %s | reject: rflow reject %s --reason R",
			v.stamp(a.CreatedAt), v.who(r), v.color(ansiYell, "?"), oneLine(summaryLine(a), 80), short, short)
		return
	}
	v.printf("%s %s step=%s approval=%s pending summary=%q approve=%q reject=%q", v.stamp(a.CreatedAt), plainWho(r), a.StepKey,
		a.ID, summaryLine(a), "rflow approve "+short, "rflow reject "+short+" --reason R")
}
