package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// fastTiming keeps emulated measurements to milliseconds.
var fastTiming = []string{"--warmup", "1", "--min-samples", "3", "--min-seconds", "0", "--target-spread", "1", "--max-seconds", "2"}

// readRecords reads a JSON Lines file (or text) into maps, leaving out the launch baseline's
// record (every bench command writes one; TestBenchLaunchBaseline checks it).
func readRecords(t *testing.T, text string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, r := range readAllRecords(t, text) {
		if r["kind"] != "launch" {
			recs = append(recs, r)
		}
	}
	return recs
}

// readAllRecords reads a JSON Lines file (or text) into maps.
func readAllRecords(t *testing.T, text string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %v\n%s", err, sc.Text())
		}
		recs = append(recs, m)
	}
	return recs
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkRecord asserts the fields every ok record has.
func checkRecord(t *testing.T, r map[string]any, kind string) {
	t.Helper()
	for _, field := range []string{"kind", "kernel", "status", "reason", "median_seconds", "min_seconds", "q1_seconds", "q3_seconds",
		"spread", "samples", "bytes", "flops", "achieved_gbps", "achieved_tflops", "rotation", "verified", "rel_error", "emulated"} {
		if _, ok := r[field]; !ok && field != "reason" {
			t.Errorf("%s record lacks %q: %v", kind, field, r)
		}
	}
	if r["kind"] != kind || r["status"] != "ok" || r["verified"] != true || r["emulated"] != true || !(r["median_seconds"].(float64) > 0) {
		t.Errorf("record %v", r)
	}
}

// tinyConfig writes a Hugging Face config.json small enough for the emulator.
func tinyConfig(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"model_type": "llama", "hidden_size": 128, "intermediate_size": 96, "num_hidden_layers": 2,
	  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 200, "torch_dtype": "bfloat16"}`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBenchLinear(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	out := filepath.Join(t.TempDir(), "results", "bench.jsonl")
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "40", "--k", "64",
		"--batch", "1,3", "--variant", "gemv", "--out", out}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s\n%s", code, msg, stdout, stderr)
	}
	for _, want := range []string{emulatedWarning, "read ceiling: none on the emulator (its read probe ran at ", "KERNEL", "B=1 N=40 K=64", "B=3 N=40 K=64", "gemv"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "read ceiling: 0 GB/s") {
		t.Errorf("the emulator's read ceiling printed as 0 GB/s:\n%s", stdout)
	}
	for _, want := range []string{emulatedWarning, "[1/2] linear B=1 N=40 K=64: median", "measuring the read ceiling"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	recs := readRecords(t, readFile(t, out))
	if len(recs) != 3 || recs[0]["kind"] != "probe" || recs[0]["kernel"] != "probe:read" {
		t.Fatalf("want the read probe and two linear records, got %d: %v", len(recs), recs)
	}
	for i, r := range recs[1:] {
		checkRecord(t, r, "linear")
		if r["kernel"] != "linear" || r["n"] != 40.0 || r["k"] != 64.0 || r["batch"] != float64([]int{1, 3}[i]) ||
			r["dtype"] != "bf16" || r["variant"] != "gemv" || !(r["split_k"].(float64) >= 1) {
			t.Errorf("record %v", r)
		}
		if !(r["read_ceiling_gbps"].(float64) > 0) || !(r["fraction_of_read_ceiling"].(float64) > 0) {
			t.Errorf("no read ceiling in %v", r)
		}
	}
	// Appended, not overwritten.
	if _, _, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "8", "--k", "8", "--batch", "1",
		"--read-ceiling-gbps", "100", "--out", out}, fastTiming...)...); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	recs = readRecords(t, readFile(t, out))
	if len(recs) != 4 || recs[3]["read_ceiling_gbps"] != 100.0 {
		t.Errorf("the second run (ceiling given, no probe) should append one record: %d, %v", len(recs), recs[len(recs)-1])
	}
}

func TestBenchLinearModel(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--model-config", tinyConfig(t),
		"--batch", "1,2", "--json", "--read-ceiling-gbps", "1"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, stderr)
	}
	recs := readRecords(t, stdout)
	// qkv (2+2*1)*64 = 256 x 128, o 128 x 128, gate_up 192 x 128, down 128 x 96, lm_head 200 x 128:
	// kernel-major, each at both batches.
	want := []struct {
		kernel string
		n, k   float64
	}{{"qkv_proj", 256, 128}, {"o_proj", 128, 128}, {"gate_up_proj", 192, 128}, {"down_proj", 128, 96}, {"lm_head", 200, 128}}
	if len(recs) != 2*len(want) {
		t.Fatalf("%d records:\n%s", len(recs), stdout)
	}
	for i, r := range recs {
		w := want[i/2]
		checkRecord(t, r, "linear")
		if r["kernel"] != w.kernel || r["n"] != w.n || r["k"] != w.k || r["batch"] != float64(1+i%2) || r["model"] == "" {
			t.Errorf("record %d: %v, want %+v", i, r, w)
		}
	}
}

func TestBenchAttention(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "attention", "--backend", "emu", "--q-heads", "4", "--kv-heads", "2",
		"--head-dim", "64", "--batch", "1,2", "--context", "16,40", "--page-size", "16", "--json"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, stderr)
	}
	recs := readRecords(t, stdout)
	if len(recs) != 5 {
		t.Fatalf("want the read probe and 4 attention records, got %d:\n%s", len(recs), stdout)
	}
	for i, r := range recs[1:] {
		checkRecord(t, r, "attention")
		b, ctx := float64(1+i/2), float64([]int{16, 40}[i%2])
		if r["batch"] != b || r["context"] != ctx || r["q_heads"] != 4.0 || r["kv_heads"] != 2.0 || r["head_dim"] != 64.0 ||
			r["page_size"] != 16.0 || r["kv_bytes"] != b*ctx*2*64*2*2 || r["variant"] != "simt" {
			t.Errorf("record %v", r)
		}
	}
	// A model's head layout; the table form; the tensor-core kernel.
	stdout, _, code, msg = runBench(t, append([]string{"bench", "attention", "--backend", "emu", "--model-config", tinyConfig(t),
		"--batch", "1", "--context", "20", "--read-ceiling-gbps", "1", "--variant", "mma"}, fastTiming...)...)
	if code != 0 || !strings.Contains(stdout, "B=1 Hq=2 Hkv=1 D=64 S=20") || !strings.Contains(stdout, "contiguous mma") ||
		!strings.Contains(stdout, emulatedWarning) {
		t.Errorf("exit %d (%s):\n%s", code, msg, stdout)
	}
	// A sliding window with sinks: the cache holds the whole context, the KV read is the window's.
	stdout, stderr, code, msg = runBench(t, append([]string{"bench", "attention", "--backend", "emu", "--q-heads", "4", "--kv-heads", "2",
		"--head-dim", "64", "--batch", "2", "--context", "100", "--window", "24", "--sinks", "--json"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("window and sinks: exit %d: %s\n%s", code, msg, stderr)
	}
	if recs := readRecords(t, stdout); len(recs) != 2 || recs[1]["status"] != "ok" || recs[1]["context"] != 100.0 || recs[1]["kv_bytes"] != 2*24*2*64*2*2.0 {
		t.Errorf("window and sinks: %v, want one ok record of 2 x 24 tokens read from a 100-token context", recs)
	}
}

func TestBenchProbe(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "probe", "--backend", "emu", "--bytes", "65536", "--json"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, stderr)
	}
	recs := readRecords(t, stdout)
	if len(recs) != len(cgo.ProbeKinds) {
		t.Fatalf("%d records:\n%s", len(recs), stdout)
	}
	for i, r := range recs {
		checkRecord(t, r, "probe")
		kind := cgo.ProbeKinds[i]
		if r["probe"] != kind.String() || (kind.Memory() && r["buffer_bytes"] != 65536.0) || (!kind.Memory() && r["iterations"] != 2.0) {
			t.Errorf("record %v", r)
		}
		if _, ok := r["fraction_of_datasheet"]; ok {
			t.Errorf("the emulator has no datasheet: %v", r)
		}
	}
	for _, args := range [][]string{{"bench", "probe", "read", "--bytes", "4096"}, {"bench", "probe", "all", "--bytes", "4096"},
		{"bench", "probe", "mma", "--iterations", "1"}} {
		stdout, _, code, msg := runBench(t, append(append(args, "--backend", "emu"), fastTiming...)...)
		if code != 0 || !strings.Contains(stdout, "PROBE") || !strings.Contains(stdout, "datasheet: unknown") {
			t.Errorf("%v: exit %d (%s):\n%s", args, code, msg, stdout)
		}
		// The tensor probe's rate is the mma.sync bf16 ceiling, never called the card's peak.
		if hasMMA := args[2] != "read"; hasMMA != strings.Contains(stdout, "mma.sync bf16 ceiling (% DATASHEET: of the dense bf16 tensor rate)") {
			t.Errorf("%v: the mma row's label:\n%s", args, stdout)
		}
		if !strings.Contains(stdout, "launch baseline: ") {
			t.Errorf("%v: no launch baseline:\n%s", args, stdout)
		}
	}
}

func TestBenchFailedVerificationExits1(t *testing.T) {
	benchEnv(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", "FAKE_LINEAR_BIAS=0.5"))
	out := filepath.Join(t.TempDir(), "r.jsonl")
	stdout, _, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "16", "--k", "16", "--batch", "1,2",
		"--out", out}, fastTiming...)...)
	if code != exitFailure || !strings.Contains(msg, "2 measurement(s) failed") || !strings.Contains(stdout, "FAILED: verification") {
		t.Fatalf("exit %d (%s):\n%s", code, msg, stdout)
	}
	recs := readRecords(t, readFile(t, out))
	if len(recs) != 3 || recs[0]["status"] != "ok" { // the read probe is fine
		t.Fatalf("records %v", recs)
	}
	for _, r := range recs[1:] {
		_, timed := r["median_seconds"] // left out, not 0: a script would read 0 s as infinitely fast
		if r["status"] != "failed" || r["verified"] != false || timed || r["samples"] != 0.0 {
			t.Errorf("a failed verification should be recorded as failed and untimed (no median_seconds): %v", r)
		}
	}
}

func TestBenchEnvVars(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	for name, value := range map[string]string{"DECODEBENCH_BACKEND": "emu", "DECODEBENCH_N": "24", "DECODEBENCH_K": "32",
		"DECODEBENCH_BATCH": "2", "DECODEBENCH_JSON": "1", "DECODEBENCH_MIN_SAMPLES": "2", "DECODEBENCH_MIN_SECONDS": "0",
		"DECODEBENCH_TARGET_SPREAD": "1", "DECODEBENCH_READ_CEILING_GBPS": "5", "DECODEBENCH_SEED": "9"} {
		t.Setenv(name, value)
	}
	stdout, _, code, msg := runBench(t, "bench", "linear")
	recs := readRecords(t, stdout)
	if code != 0 || len(recs) != 1 || recs[0]["n"] != 24.0 || recs[0]["k"] != 32.0 || recs[0]["batch"] != 2.0 ||
		recs[0]["seed"] != 9.0 || recs[0]["samples"].(float64) < 2 {
		t.Errorf("exit %d (%s): %v", code, msg, recs)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	// No library anywhere: a usage error must come before any device work (which would exit 1).
	benchEnv(t, filepath.Join(t.TempDir(), "nowhere"))
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	lin := []string{"bench", "linear", "--n", "8", "--k", "8"}
	att := []string{"bench", "attention", "--q-heads", "4", "--kv-heads", "2", "--head-dim", "64", "--context", "8"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "bench needs a kernel"},
		{[]string{"bench", "conv"}, `unknown kernel "conv"`},
		{[]string{"bench", "linear"}, "needs --model NAME"},
		{[]string{"bench", "linear", "--model", "llama3-8b", "--n", "8", "--k", "8"}, "not both"},
		{[]string{"bench", "linear", "--model", "llama-9000"}, `unknown model "llama-9000"`},
		{[]string{"bench", "linear", "--n", "8", "--k", "12"}, "--k 12: want a positive multiple of 8"},
		{[]string{"bench", "linear", "--n", "0", "--k", "8"}, "--n 0"},
		{append(lin, "--batch", "0"), "--batch"},
		{append(lin, "--batch", "1,1025"), "--batch 1025: the linear kernels take a batch of at most 1024"},
		{append(lin, "--batch", "x"), `item "x"`},
		{append(lin, "--dtype", "fp32"), `--dtype "fp32"`},
		{append(lin, "--variant", "wmma"), "unknown linear variant"},
		{append(lin, "--split-k", "-1"), "--split-k -1"},
		{append(lin, "--split-k", "65"), "--split-k 65"},
		{append(lin, "--variant", "mma", "--split-k", "2"), "only the gemv and tiled variants split K"},
		{append(lin, "--min-samples", "0"), "timing flags: minimum samples 0"},
		{append(lin, "--max-seconds", "0.1", "--min-seconds", "1"), "timing flags: timeout"},
		{append(lin, "--rotate-factor", "0"), "--rotate-factor 0"},
		{append(lin, "--max-gb", "-1"), "--max-gb -1"},
		{append(lin, "--out", filepath.Join(file, "x.jsonl")), "--out"},
		{append(lin, "--out", filepath.Dir(file)), "is a directory: bench appends JSON Lines to a file"},
		{append(lin, "--backend", "rocm"), `--backend "rocm"`},
		{append(lin, "--device", "-1"), "--device -1"},
		{append(lin, "extra"), `takes no arguments (got "extra")`},
		{[]string{"bench", "attention", "--q-heads", "4"}, "needs --kv-heads"},
		{[]string{"bench", "attention"}, "needs --model NAME"},
		{append(att[:len(att)-2:len(att)-2], "--context", "0"), "--context"},
		{[]string{"bench", "attention", "--q-heads", "4", "--kv-heads", "3", "--head-dim", "64"}, "the KV heads dividing the query heads"},
		{[]string{"bench", "attention", "--q-heads", "4", "--kv-heads", "2", "--head-dim", "72"}, "--head-dim 72"},
		{append(att, "--page-size", "24"), "--page-size 24"},
		{append(att, "--splits", "2000"), "--splits 2000"},
		{append(att, "--variant", "wmma"), `--variant: unknown attention variant "wmma"`},
		{append(att, "--window", "-2"), "--window -2"},
		{append(att, "--window", "8", "--chunk", "16"), "--window 8 and --chunk 16"},
		{append(att, "--batch", "2048"), "at most 1024"},
		{[]string{"bench", "probe", "--bytes", "10"}, "--bytes 10"},
		{[]string{"bench", "probe", "dram"}, `unknown probe "dram"`},
		{[]string{"bench", "probe", "fma", "--iterations", "-1"}, "--iterations -1"},
		{[]string{"bench", "probe", "read", "--warmup", "-1"}, "warm-up -1"},
	}
	for _, c := range cases {
		stdout, _, code, msg := runBench(t, c.args...)
		if code != exitUsage || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d with %q", c.args, code, msg, exitUsage, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: a usage error printed %q", c.args, stdout)
		}
	}
	// A good command line gets as far as the device, which is missing: exit 1.
	if _, _, code, msg := runBench(t, append(lin, "--backend", "emu")...); code != exitFailure || !strings.Contains(msg, "libdecodebench_emu.so") {
		t.Errorf("no library: exit %d, %q", code, msg)
	}
}

func TestBenchHelpShowsListSyntax(t *testing.T) {
	benchEnv(t, "")
	stdout, _, code, _ := runBench(t, "bench", "linear", "--help")
	if code != 0 || !strings.Contains(stdout, "LIST syntax") || !strings.Contains(stdout, "1-256*2") || !strings.Contains(stdout, "DECODEBENCH_BATCH") {
		t.Errorf("help:\n%s", stdout)
	}
}

func TestNoteSaysThrottled(t *testing.T) {
	ok := measure.Outcome{Status: measure.StatusOK, Stats: timing.Stats{Converged: true}}
	if n := note(ok, telemetry.Summary{Readings: 3}); n != "" {
		t.Errorf("note %q", n)
	}
	hot := telemetry.Summary{Readings: 3, Throttled: true, ThrottleText: []string{"SW Power Cap"}}
	if n := note(ok, hot); n != "THROTTLED (SW Power Cap)" {
		t.Errorf("note %q", n)
	}
	bad := measure.Outcome{Status: measure.StatusFailed, Reason: "verification: x"}
	if n := note(bad, hot); n != "THROTTLED (SW Power Cap); FAILED: verification: x" {
		t.Errorf("note %q", n)
	}
}

// bench on a card with a datasheet (the fake named h200) and a timer that reports 1e-20 ms:
// the impossible speeds are failed measurements, exit 1, never a result.
func TestBenchImpossibleSpeedExits1(t *testing.T) {
	benchEnv(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so"))
	t.Setenv("FAKEKERNELS_NAME", "h200")
	t.Setenv("FAKEKERNELS_FAULT", "timer-tiny")
	out := filepath.Join(t.TempDir(), "r.jsonl")
	stdout, _, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "16", "--k", "16", "--batch", "1,2",
		"--out", out}, fastTiming...)...)
	if code != exitFailure || !strings.Contains(stdout, "implausible: timer or kernel fault") {
		t.Fatalf("exit %d (%s):\n%s", code, msg, stdout)
	}
	for _, r := range readRecords(t, readFile(t, out)) {
		if r["status"] != "failed" || !strings.Contains(r["reason"].(string), "implausible") {
			t.Errorf("record %v: want failed as implausible", r)
		}
	}
}

// A kernel that writes NaN: bench records it as failed, rel_error null with the count of bad
// outputs (an encoder that met +Inf would have lost the record), exit 1.
func TestBenchNaNOutputIsRecorded(t *testing.T) {
	benchEnv(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so"))
	t.Setenv("FAKEKERNELS_FAULT", "nan")
	out := filepath.Join(t.TempDir(), "r.jsonl")
	_, _, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "16", "--k", "16", "--batch", "1,2",
		"--out", out}, fastTiming...)...)
	if code != exitFailure {
		t.Fatalf("exit %d (%s)", code, msg)
	}
	text := readFile(t, out)
	recs := readRecords(t, text)
	nulls := 0
	for _, r := range recs {
		if v, has := r["rel_error"]; has && v == nil {
			nulls++
		}
	}
	if len(recs) != 3 || nulls != 2 || strings.Count(text, `"non_finite":1`) != 2 {
		t.Fatalf("records:\n%s", text)
	}
	for _, r := range recs[1:] {
		if r["status"] != "failed" || !strings.Contains(r["reason"].(string), "NaN") {
			t.Errorf("record %v", r)
		}
	}
}
