package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"github.com/rflow-dev/rflow/store"
)

// The status panel: on a terminal, a few lines kept below the live lines
// and redrawn in place, as ponder dev does: each network's head, its age
// and blocks behind, backfill progress while catching up, the runs
// running, waiting and failed, and the console URL. Each line the view
// prints first erases the panel, then draws it again under the new line,
// so the lines scroll as usual and the panel stays at the bottom. Nothing
// of it reaches a pipe or a file.

// panelEvery is how often the panel is refreshed from the database.
const panelEvery = time.Second

// erasePanel removes the panel from the screen (v.mu held).
func (v *devView) erasePanel() {
	if v.drawn == 0 {
		return
	}
	// Up to the panel's first line, then clear to the end of the screen.
	fmt.Fprintf(v.w, "\x1b[%dF\x1b[J", v.drawn)
	v.drawn = 0
}

// drawPanel writes the panel below the cursor (v.mu held). Lines are cut
// to the terminal's width, so each takes one row and erasePanel knows how
// many to take back.
func (v *devView) drawPanel() {
	if !v.tty || len(v.panel) == 0 {
		return
	}
	width := v.width()
	for _, l := range v.panel {
		fmt.Fprintf(v.w, "%s\x1b[K\n", v.color(ansiDim, cut(l, width-1)))
	}
	v.drawn = len(v.panel)
}

// width is the terminal's width in columns (80 when it cannot be told).
func (v *devView) width() int {
	if f, ok := v.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return 80
}

// cut shortens s to n runes.
func cut(s string, n int) string {
	r := []rune(s)
	if n < 1 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// setPanel replaces the panel's lines and redraws it.
func (v *devView) setPanel(lines []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.erasePanel()
	v.panel = lines
	v.drawPanel()
}

// logWriter is where the loggers beside the view write: on a terminal each
// write goes above the panel, like the view's own lines.
func (v *devView) logWriter(w io.Writer) io.Writer {
	if !v.tty {
		return w
	}
	return panelWriter{v: v, w: w}
}

type panelWriter struct {
	v *devView
	w io.Writer
}

func (p panelWriter) Write(b []byte) (int, error) {
	p.v.mu.Lock()
	defer p.v.mu.Unlock()
	p.v.erasePanel()
	n, err := p.w.Write(b)
	p.v.drawPanel()
	return n, err
}

// runPanel refreshes the panel every panelEvery until ctx ends, then
// takes it off the screen. title heads it (the command and project).
func (v *devView) runPanel(ctx context.Context, pool *pgxpool.Pool, ns store.Namespace, title string) {
	if !v.tty {
		return
	}
	defer v.setPanel(nil)
	started := map[int64]int64{} // chain id → the trigger cursor when its backfill was first seen
	progress := func(n networkStatus) string {
		from, ok := started[n.ChainID]
		if !ok {
			from = *n.Triggers
			started[n.ChainID] = from
		}
		if n.Head <= from {
			return ""
		}
		return fmt.Sprintf(" (%d%% since the view started)", 100*(*n.Triggers-from)/(n.Head-from))
	}
	t := time.NewTicker(panelEvery)
	defer t.Stop()
	for {
		if v.quiet == nil || !v.quiet() {
			o, err := loadOverview(ctx, pool, ns)
			if err == nil {
				v.setPanel(append([]string{fmt.Sprintf("── %s ── %s ──", title, time.Now().Format("15:04:05"))}, o.lines(progress)...))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// panelTitle heads the panel.
func panelTitle(command, project string) string {
	return strings.TrimSpace(command + " " + project)
}
