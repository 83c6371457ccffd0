package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruptContext is cancelled by the first SIGINT or SIGTERM (what scancel and Kubernetes
// send), which signalled then names; validate finishes the measurements in flight and writes
// an INTERRUPTED report. A second signal ends the process at once (the report is written
// atomically, so none is left half-written).
func interruptContext(log io.Writer) (ctx context.Context, signalled func() string, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
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
		select {
		case sig := <-sigs:
			fmt.Fprintf(log, "validate: %s again: stopping now\n", signalName(sig))
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	signalled = func() string {
		mu.Lock()
		defer mu.Unlock()
		decided = true
		return name
	}
	stop = func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
	return ctx, signalled, stop
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
