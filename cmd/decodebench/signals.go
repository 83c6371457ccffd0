package main

import (
	"os"
	"os/signal"
	"syscall"
)

// stopSignals stop a long run (sweep, step, validate) as Ctrl-C does: the first after the
// measurement in flight, with the run directory or report closed and marked interrupted, a
// second one at once. SIGTERM is what scancel and a pod's deletion send; SIGHUP what a closed
// terminal or ssh session sends, which used to kill a sweep with run.json left "running".
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// interruptSignals are stopSignals and SIGPIPE: the one set every long command listens to.
// Listening to SIGPIPE turns a write to a closed standard output (`step --format jsonl |
// head -1`), which would kill the process outright, into an EPIPE error and an interrupt, so
// run.json is still finished. SIGPIPE never forces an exit: every later write to the closed
// pipe raises it again.
var interruptSignals = append(stopSignals[:len(stopSignals):len(stopSignals)], syscall.SIGPIPE)

// notifyInterrupts delivers interruptSignals on the returned channel until stop is called.
func notifyInterrupts() (sigs <-chan os.Signal, stop func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, interruptSignals...)
	return ch, func() { signal.Stop(ch) }
}

// forcesExit reports whether sig, arriving after a first interrupt, ends the process at once:
// every stop signal does, SIGPIPE does not.
func forcesExit(sig os.Signal) bool { return sig != syscall.SIGPIPE }

// exitProcess is os.Exit; tests of a second signal replace it.
var exitProcess = os.Exit

// signalExitCode is the status a process killed by sig gives (128 + its number), which a
// second signal exits with after clearing the terminal.
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// signalName names sig as kill(1) does.
func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE (standard output closed)"
	}
	return sig.String()
}
