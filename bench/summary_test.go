package bench

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
)

// summary collects each benchmark's headline figure so `make bench` ends
// with one table: figure, baseline, ratio, target.
var summary = &summaryTable{}

type summaryRow struct {
	name            string
	figure, base    float64
	ratio           float64 // figure/base unless set (a median of rounds' ratios)
	target          float64 // ratio target; 0 when the figure is not a ratio
	unit, targetStr string
	met             bool
}

type summaryTable struct {
	mu   sync.Mutex
	rows []summaryRow
}

// add records figure against base with a ratio target (0: none).
func (s *summaryTable) add(name string, figure, base, target float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, summaryRow{name: name, figure: figure, base: base, ratio: figure / base, target: target})
}

// addRatio is add with the ratio given: the median of rounds' ratios,
// which need not be the ratio of the medians.
func (s *summaryTable) addRatio(name string, figure, base, ratio, target float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, summaryRow{name: name, figure: figure, base: base, ratio: ratio, target: target})
}

// addAbs records a figure with no baseline, against a target in words
// (for example "< 50 ms") that it met or not.
func (s *summaryTable) addAbs(name string, figure float64, unit, target string, met bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, summaryRow{name: name, figure: figure, unit: unit, targetStr: target, met: met})
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func (s *summaryTable) print() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows) == 0 {
		return
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nsummary (load average %s)\n", strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "figure\tvalue\tbaseline\tratio\ttarget\tmet")
	for _, r := range s.rows {
		if r.targetStr != "" {
			fmt.Fprintf(w, "%s\t%.0f %s\t-\t-\t%s\t%s\n", r.name, r.figure, r.unit, r.targetStr, yesNo(r.met))
			continue
		}
		ratio := r.ratio
		if r.target == 0 {
			fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.2f\t-\t\n", r.name, r.figure, r.base, ratio)
			continue
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.2f\t≥ %.2f\t%s\n", r.name, r.figure, r.base, ratio, r.target, yesNo(ratio >= r.target))
	}
	w.Flush()
}
