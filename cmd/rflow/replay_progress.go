package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/chain"
)

// replayProgress shows a replay's progress on stderr: a progress bar
// (blocks read, runs, rate, ETA) on a terminal, else a plain line at most
// every plainEvery (and at each phase's end).
type replayProgress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	total int64
	start time.Time
	last  time.Time
	// settled tracks the second phase: runs that finished after reading.
	settledShown int64
	reading      bool
}

const plainEvery = time.Second

func newReplayProgress(c *cli.Context, blocks int64) *replayProgress {
	p := &replayProgress{w: c.App.ErrWriter, total: blocks, start: time.Now(), reading: true}
	if isTerminal(c.App.ErrWriter) {
		p.bar = progressbar.NewOptions64(blocks,
			progressbar.OptionSetWriter(c.App.ErrWriter),
			progressbar.OptionSetDescription("replay: reading blocks"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(), progressbar.OptionShowDescriptionAtLineEnd())
	}
	return p
}

// read is chain.ReplayOptions.Progress. Blocks count every phase of the
// trigger once, so it is scaled back to the range.
func (p *replayProgress) read(r chain.ReplayProgress) {
	blocks := r.Blocks * p.total / max(1, r.Total)
	if p.bar != nil {
		p.bar.Describe(strings.TrimSuffix(fmt.Sprintf("logs %d, runs %d, %s", r.Logs, r.Runs, rateText(blocks, time.Since(p.start), "blocks")), ", "))
		_ = p.bar.Set64(blocks)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= plainEvery || r.Blocks == r.Total {
		p.last = now
		line := fmt.Sprintf("replay: blocks %d/%d (%d%%), logs %d, runs %d", blocks, p.total, blocks*100/max(1, p.total), r.Logs, r.Runs)
		el := now.Sub(p.start)
		if rate := rateText(blocks, el, "blocks"); rate != "" && blocks < p.total {
			eta := time.Duration(float64(p.total-blocks) / (float64(blocks) / el.Seconds()) * float64(time.Second))
			line += fmt.Sprintf(", %s, eta %s", rate, eta.Round(time.Second))
		}
		fmt.Fprintln(p.w, line)
	}
}

// settling shows the runs that have settled of those claimed.
func (p *replayProgress) settling(settled, claimed int64) {
	if p.reading {
		p.reading = false
		if p.bar != nil {
			_ = p.bar.Finish()
			fmt.Fprintln(p.w)
			p.bar = progressbar.NewOptions64(claimed, progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription("replay: runs settled"), progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionFullWidth())
		}
		p.last = time.Time{}
	}
	if p.bar != nil {
		_ = p.bar.Set64(settled)
		return
	}
	if now := time.Now(); (now.Sub(p.last) >= plainEvery && settled != p.settledShown) || settled == claimed && p.settledShown != settled || p.last.IsZero() {
		p.last, p.settledShown = now, settled
		fmt.Fprintf(p.w, "replay: runs settled %d/%d\n", settled, claimed)
	}
}

// rateMinElapsed is how long a phase must have run before its rate means
// anything: a replay that finished at once read its range in no time,
// which is no rate ("9626955 runs/s").
const rateMinElapsed = time.Second

// rateText is n units over elapsed as people read it ("120 blocks/s",
// "3.5 runs/s"), or "" before rateMinElapsed.
func rateText(n int64, elapsed time.Duration, unit string) string {
	if elapsed < rateMinElapsed || n <= 0 {
		return ""
	}
	r := float64(n) / elapsed.Seconds()
	if r < 10 {
		return fmt.Sprintf("%.1f %s/s", r, unit)
	}
	return fmt.Sprintf("%.0f %s/s", r, unit)
}

// done ends the bar.
func (p *replayProgress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}
