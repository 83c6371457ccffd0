package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo/cgotest"
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

// tinyFakeSweep is one model, two configurations: small enough for the fake's naive loops.
func tinyFakeSweep(out string, extra ...string) []string {
	args := []string{"sweep", "--backend", "emu", "--out", out, "--progress", "lines",
		"--hidden", "64", "--ffn", "128", "--heads", "1", "--kv-heads", "1", "--head-dim", "64", "--layers", "1", "--vocab", "64",
		"--batch", "1,2", "--context", "64",
		"--warmup", "1", "--min-samples", "3", "--min-time", "0s", "--max-time", "50ms", "--target-spread", "0.5", "--max-samples", "5",
		"--max-rotate-bytes", "1048576", "--datasheet", "h200"}
	return append(args, extra...)
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
				if r.Status != sweep.StatusFailed || !strings.Contains(r.Reason, "NaN") {
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
