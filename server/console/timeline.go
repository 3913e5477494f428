package console

import (
	"fmt"
	"time"

	"github.com/rflow-dev/rflow/store"
)

// The run page's timeline draws each journaled step as a bar from its
// start to its finish (to now while it runs or waits) on one time axis
// from the run's creation, with the step's event wait and approval gate as
// segments inside its bar. Positions are in thousandths of the axis: the
// bars are SVG rects (attributes, not inline styles, which the console's
// Content-Security-Policy forbids).

// timelineWidth is the axis length in SVG user units.
const timelineWidth = 1000

// minSegment keeps an instant visible.
const minSegment = 3

// segment is one rect on a timeline row.
type segment struct {
	X, W  float64
	Class string
	Title string
}

// timelineRow is one step's row.
type timelineRow struct {
	Key, Kind string
	Status    store.StepStatus
	Took      string
	Bar       segment
	// Before is the time from the step's creation (the run reached it) to
	// its start: its queueing, a delay's wait, a retry's backoff.
	Before *segment
	// Parts are the step's wait and approval, drawn inside its bar.
	Parts  []segment
	JobURL string
}

// timeline is the run page's timeline.
type timeline struct {
	Rows []timelineRow
	// Span is the length of the axis, from the run's creation.
	Span string
}

// span is an interval of the run; an open one ends at now.
type span struct{ from, to time.Time }

// part is a wait or an approval inside a step's bar.
type part struct {
	span
	class, title string
}

// newTimeline lays out a run's steps, waits and approvals at now.
func newTimeline(run *store.Run, steps []stepRow, waits []*store.Wait, aps []*store.Approval, now time.Time) timeline {
	t0 := run.CreatedAt
	end := now
	if run.FinishedAt != nil {
		end = *run.FinishedAt
	}
	stepSpans := make([]span, len(steps))
	for i, s := range steps {
		stepSpans[i] = stepSpan(s.StepRun, now)
		end = later(end, stepSpans[i].to)
	}
	partsOf := map[string][]part{}
	for _, w := range waits {
		sp := span{w.CreatedAt, openEnd(w.SettledAt, now)}
		end = later(end, sp.to)
		partsOf[w.StepKey] = append(partsOf[w.StepKey], part{sp, "wait", fmt.Sprintf("waited for %s.%s: %s (%s)", w.Contract, w.Event, w.Status, sp.to.Sub(sp.from).Round(time.Millisecond))})
	}
	for _, a := range aps {
		sp := span{a.CreatedAt, openEnd(a.DecidedAt, now)}
		end = later(end, sp.to)
		partsOf[a.StepKey] = append(partsOf[a.StepKey], part{sp, "approval", fmt.Sprintf("approval %s (%s)", a.Status, sp.to.Sub(sp.from).Round(time.Millisecond))})
	}
	total := end.Sub(t0)
	if total <= 0 {
		total = time.Millisecond
	}
	place := func(sp span, class, title string) segment {
		x := float64(sp.from.Sub(t0)) / float64(total) * timelineWidth
		w := float64(sp.to.Sub(sp.from)) / float64(total) * timelineWidth
		x = min(max(x, 0), timelineWidth-minSegment)
		w = min(max(w, minSegment), timelineWidth-x)
		return segment{X: round1(x), W: round1(w), Class: class, Title: title}
	}
	tl := timeline{Rows: make([]timelineRow, len(steps)), Span: total.Round(time.Millisecond).String()}
	for i, s := range steps {
		sp := stepSpans[i]
		took := sp.to.Sub(sp.from).Round(time.Millisecond).String()
		row := timelineRow{Key: s.Key, Kind: s.Kind, Status: s.Status, Took: took, JobURL: s.JobURL,
			Bar: place(sp, "bar "+string(s.Status), fmt.Sprintf("%s (%s): %s, +%s for %s", s.Key, s.Kind, s.Status,
				sp.from.Sub(t0).Round(time.Millisecond), took))}
		if gap := sp.from.Sub(s.CreatedAt); gap > 0 {
			before := place(span{s.CreatedAt, sp.from}, "before", fmt.Sprintf("%s: reached %s before it started", s.Key, gap.Round(time.Millisecond)))
			row.Before = &before
		}
		for _, p := range partsOf[s.Key] {
			row.Parts = append(row.Parts, place(p.span, p.class, p.title))
		}
		tl.Rows[i] = row
	}
	return tl
}

// stepSpan is when a step ran: from its start (its creation while it has
// not started) to its finish, or to now while it is queued, retrying or
// waiting.
func stepSpan(s *store.StepRun, now time.Time) span {
	from := s.CreatedAt
	if s.StartedAt != nil {
		from = *s.StartedAt
	}
	switch {
	case s.FinishedAt != nil:
		return span{from, later(from, *s.FinishedAt)}
	case s.Status == store.StepQueued || s.Status == store.StepRetrying || s.Status == store.StepWaiting:
		return span{from, later(from, now)}
	}
	return span{from, from}
}

func openEnd(t *time.Time, now time.Time) time.Time {
	if t != nil {
		return *t
	}
	return now
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }
