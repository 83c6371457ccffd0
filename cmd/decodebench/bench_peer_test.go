package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo/cgotest"
)

// On the emulator cuBLAS cannot run: --peer cublas still measures ours, the ratio column says
// n/a and the reason is said once, above the table.
func TestBenchLinearPeerEmulatorIsNA(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	out := filepath.Join(t.TempDir(), "b.jsonl")
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "40", "--k", "64",
		"--batch", "1,3", "--peer", "cublas", "--read-ceiling-gbps", "1", "--out", out}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s\n%s", code, msg, stdout, stderr)
	}
	if !strings.Contains(stdout, "CUBLAS/OURS") || !strings.Contains(stdout, "> 1: ours is faster") {
		t.Errorf("the table lacks the ratio column or its direction:\n%s", stdout)
	}
	if n := strings.Count(stdout+stderr, "the emulator has none"); n != 1 {
		t.Errorf("the reason the peer cannot run appears %d times, want once:\n%s\n%s", n, stdout, stderr)
	}
	recs := readRecords(t, readFile(t, out))
	if len(recs) != 2 {
		t.Fatalf("want two linear records, got %d", len(recs))
	}
	for _, r := range recs {
		checkRecord(t, r, "linear")
		if _, has := r["peer_ratio"]; has || !strings.Contains(r["peer_note"].(string), "cublas") || r["peer"] != nil {
			t.Errorf("record %v: want ours, no ratio and the peer's reason", r)
		}
	}
}

// Forcing --variant cublas where it cannot run is one line saying why and exit 2, known from
// the plan before any timing.
func TestBenchLinearForcedCublasExits2(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	out := filepath.Join(t.TempDir(), "b.jsonl")
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "40", "--k", "64",
		"--batch", "1", "--variant", "cublas", "--out", out}, fastTiming...)...)
	if code != exitUsage || strings.Contains(msg, "\n") || !strings.Contains(msg, "--variant cublas cannot run here") || !strings.Contains(msg, "emulator") {
		t.Fatalf("exit %d %q: want exit 2 and one line saying why", code, msg)
	}
	if stdout != "" || strings.Contains(stderr, "read ceiling") || strings.Contains(stderr, "[1/") {
		t.Errorf("something ran before the refusal:\nstdout %q\nstderr %q", stdout, stderr)
	}
	if recs := readAllRecords(t, readFile(t, out)); len(recs) != 0 {
		t.Errorf("records written: %v", recs)
	}
	// A peer of itself is bad input too.
	if _, _, code, msg := runBench(t, "bench", "linear", "--backend", "emu", "--n", "8", "--k", "8", "--variant", "cublas", "--peer", "cublas"); code != exitUsage || !strings.Contains(msg, "against itself") {
		t.Errorf("--variant cublas --peer cublas: exit %d %q", code, msg)
	}
	if _, _, code, msg := runBench(t, "bench", "linear", "--backend", "emu", "--n", "8", "--k", "8", "--peer", "rocblas"); code != exitUsage || !strings.Contains(msg, `--peer "rocblas"`) {
		t.Errorf("--peer rocblas: exit %d %q", code, msg)
	}
}

// With a library whose cublas variant works (the fake: its timer reports twice the time after
// a cublas call), the ratio is cuBLAS time / ours = 2, in the table and the records, and the
// peer's own record is verified; the launch baseline is recorded once.
func TestBenchLinearPeerRatio(t *testing.T) {
	benchEnv(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", "FAKE_LAUNCHES", "FAKE_CUBLAS_SLOWER=2"))
	out := filepath.Join(t.TempDir(), "b.jsonl")
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "40", "--k", "64",
		"--batch", "1,17", "--peer", "cublas", "--read-ceiling-gbps", "1", "--out", out}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s\n%s", code, msg, stdout, stderr)
	}
	if n := strings.Count(stdout, "   2.00  "); n != 2 {
		t.Errorf("want the ratio 2.00 on both rows (%d):\n%s", n, stdout)
	}
	all := readAllRecords(t, readFile(t, out))
	var launches int
	for _, r := range all {
		if r["kind"] == "launch" {
			launches++
			l := r["launch"].(map[string]any)
			if r["status"] != "ok" || l["seconds_per_launch"].(float64) != 0.25e-6 || l["launches_per_sample"].(float64) != 1000 || l["samples"].(float64) != 5 {
				t.Errorf("launch record %v: want 0.25 ms / 1000 launches from the fake's timer", r)
			}
		}
	}
	if launches != 1 {
		t.Errorf("%d launch records, want 1", launches)
	}
	recs := readRecords(t, readFile(t, out))
	if len(recs) != 2 {
		t.Fatalf("want two linear records, got %d", len(recs))
	}
	for _, r := range recs {
		peer, _ := r["peer"].(map[string]any)
		if r["peer_ratio"] != 2.0 || peer == nil || peer["variant"] != "cublas" || peer["verified"] != true || peer["status"] != "ok" ||
			peer["median_seconds"].(float64) != 2*r["median_seconds"].(float64) {
			t.Errorf("record %v: want ratio 2 and the verified cublas measurement beside ours", r)
		}
		if r["variant"] == "cublas" {
			t.Errorf("ours ran as cublas: %v", r)
		}
	}
}

// Where the library cannot open cuBLAS (no libcublasLt), the same n/a as on the emulator.
func TestBenchLinearPeerWithoutCublas(t *testing.T) {
	benchEnv(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", "FAKE_NO_CUBLAS"))
	stdout, _, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--n", "16", "--k", "16",
		"--batch", "1,2", "--peer", "cublas", "--read-ceiling-gbps", "1"}, fastTiming...)...)
	if code != 0 || strings.Count(stdout, "libcublasLt.so.12 not found") != 1 || strings.Count(stdout, "n/a") < 5 {
		t.Fatalf("exit %d %q:\n%s", code, msg, stdout)
	}
	// The launch baseline of a library without db_empty_kernel says why.
	if !strings.Contains(stdout, "launch baseline: skipped: not measured:") || !strings.Contains(stdout, "does not export db_empty_kernel") {
		t.Errorf("no reason for the missing launch baseline:\n%s", stdout)
	}
}

// bench attention refuses a grid past axes.MaxPoints before anything runs.
func TestBenchAttentionCapsMeasurements(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	_, _, code, msg := runBench(t, "bench", "attention", "--backend", "emu", "--q-heads", "2", "--kv-heads", "1", "--head-dim", "64",
		"--batch", "1-1024", "--context", "1-1000")
	if code != exitUsage || !strings.Contains(msg, "measurements") {
		t.Fatalf("exit %d %q: want exit 2 naming the measurements", code, msg)
	}
}

// A model whose kernels the library lacks: bench skips them naming the kernel, never times an
// mxfp4 linear as bf16; an MLA model's attention runs the MLA kernel, never grouped-query
// attention of its head counts.
func TestBenchModelSkipsMissingKernels(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "attention", "--backend", "emu", "--model", "deepseek-v3",
		"--tp", "8", "--batch", "1", "--context", "16,32", "--json", "--read-ceiling-gbps", "1"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d %q\n%s", code, msg, stderr)
	}
	recs := readRecords(t, stdout)
	if len(recs) != 2 {
		t.Fatalf("want two MLA attention records, got %v", recs)
	}
	for _, r := range recs {
		if r["status"] != "ok" || r["kernel"] != "attention_mla" || r["verified"] != true || r["q_heads"] != 16.0 || r["head_dim"] != 576.0 {
			t.Errorf("record %v: want an ok, verified attention_mla of 16 heads (DeepSeek-V3 at tp 8) over rows of 576", r)
		}
	}
	// gpt-oss: mxfp4 experts and attention; --max-gb keeps every call from running on the
	// emulator, so every record is skipped, and the experts' records carry their own format
	// (measured as mxfp4, never as a bf16 linear).
	stdout, stderr, code, msg = runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--model", "gpt-oss-20b",
		"--batch", "1", "--json", "--read-ceiling-gbps", "1", "--max-gb", "0.000001"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d %q\n%s", code, msg, stderr)
	}
	var quantized int
	for _, r := range readRecords(t, stdout) {
		reason, _ := r["reason"].(string)
		if r["status"] != "skipped" {
			t.Errorf("record %v ran", r)
		}
		if name, _ := r["kernel"].(string); strings.HasPrefix(name, "expert_") {
			if r["weight_format"] != "mxfp4" {
				t.Errorf("%s: weight format %v, want mxfp4 (%s)", name, r["weight_format"], reason)
			} else {
				quantized++
			}
		}
	}
	if quantized == 0 {
		t.Errorf("no expert record carries the mxfp4 format:\n%s", stdout)
	}
}
