package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/sweep"
)

// recordingProgress is a sweep.Progress that keeps the notes and whether Stop was called.
type recordingProgress struct {
	mu      sync.Mutex
	notes   []string
	stopped bool
}

func (r *recordingProgress) Start(int, float64)                       {}
func (r *recordingProgress) Measuring(int, int, string, float64)      {}
func (r *recordingProgress) Recorded(sweep.Record, int, int, float64) {}
func (r *recordingProgress) Note(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, msg)
}
func (r *recordingProgress) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
}

// One signal set for every long command: SIGHUP (a closed terminal or ssh session) stops a
// sweep as Ctrl-C does, a SIGPIPE after it (the next write to a closed pipe) does not end the
// process, and a second stop signal clears the progress bar before it exits as that signal.
func TestSweepInterruptSignals(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE} {
		found := false
		for _, s := range interruptSignals {
			found = found || s == sig
		}
		if !found {
			t.Errorf("%v is not among the interrupt signals %v", sig, interruptSignals)
		}
	}
	exited := make(chan int, 1)
	old := exitProcess
	exitProcess = func(code int) { exited <- code; runtime.Goexit() }
	t.Cleanup(func() { exitProcess = old })

	sigs := make(chan os.Signal, 4)
	cancelled, finished := make(chan struct{}), make(chan struct{})
	defer close(finished)
	p := &recordingProgress{}
	go interruptSweep(sigs, func() { close(cancelled) }, finished, p)
	sigs <- syscall.SIGHUP
	<-cancelled
	sigs <- syscall.SIGPIPE
	select {
	case code := <-exited:
		t.Fatalf("a SIGPIPE after the first interrupt ended the process (%d)", code)
	case <-time.After(100 * time.Millisecond):
	}
	sigs <- syscall.SIGHUP
	select {
	case code := <-exited:
		if code != 128+int(syscall.SIGHUP) {
			t.Errorf("exit %d after a second SIGHUP, want %d", code, 128+int(syscall.SIGHUP))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second SIGHUP did not end the process")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		t.Errorf("the progress bar was not cleared before the exit: a frozen bar is left on the terminal")
	}
	if len(p.notes) != 1 || !strings.Contains(p.notes[0], "interrupted (SIGHUP)") {
		t.Errorf("notes %q, want one saying SIGHUP interrupted the sweep", p.notes)
	}
}

// `step --format jsonl | head -1`: the reader goes after the first record, the next write to
// standard output meets a closed pipe, and the step, which used to die of SIGPIPE with run.json
// left "running", stops after the measurement in flight and finishes run.json.
func TestStepClosedStdoutFinishesRunJSON(t *testing.T) {
	tiny := tinyStepConfig(t)
	useEmu(t)
	dir, _ := os.Getwd()
	cmd := helperCommand(t, dir, "step", "--backend", "emu", "--model-config", tiny, "--batch", "1,2,3,4,5,6",
		"--context", "40", "--steps", "2", "--format", "jsonl", "--out", "kept")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(stdout).ReadString('\n')
	stdout.Close() // as head -1 does
	code := processExitCode(cmd.Wait())
	if err != nil || !strings.HasPrefix(first, "{") {
		t.Fatalf("first line %q (%v):\n%s", first, err, stderr.String())
	}
	if code < 0 {
		t.Fatalf("the step was killed by signal %d (SIGPIPE is %d):\n%s", -code, syscall.SIGPIPE, stderr.String())
	}
	info := readRunInfo(t, "kept")
	if info.State == sweep.StateRunning || (info.State != sweep.StateInterrupted && info.State != sweep.StateComplete) {
		t.Errorf("run.json state %q after the closed pipe (exit %d), want interrupted (or complete, had the last record gone first):\n%s",
			info.State, code, stderr.String())
	}
	t.Logf("exit %d, run.json %s", code, info.State)
}
