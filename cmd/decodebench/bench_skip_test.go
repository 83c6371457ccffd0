package main

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// bench linear and bench attention skip, before any device work, a job whose kernel the
// library lacks and one that needs more than --max-gb; at the limit, or with no limit, it runs.
func TestBenchSkipsBeforeTheDevice(t *testing.T) {
	if o := missingKernel("linear", "an mxfp4 grouped linear"); o.Status != measure.StatusSkipped || o.Kernel != "linear" ||
		!strings.Contains(o.Reason, "no kernel yet for an mxfp4 grouped linear") {
		t.Errorf("missing kernel: %+v", o)
	}
	limited := benchSettings{maxBytes: 1e9}
	if o, skip := limited.aboveMaxBytes("attention", 1e9); skip {
		t.Errorf("a job at the limit is skipped: %+v", o)
	}
	if o, skip := limited.aboveMaxBytes("attention", 2e9); !skip || o.Status != measure.StatusSkipped || o.Kernel != "attention" ||
		!strings.Contains(o.Reason, "above --max-gb 1") {
		t.Errorf("a job above the limit: %+v (skip %v)", o, skip)
	}
	if o, skip := (benchSettings{}).aboveMaxBytes("linear", 1e15); skip {
		t.Errorf("no limit, yet skipped: %+v", o)
	}

	// The attention table honours --max-gb as the linear one does (TestBenchModelSkipsMissingKernels).
	benchEnv(t, cgotest.EmuPath(t))
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "attention", "--backend", "emu", "--q-heads", "2", "--kv-heads", "1",
		"--head-dim", "64", "--batch", "1,2", "--context", "64", "--json", "--read-ceiling-gbps", "1", "--max-gb", "0.000001"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d %q\n%s", code, msg, stderr)
	}
	recs := readRecords(t, stdout)
	if len(recs) != 2 {
		t.Fatalf("want two attention records, got %v", recs)
	}
	for _, r := range recs {
		if reason, _ := r["reason"].(string); r["status"] != "skipped" || !strings.Contains(reason, "above --max-gb") {
			t.Errorf("record %v: want skipped above --max-gb", r)
		}
	}
}
