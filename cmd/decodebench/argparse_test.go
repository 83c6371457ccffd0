package main

// Tests of the rules every command's flags follow (argparse.go) and of --format on every
// command that prints rows: each format reads back with its header and one row per record.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/format"
)

// checkFormat fails t unless stdout reads back as the format with n rows (n < 0: any number
// but 0) and every column named in want.
func checkFormat(t *testing.T, what, name, stdout string, n int, want ...string) {
	t.Helper()
	columns, rows, err := format.Shape(name, stdout)
	if err != nil {
		t.Fatalf("%s --format %s: %v\n%s", what, name, err, stdout)
	}
	if (n >= 0 && rows != n) || (n < 0 && rows == 0) {
		t.Errorf("%s --format %s: %d rows, want %d:\n%s", what, name, rows, n, stdout)
	}
	for _, w := range want {
		found := false
		for _, c := range columns {
			found = found || c == w
		}
		if !found {
			t.Errorf("%s --format %s: no column %q in %v", what, name, w, columns)
		}
	}
}

var structuredFormats = []string{format.MD, format.CSV, format.JSON, format.JSONL}

func TestPredictAndModelShowInEveryFormat(t *testing.T) {
	scrubEnv(t)
	predict := []string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1,64", "--context", "1k,8k"}
	for _, f := range structuredFormats {
		out, code, msg := runCLI(t, append(predict, "--format", f)...)
		if code != 0 {
			t.Fatalf("predict --format %s: exit %d %s", f, code, msg)
		}
		checkFormat(t, "predict", f, out, 4, "batch", "context", "per_request_tokens_per_s", "per_server_tokens_per_s", "fits_in_memory")
	}
	for _, f := range []string{format.MD, format.CSV, format.JSONL} {
		out, code, msg := runCLI(t, "model", "show", "--model", "llama3-8b", "--format", f)
		if code != 0 {
			t.Fatalf("model show --format %s: exit %d %s", f, code, msg)
		}
		checkFormat(t, "model show", f, out, -1, "name", "bytes", "flops")
	}
	out, code, msg := runCLI(t, "model", "show", "--model", "llama3-8b", "--format", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc["kernels"] == nil {
		t.Errorf("model show --format json: exit %d %s, %v: want the document with its kernels", code, msg, err)
	}
	if _, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--format", "xml"); code != exitUsage || !strings.Contains(msg, `--format "xml"`) || !strings.Contains(msg, "jsonl") {
		t.Errorf("--format xml: exit %d %q, want 2 naming the value and the formats", code, msg)
	}
	if _, code, msg := runCLI(t, "compare", "--format", "csv", "a", "b"); code != exitUsage || !strings.Contains(msg, `--format "csv"`) {
		t.Errorf("compare --format csv: exit %d %q, want 2: compare writes table, md and json", code, msg)
	}
}

func TestBenchInEveryFormat(t *testing.T) {
	emuEnv(t)
	base := append([]string{"bench", "probe", "read", "--backend", "emu", "--bytes", "65536"}, fastTiming...)
	for _, f := range append(structuredFormats, format.Table) {
		stdout, _, code, msg := runBench(t, append(base, "--format", f)...)
		if code != 0 {
			t.Fatalf("bench --format %s: exit %d %s", f, code, msg)
		}
		if f == format.Table {
			if !strings.Contains(stdout, "PROBE") {
				t.Errorf("bench --format table: no table:\n%s", stdout)
			}
			continue
		}
		// The launch baseline, then the read probe.
		checkFormat(t, "bench probe read", f, stdout, 2, "kind", "kernel", "status", "median_seconds", "achieved_gbps", "probe")
	}
}

// sweep --format: a row per configuration (the columns of results.csv, the card's identity
// on each), a missing value null or empty, never 0; the headline on stderr.
func TestSweepSummaryInEveryFormat(t *testing.T) {
	emuEnv(t)
	for _, f := range []string{format.CSV, format.JSON, format.MD} {
		stdout, stderr, code, msg := runApp(t, tinySweep("run-"+f, "--batch", "1,2", "--context", "64", "--format", f)...)
		if code != 0 {
			t.Fatalf("sweep --format %s: exit %d %s\n%s", f, code, msg, stdout)
		}
		checkFormat(t, "sweep", f, stdout, 2, "card", "decodebench_version", "batch", "step_seconds", "per_server_tokens_per_s", "sm_clock_mhz_min")
		if !strings.Contains(stderr, "EMULATED") || strings.Contains(stdout, "EMULATED") {
			t.Errorf("sweep --format %s: the headline belongs on stderr:\nstdout:\n%s\nstderr:\n%s", f, stdout, stderr)
		}
		if f == format.JSON {
			var rows []map[string]any
			json.Unmarshal([]byte(stdout), &rows)
			for _, r := range rows {
				// The emulator has no NVML: the clocks are unknown, not 0.
				if v, ok := r["sm_clock_mhz_min"]; !ok || v != nil || r["step_seconds"] == nil || r["card"] == nil {
					t.Errorf("sweep --format json: row %v: want a step time, a card and sm_clock_mhz_min null", r)
				}
			}
		}
	}
}

func TestValidateInEveryFormat(t *testing.T) {
	emuEnv(t)
	stdout, _, code, msg := runFleetCLI(t, "validate", "--simulate-gpus", "1", "--backend", "emu", "--suite", "tiny", "--format", "csv", "--out", "r.json")
	if code != 0 {
		t.Fatalf("validate --format csv: exit %d %s\n%s", code, msg, stdout)
	}
	checkFormat(t, "validate", format.CSV, stdout, -1, "card", "id", "verdict", "value", "message")
	if _, _, code, msg := runFleetCLI(t, "validate", "--simulate-gpus", "1", "--format", "csv", "--out", "-"); code != exitUsage || !strings.Contains(msg, "--out - and --format csv") {
		t.Errorf("--out - with --format csv: exit %d %q, want 2", code, msg)
	}
}

// A list flag given twice is one list; any other flag given twice is refused, naming it.
func TestRepeatedFlags(t *testing.T) {
	scrubEnv(t)
	out, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1,2", "--batch", "4", "--context", "1k", "--format", "json")
	var rows []predictRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("--batch twice: exit %d %s, %v", code, msg, err)
	}
	var batches []int
	for _, r := range rows {
		batches = append(batches, r.Batch)
	}
	if len(batches) != 3 || batches[0] != 1 || batches[1] != 2 || batches[2] != 4 {
		t.Errorf("--batch 1,2 --batch 4 measured batches %v, want [1 2 4]", batches)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--gpu", "h100-sxm"}, "--gpu given 2 times (h200, h100-sxm): give it once"},
		{[]string{"predict", "--model", "llama3-8b", "--model", "llama3-70b"}, "--model given 2 times"},
		{[]string{"predict", "--model", "llama3-8b", "--model=llama3-70b"}, "--model given 2 times"},
		{[]string{"predict", "-m", "llama3-8b", "--model", "llama3-70b"}, "--model given 2 times (llama3-8b, llama3-70b)"}, // -m is --model
		{[]string{"bench", "linear", "--backend", "emu", "--n", "8", "--k", "8", "--min-time", "1s", "--min-seconds", "2"}, "--min-time given 2 times (1s, 2s)"},
		{[]string{"validate", "--simulate-gpus", "1", "--gpu", "h200", "--expect", "h100-sxm"}, "--gpu given 2 times"},
		{[]string{"sweep", "--model", "llama3-8b", "--reserve", "0.1", "--reserve", "0.2"}, "--reserve given 2 times"},
		{[]string{"step", "--model", "llama3-8b", "--steps", "1", "--steps", "2"}, "--steps given 2 times"},
		{[]string{"validate", "--max-time", "1s", "--max-time", "2s"}, "--max-time given 2 times"},
		{[]string{"validate", "--min-time", "2s", "--max-time", "1s"}, "timing flags: "},
	} {
		_, code, msg := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, msg, tc.want)
		}
	}
}

// Every old name gives what its new name gives, and says the new name once on stderr.
func TestOldFlagNames(t *testing.T) {
	scrubEnv(t)
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		name     string
		old, new []string
		notice   string
	}{
		{"predict --json", []string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1", "--context", "1k", "--json"},
			[]string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1", "--context", "1k", "--format", "json"}, "--json is --format json now"},
		{"model show --json", []string{"model", "show", "--model", "llama3-8b", "--json"}, []string{"model", "show", "--model", "llama3-8b", "--format", "json"}, "--json is --format json now"},
		{"bench --min-seconds", []string{"bench", "linear", "--backend", "emu", "--n", "8", "--k", "8", "--min-seconds", "1", "--max-seconds", "0.1"},
			[]string{"bench", "linear", "--backend", "emu", "--n", "8", "--k", "8", "--min-time", "1s", "--max-time", "100ms"}, "--min-seconds is --min-time now"},
		{"step --datasheet", []string{"step", "--model", "llama3-8b", "--datasheet", "h900"}, []string{"step", "--model", "llama3-8b", "--gpu", "h900"}, "--datasheet is --gpu now"},
		{"sweep --datasheet", []string{"sweep", "--model", "llama3-8b", "--datasheet", "h900"}, []string{"sweep", "--model", "llama3-8b", "--gpu", "h900"}, "--datasheet is --gpu now"},
		{"validate --gpus", []string{"validate", "--simulate-gpus", "2", "--gpus", "5"}, []string{"validate", "--simulate-gpus", "2", "--device", "5"}, "--gpus is --device now"},
		{"validate --expect", []string{"validate", "--expect", "h900"}, []string{"validate", "--gpu", "h900"}, "--expect is --gpu now"},
		{"validate --json FILE", []string{"validate", "--simulate-gpus", "1", "--json", "."}, []string{"validate", "--simulate-gpus", "1", "--out", "."}, "--json is --out now"},
	} {
		oldOut, oldErr, oldCode, oldMsg := runApp(t, tc.old...)
		newOut, newErr, newCode, newMsg := runApp(t, tc.new...)
		if oldCode != newCode || oldMsg != newMsg {
			t.Errorf("%s: exit %d %q, the new name's %d %q", tc.name, oldCode, oldMsg, newCode, newMsg)
		}
		if !strings.Contains(tc.name, "bench") && oldOut != newOut {
			t.Errorf("%s: stdout differs from the new name's:\n%s\n---\n%s", tc.name, oldOut, newOut)
		}
		if tc.notice != "" && (strings.Count(oldErr, tc.notice) != 1 || strings.Contains(newErr, "now; the old name")) {
			t.Errorf("%s: stderr %q, want the notice %q once (and none for the new name: %q)", tc.name, oldErr, tc.notice, newErr)
		}
	}
	// --gpu with a device's index in sweep is the device, as it was, with a notice.
	_, stderr, _, _ := runApp(t, "sweep", "--model", "llama3-8b", "--gpu", "3", "--reserve", "2")
	if !strings.Contains(stderr, "--gpu 3 names a device: that is --device now") {
		t.Errorf("sweep --gpu 3: stderr %q, want the notice that --device names the device", stderr)
	}
}

// An old name's environment variable still sets the new flag, with a notice.
func TestOldEnvironmentVariables(t *testing.T) {
	scrubEnv(t)
	t.Setenv("DECODEBENCH_EXPECT", "h900")
	_, stderr, code, msg := runApp(t, "validate")
	if code != exitUsage || !strings.Contains(msg, `--gpu: unknown GPU "h900"`) || !strings.Contains(stderr, "DECODEBENCH_EXPECT is DECODEBENCH_GPU now") {
		t.Errorf("DECODEBENCH_EXPECT=h900: exit %d %q, stderr %q; want it read as --gpu h900 with a notice", code, msg, stderr)
	}
	t.Setenv("DECODEBENCH_GPU", "h100-sxm")
	if _, stderr, _, _ = runApp(t, "validate", "--simulate-gpus", "1", "--gpu", "h900"); strings.Contains(stderr, "DECODEBENCH_EXPECT") {
		t.Errorf("the line's --gpu gave way to the old variable: %q", stderr)
	}
}
