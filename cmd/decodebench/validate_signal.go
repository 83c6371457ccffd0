package main

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// interruptContext is cancelled by the first of interruptSignals (SIGINT, SIGTERM as scancel
// and Kubernetes send, SIGHUP, or SIGPIPE from a closed standard output), which signalled then
// names; validate finishes the measurements in flight and writes an INTERRUPTED report. A
// second stop signal ends the process at once (the report is written atomically, so none is
// left half-written); a second SIGPIPE, from the next write to the closed pipe, does not.
func interruptContext(log io.Writer) (ctx context.Context, signalled func() string, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs, unnotify := notifyInterrupts()
	var mu sync.Mutex
	var name string
	decided := false // the verdict is reached: a signal no longer changes it
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			mu.Lock()
			if decided {
				fmt.Fprintf(log, "validate: %s: the verdict is reached; writing the report (a second signal stops at once)\n", signalName(sig))
			} else {
				name = signalName(sig)
				fmt.Fprintf(log, "validate: %s: stopping after the measurements in flight; the report will say INTERRUPTED (a second signal stops at once)\n", name)
			}
			mu.Unlock()
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case sig := <-sigs:
				if !forcesExit(sig) {
					continue
				}
				fmt.Fprintf(log, "validate: %s again: stopping now\n", signalName(sig))
				exitProcess(exitInterrupted)
				return
			case <-done:
				return
			}
		}
	}()
	signalled = func() string {
		mu.Lock()
		defer mu.Unlock()
		decided = true
		return name
	}
	stop = func() {
		unnotify()
		close(done)
		cancel()
	}
	return ctx, signalled, stop
}
