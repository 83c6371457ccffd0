package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/decodebench/decodebench/bench/measure"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// The fault-injection suite of the sweep: the fake kernels library (cgo/testdata/fakekernels.c)
// with a fault chosen by FAKEKERNELS_FAULT, and signals at each phase of a run. Each case
// asserts the exit code, the message's key words and the files left behind.

// fakeSweep points the sweep at the fake kernels library with fault (none when empty).
func fakeSweep(t *testing.T, fault string) {
	t.Helper()
	sweepHermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so"))
	t.Setenv("FAKEKERNELS_FAULT", fault)
	t.Setenv("FAKEKERNELS_NAME", "")
}

// tinyFakeSweep is tinySweep shrunk to one model of one layer and two configurations: small
// enough for the fake's naive loops.
func tinyFakeSweep(out string, extra ...string) []string {
	args := overrideFlags(tinySweep(out), "--hidden", "64", "--ffn", "128", "--heads", "1", "--kv-heads", "1", "--head-dim", "64",
		"--layers", "1", "--vocab", "64", "--batch", "1,2", "--context", "64")
	return overrideFlags(args, extra...)
}

func readRunInfo(t *testing.T, dir string) sweep.RunInfo {
	t.Helper()
	var info sweep.RunInfo
	data, err := os.ReadFile(filepath.Join(dir, sweep.InfoFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatalf("%s: %v", sweep.InfoFile, err)
	}
	return info
}

// A kernel that writes NaN fails its verification: the sweep records the failure with a
// finite or null error and the count of bad elements, goes on, exits 1, and --resume works.
func TestSweepFaultNaNOutput(t *testing.T) {
	for _, fault := range []string{"nan", "unwritten"} {
		t.Run(fault, func(t *testing.T) {
			fakeSweep(t, fault)
			_, code, msg := runSweepCLI(t, tinyFakeSweep("run")...)
			if code != exitFailure || !strings.Contains(msg, "configuration(s) failed") {
				t.Fatalf("exit %d %q; want exit 1 saying configurations failed", code, msg)
			}
			records := readSweepRecords(t, "run")
			if len(records) != 2 {
				t.Fatalf("%d records, want 2 (the sweep goes on after a failure)", len(records))
			}
			for _, r := range records {
				if r.Status != measure.StatusFailed || !strings.Contains(r.Reason, "NaN") {
					t.Errorf("record %s: %s %q; want failed naming NaN", r.Key, r.Status, r.Reason)
				}
			}
			kernels := string(mustRead(os.ReadFile(filepath.Join("run", sweep.KernelsFile))))
			if !strings.Contains(kernels, `"rel_error":null`) || !strings.Contains(kernels, `"non_finite":1`) {
				t.Errorf("%s does not give rel_error null and the count of bad elements:\n%s", sweep.KernelsFile, kernels)
			}
			if info := readRunInfo(t, "run"); info.State != sweep.StateComplete {
				t.Errorf("run.json state %q, want complete", info.State)
			}
			out, code, msg := runSweepCLI(t, "sweep", "--resume", "run", "--progress", "none")
			if code != 0 || !strings.Contains(out, "2 already done") {
				t.Fatalf("resume: exit %d %q\n%s; want exit 0 with both configurations already done", code, msg, out)
			}
			if n := len(readSweepRecords(t, "run")); n != 2 {
				t.Errorf("resume wrote more records: %d", n)
			}
		})
	}
}

// pauseAt makes the helper process stop the first time the sweep reaches phase: it writes
// the file "paused" in its working directory and waits for a signal (at most 30 s), then
// lets the command handle it.
func pauseAt(phase string) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, stopSignals...)
	var once sync.Once
	sweepPhaseHook = func(p string) {
		if p != phase {
			return
		}
		once.Do(func() {
			os.WriteFile("paused", []byte(phase), 0o644)
			select {
			case <-signals:
				time.Sleep(100 * time.Millisecond) // the command's own handler runs
			case <-time.After(30 * time.Second):
			}
		})
	}
}

// startPausedSweep runs args in a helper process that pauses at phase, and waits until it
// has.
func startPausedSweep(t *testing.T, phase string, args []string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	dir, _ := os.Getwd()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestSweepHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "DECODEBENCH_TEST_HELPER=1", "SWEEP_TEST_PAUSE="+phase)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat("paused"); err == nil {
			os.Remove("paused")
			return cmd, &out
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("the sweep never reached %q:\n%s", phase, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func processExitCode(err error) int {
	var exit *exec.ExitError
	if err == nil {
		return 0
	}
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return exit.ExitCode()
	}
	return -1000
}

func resumeArgs(extra ...string) []string {
	args := slices.DeleteFunc(tinySweep(""), func(s string) bool { return s == "--out" || s == "" })
	return append(append(args, "--resume", "run"), extra...)
}

// A signal at each phase of a sweep: SIGINT stops it with exit 130 and a resumable directory;
// SIGKILL leaves a directory that the next --resume continues (a run killed before run.json
// included), with the dead session marked and its stale lock taken over. Every resume ends
// with the 6 configurations recorded once each.
func TestSweepSignalAtEachPhase(t *testing.T) {
	testtier.Slow(t, "a sweep interrupted at each of its phases")
	tests := []struct {
		phase     string
		signal    syscall.Signal
		wantCode  int
		wantState string // run.json's state after the signal; "" for no run.json
		wantMsg   string // in the process's output
	}{
		{"run.json", syscall.SIGINT, exitInterrupted, sweep.StateInterrupted, "interrupted"},
		{"run.json", syscall.SIGKILL, -int(syscall.SIGKILL), "", ""},
		{"probe", syscall.SIGINT, exitInterrupted, sweep.StateInterrupted, "interrupted"},
		{"probe", syscall.SIGTERM, exitInterrupted, sweep.StateInterrupted, "interrupted"},
		{"probe", syscall.SIGKILL, -int(syscall.SIGKILL), sweep.StateRunning, ""},
		{"kernel", syscall.SIGINT, exitInterrupted, sweep.StateInterrupted, "interrupted"},
		{"kernel", syscall.SIGHUP, exitInterrupted, sweep.StateInterrupted, "interrupted (SIGHUP)"}, // the terminal closed
		{"kernel", syscall.SIGKILL, -int(syscall.SIGKILL), sweep.StateRunning, ""},
		{"report", syscall.SIGINT, exitInterrupted, sweep.StateComplete, "interrupted while the report was written"},
		{"report", syscall.SIGKILL, -int(syscall.SIGKILL), sweep.StateComplete, ""},
	}
	for _, tc := range tests {
		t.Run(tc.phase+"-"+tc.signal.String(), func(t *testing.T) {
			sweepHermetic(t, cgotest.EmuPath(t))
			cmd, out := startPausedSweep(t, tc.phase, tinySweep("run"))
			cmd.Process.Signal(tc.signal)
			err := cmd.Wait()
			if code := processExitCode(err); code != tc.wantCode || !strings.Contains(out.String(), tc.wantMsg) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tc.wantCode, tc.wantMsg, out.String())
			}
			if tc.wantState == "" {
				if _, err := os.Stat(filepath.Join("run", sweep.InfoFile)); err == nil {
					t.Fatalf("run.json written although the sweep was killed before it")
				}
			} else if info := readRunInfo(t, "run"); info.State != tc.wantState {
				t.Fatalf("run.json state %q, want %q", info.State, tc.wantState)
			}
			lock := string(mustRead(os.ReadFile(filepath.Join("run", sweep.LockFile))))
			if killed := tc.signal == syscall.SIGKILL; killed != (strings.TrimSpace(lock) == strconv.Itoa(cmd.Process.Pid)) {
				t.Errorf("lock file %q after %v of pid %d: want the pid left only by a killed process", lock, tc.signal, cmd.Process.Pid)
			}

			stdout, code, msg := runSweepCLI(t, resumeArgs()...)
			if code != 0 {
				t.Fatalf("resume: exit %d %s\n%s", code, msg, stdout)
			}
			checkRecordedOnce(t, "run", 6)
			info := readRunInfo(t, "run")
			if tc.wantState == "" { // adopted: the killed run never recorded a session
				if info.State != sweep.StateComplete || len(info.Sessions) != 1 {
					t.Errorf("adopted directory: state %q, %d sessions", info.State, len(info.Sessions))
				}
				return
			}
			if info.State != sweep.StateComplete || len(info.Sessions) != 2 {
				t.Fatalf("after the resume: state %q, %d sessions", info.State, len(info.Sessions))
			}
			first := info.Sessions[0]
			wantFirst := map[syscall.Signal]string{syscall.SIGINT: sweep.StateInterrupted, syscall.SIGTERM: sweep.StateInterrupted, syscall.SIGHUP: sweep.StateInterrupted, syscall.SIGKILL: sweep.StateDied}[tc.signal]
			if tc.phase == "report" {
				wantFirst = sweep.StateComplete
			}
			if first.State != wantFirst || first.Ended.IsZero() {
				t.Errorf("the first session after the resume: %+v, want state %q with an end", first, wantFirst)
			}
		})
	}
}

// The directory of a run killed before it wrote run.json: --resume without a model says the
// directory holds no run yet; with the model flags it adopts the directory.
func TestSweepResumeOfAnEmptyDirectory(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	os.MkdirAll("run", 0o755)
	os.WriteFile(filepath.Join("run", sweep.ResultsFile), nil, 0o644)
	_, code, msg := runSweepCLI(t, "sweep", "--resume", "run", "--backend", "emu")
	if code != exitUsage || !strings.Contains(msg, "holds no run yet") || strings.HasPrefix(msg, "no model given") {
		t.Fatalf("exit %d %q; want exit 2 saying the directory holds no run yet", code, msg)
	}
	if _, code, msg := runSweepCLI(t, resumeArgs()...); code != 0 {
		t.Fatalf("resume with the model: exit %d %s", code, msg)
	}
	if info := readRunInfo(t, "run"); info.State != sweep.StateComplete || len(readSweepRecords(t, "run")) != 6 {
		t.Errorf("adopted directory: state %q", info.State)
	}
}

// --resume of what is not a run directory says what is wrong with it, before the model.
func TestSweepResumeOfABadDirectory(t *testing.T) {
	sweepHermetic(t, "")
	os.MkdirAll("corrupt", 0o755)
	os.WriteFile(filepath.Join("corrupt", sweep.InfoFile), []byte(`{"schema": 1, "axes": `), 0o644)
	os.MkdirAll("orphan", 0o755)
	os.WriteFile(filepath.Join("orphan", sweep.KernelsFile), []byte("{}\n"), 0o644)
	os.WriteFile("file", nil, 0o644)
	tests := []struct {
		dir  string
		want []string
	}{
		{"nowhere", []string{"--resume nowhere", "no such directory"}},
		{"file", []string{"--resume file", "not a directory"}},
		{"corrupt", []string{"--resume corrupt", "run.json is not readable JSON"}},
		{"orphan", []string{"--resume orphan", "no run.json", "not resumable"}},
	}
	for _, tc := range tests {
		_, code, msg := runSweepCLI(t, "sweep", "--resume", tc.dir)
		if code != exitUsage || strings.Contains(msg, "no model given") {
			t.Errorf("--resume %s: exit %d %q; want exit 2 about the directory", tc.dir, code, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("--resume %s: %q does not say %q", tc.dir, msg, w)
			}
		}
	}
}

// Two writers in one run directory: while a sweep runs, a --resume and a new sweep into it
// are refused with exit 2 naming the holder's PID, and leave its files as they were.
func TestSweepSecondWriterRefused(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	cmd, out := startPausedSweep(t, "kernel", tinySweep("run"))
	before := string(mustRead(os.ReadFile(filepath.Join("run", sweep.InfoFile))))
	pid := strconv.Itoa(cmd.Process.Pid)
	for _, args := range [][]string{resumeArgs(), tinySweep("run")} {
		_, code, msg := runSweepCLI(t, args...)
		if code != exitUsage || !strings.Contains(msg, "in use") || !strings.Contains(msg, "pid "+pid) {
			t.Errorf("%v: exit %d %q; want exit 2 naming pid %s", args[len(args)-2:], code, msg, pid)
		}
	}
	if after := string(mustRead(os.ReadFile(filepath.Join("run", sweep.InfoFile)))); after != before {
		t.Errorf("a refused writer changed run.json")
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := processExitCode(cmd.Wait()); code != exitInterrupted {
		t.Fatalf("the first sweep: exit %d:\n%s", code, out.String())
	}
	// Once the holder is gone the lock is free.
	if _, code, msg := runSweepCLI(t, resumeArgs()...); code != 0 {
		t.Fatalf("resume after the holder ended: exit %d %s", code, msg)
	}
}

// A new sweep into a directory that holds a run exits 2 whichever check finds it.
func TestSweepOutHoldsARunExitsTwo(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	if _, code, msg := runSweepCLI(t, tinySweep("run")...); code != 0 {
		t.Fatalf("first sweep: exit %d %s", code, msg)
	}
	l, err := sweep.Lock("run")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Create(sweep.RunInfo{})
	l.Release()
	if !errors.Is(err, sweep.ErrHoldsRun) {
		t.Fatalf("Create over a run: %v, want ErrHoldsRun", err)
	}
	if _, code, msg := runSweepCLI(t, tinySweep("run")...); code != exitUsage || !strings.Contains(msg, "already holds a run") {
		t.Errorf("exit %d %q; want exit 2", code, msg)
	}
}

// A timer that reports 1e-20 ms gives speeds no card reaches: every measurement, the probes
// included, is failed as implausible, the sweep goes on and exits 1.
func TestSweepFaultImpossibleSpeed(t *testing.T) {
	fakeSweep(t, "timer-tiny")
	_, code, msg := runSweepCLI(t, tinyFakeSweep("run")...)
	if code != exitFailure || !strings.Contains(msg, "configuration(s) failed") {
		t.Fatalf("exit %d %q; want exit 1", code, msg)
	}
	for _, r := range readSweepRecords(t, "run") {
		if r.Status != measure.StatusFailed || !strings.Contains(r.Reason, "implausible: timer or kernel fault") {
			t.Errorf("record %s: %s %q; want failed as implausible", r.Key, r.Status, r.Reason)
		}
	}
	info := readRunInfo(t, "run")
	if info.Measured.BandwidthBytesPerSec != 0 || !strings.Contains(info.Measured.Source, "implausible") {
		t.Errorf("the read probe's impossible bandwidth became the measured ceiling: %+v", info.Measured)
	}
}

// A faulty timer (NaN, 0, negative) fails each measurement at its first sample as a timer fault.
func TestSweepFaultBadTimer(t *testing.T) {
	for _, fault := range []string{"timer-nan", "timer-zero", "timer-negative"} {
		t.Run(fault, func(t *testing.T) {
			fakeSweep(t, fault)
			start := time.Now()
			_, code, msg := runSweepCLI(t, tinyFakeSweep("run")...)
			if code != exitFailure || time.Since(start) > 20*time.Second {
				t.Fatalf("exit %d %q after %v; want exit 1, at once", code, msg, time.Since(start))
			}
			for _, r := range readSweepRecords(t, "run") {
				if r.Status != measure.StatusFailed || !strings.Contains(r.Reason, "timer fault") {
					t.Errorf("record %s: %s %q; want failed naming the timer fault", r.Key, r.Status, r.Reason)
				}
			}
		})
	}
}

// An ETA past what time.Duration holds is said, not wrapped into a negative time.
func TestSweepETAOfAbsurdTimes(t *testing.T) {
	for seconds, want := range map[float64]string{1e30: "more than 10000h", math.Inf(1): "more than 10000h", math.NaN(): "unknown", -1: "unknown", 3725: "1h02m", 42: "42s"} {
		if got := duration(seconds); got != want {
			t.Errorf("duration(%g) = %q, want %q", seconds, got, want)
		}
	}
}
