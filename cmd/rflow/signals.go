package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitForced is the exit code of a second SIGINT/SIGTERM: 128+SIGINT, as a
// shell reports a process Ctrl-C ended.
const exitForced = 130

// shutdownContext is cancelled by the first SIGINT, SIGTERM or SIGHUP: a command
// stops gracefully (rflow start stops claiming and waits for the steps in
// flight). A second signal calls exit(exitForced) at once: the steps it
// interrupts are retried from the journal by the next start, as after a
// crash. stop releases the signals.
func shutdownContext(stderr io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if !signal.Ignored(syscall.SIGHUP) {
		// A closed terminal is a stop too, not a death that leaves the
		// process's jobs for the next start to rescue. (Under nohup the
		// hang-up stays ignored.)
		signal.Notify(sigs, syscall.SIGHUP)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "rflow: second %s: exiting now; steps in flight are retried from the journal on the next start\n", sigName(s))
			exit(exitForced)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

func sigName(s os.Signal) string {
	if s == os.Interrupt {
		return "interrupt (Ctrl-C)"
	}
	return s.String()
}
