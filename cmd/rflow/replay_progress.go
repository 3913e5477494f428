package main

import (
	"fmt"
	"io"
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
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("blocks"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(), progressbar.OptionShowDescriptionAtLineEnd())
	}
	return p
}

// read is chain.ReplayOptions.Progress. Blocks count every phase of the
// trigger once, so it is scaled back to the range.
func (p *replayProgress) read(r chain.ReplayProgress) {
	blocks := r.Blocks * p.total / max(1, r.Total)
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("logs %d, runs %d", r.Logs, r.Runs))
		_ = p.bar.Set64(blocks)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= plainEvery || r.Blocks == r.Total {
		p.last = now
		el := now.Sub(p.start).Seconds()
		rate := float64(blocks) / max(el, 1e-3)
		eta := time.Duration(float64(p.total-blocks)/max(rate, 1e-9)) * time.Second
		fmt.Fprintf(p.w, "replay: blocks %d/%d (%d%%), logs %d, runs %d, %.0f blocks/s, eta %s\n",
			blocks, p.total, blocks*100/max(1, p.total), r.Logs, r.Runs, rate, eta.Round(time.Second))
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
				progressbar.OptionShowIts(), progressbar.OptionSetItsString("runs"), progressbar.OptionSetPredictTime(true),
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

// done ends the bar.
func (p *replayProgress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}
