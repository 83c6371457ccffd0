package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// tinyStepConfig is the absolute path of the tiny llama config.json the emulator runs in seconds.
func tinyStepConfig(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "tiny-llama.json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStepUsageErrors: every bad input is one line and exit 2, before any device work (no
// kernels library is reachable, so device work would exit 1).
func TestStepUsageErrors(t *testing.T) {
	tiny := tinyStepConfig(t)
	testEnv(t, "")
	os.MkdirAll("taken", 0o755)
	os.WriteFile(filepath.Join("taken", sweep.InfoFile), []byte("{}"), 0o644)
	tests := []struct {
		desc string
		args []string
		want string
	}{
		{"no model", []string{}, "no model given"},
		{"zero steps", []string{"--model-config", tiny, "--steps", "0"}, "--steps 0"},
		{"too many steps", []string{"--model-config", tiny, "--steps", "5000"}, "--steps 5000"},
		{"past max positions", []string{"--model-config", tiny, "--context", "2040", "--steps", "32"}, "2072 positions"},
		{"context 0", []string{"--model-config", tiny, "--context", "0"}, "--context"},
		{"batch past the kernels", []string{"--model-config", tiny, "--batch", "2048"}, "batch 2048"},
		{"mode", []string{"--model-config", tiny, "--mode", "turbo"}, `mode "turbo"`},
		// DeepSeek-V3's latent attention runs (bench/step/mla.go); its checkpoint's fp8 block
		// scales and, in bf16, its sigmoid routing do not yet.
		{"DeepSeek-V3 fp8", []string{"--model", "deepseek-v3"}, "quantized weights in an MLA model"},
		{"soft-capping", []string{"--model", "gemma-2-9b"}, "soft-capping"},
		{"dtype", []string{"--model-config", tiny, "--dtype", "fp8"}, `--dtype "fp8"`},
		{"tp", []string{"--model-config", tiny, "--tp", "4"}, "--tp 4"},
		{"out holds a run", []string{"--model-config", tiny, "--out", "taken"}, "already holds a run"},
		{"argument", []string{"--model-config", tiny, "extra"}, `got "extra"`},
		{"backend", []string{"--model-config", tiny, "--backend", "opencl"}, `--backend "opencl"`},
		{"compare too much", []string{"--model-config", tiny, "--batch", "1024", "--steps", "300", "--context", "64", "--compare-modes"}, "--compare-modes at batch 1024"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, code, msg := runApp(t, append([]string{"step"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("exit %d %q; want exit 2, one line naming %q", code, msg, tc.want)
			}
		})
	}
}

// TestStepGraphModeNeedsGraphs: asking for graph mode of a library without graphs is a usage
// error once the library is open, before the device is.
func TestStepGraphModeNeedsGraphs(t *testing.T) {
	tiny := tinyStepConfig(t)
	emuEnv(t)
	lib := cgotest.Emu(t)
	if lib.HasFunction("db_graph_begin") && lib.HasFunction("db_add_i32") {
		t.Skip("the emulator has graphs: nothing to refuse")
	}
	_, _, code, msg := runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--mode", "graph")
	if code != exitUsage || !strings.Contains(msg, "cannot capture graphs") {
		t.Fatalf("exit %d %q; want exit 2 saying the library cannot capture graphs", code, msg)
	}
}

// TestStepEmulated runs the tiny model at two batches: a line per configuration, the table,
// and with --json records whose arithmetic holds.
func TestStepEmulated(t *testing.T) {
	tiny := tinyStepConfig(t)
	emuEnv(t)
	stdout, stderr, code, msg := runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--batch", "1,3", "--context", "40", "--steps", "3", "--out", "kept")
	if code != 0 {
		t.Fatalf("exit %d %s\n%s\n%s", code, msg, stdout, stderr)
	}
	for _, want := range []string{"tiny-llama B=1 S=40 tg3:", "tiny-llama B=3 S=40 tg3:", "| tiny-llama | 3 | 40 |", "EMULATED", "launch gap"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join("kept", sweep.StepsFile)); err != nil {
		t.Errorf("--out kept has no %s: %v", sweep.StepsFile, err)
	}

	stdout, _, code, msg = runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--batch", "2", "--context", "17", "--steps", "2", "--mode", "eager", "--json", "--compare-modes")
	if code != 0 {
		t.Fatalf("--json: exit %d %s", code, msg)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("--json printed %d lines, want 1 record:\n%s", len(lines), stdout)
	}
	var r step.Record
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != measure.StatusOK || !r.Eager.OK() || r.Graph.Status != measure.StatusNotMeasured || !r.Composed.OK() || !r.Emulated ||
		r.Eager.PerServerTokensPerSec != 2*r.Eager.PerRequestTokensPerSec || r.Steps != 2 || r.Launches < 20 {
		t.Errorf("record: %+v", r)
	}
	if r.Eager.Timed == nil || len(r.Eager.Timed.Stats.Samples) == 0 {
		t.Errorf("the eager mode keeps no samples: %+v", r.Eager.Timed)
	}
}

// TestSweepStepBothEmulated: --step both writes a step record per configuration beside the
// composed ones, the lines say so, and a resume repeats none.
func TestSweepStepBothEmulated(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	args := tinySweep("run", "--step", "both", "--e2e-steps", "2", "--batch", "1,2", "--context", "64")
	stdout, code, msg := runSweepCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, stdout)
	}
	p, err := sweep.Load("run")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 2 || len(p.Steps) != 2 {
		t.Fatalf("%d composed and %d step records, want 2 and 2", len(p.Records), len(p.Steps))
	}
	for _, s := range p.Steps {
		if s.Status != measure.StatusOK || !s.Eager.OK() || !s.Composed.OK() || !s.Emulated || s.Steps != 2 {
			t.Errorf("step record %s: %+v", s.Key, s)
		}
	}
	if !strings.Contains(stdout, "end-to-end step record(s)") {
		t.Errorf("the summary does not count the step records:\n%s", stdout)
	}
	stdout, code, msg = runSweepCLI(t, "sweep", "--resume", "run", "--step", "both", "--e2e-steps", "2")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s\n%s", code, msg, stdout)
	}
	if p, _ := sweep.Load("run"); len(p.Steps) != 2 || len(p.Records) != 2 {
		t.Errorf("after the resume: %d composed and %d step records", len(p.Records), len(p.Steps))
	}
}

// TestStepNeedsGroupedLinear: a mixture of experts on a library without db_grouped_linear is
// refused naming it, before the device is opened.
func TestStepNeedsGroupedLinear(t *testing.T) {
	emuEnv(t)
	if cgotest.Emu(t).HasFunction("db_grouped_linear") {
		t.Skip("the emulator has db_grouped_linear: nothing to refuse")
	}
	_, _, code, msg := runApp(t, "step", "--backend", "emu", "--model", "mixtral-8x7b", "--mode", "eager")
	if code != exitUsage || !strings.Contains(msg, "db_grouped_linear") {
		t.Fatalf("exit %d %q; want exit 2 naming db_grouped_linear", code, msg)
	}
}

// TestStepPlan: --plan lists every call and the memory without a kernels library.
func TestStepPlan(t *testing.T) {
	testEnv(t, "")
	stdout, _, code, msg := runApp(t, "step", "--model", "llama3-8b", "--batch", "1,16", "--plan")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	for _, want := range []string{"Llama-3-8B B=1 S=1024, 32 steps: 293 calls a step; weights 16.06 GB", "Llama-3-8B B=16 S=1024, 32 steps: 293 calls a step",
		"32 x layers 0-31 down_proj (linear) [16 x 14336] . [4096 x 14336]^T", "step lm_head (linear) [1 x 4096] . [128256 x 4096]^T", "step advance (add_i32)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--plan does not say %q", want)
		}
	}
}

// TestStepPlanDeepSeek: DeepSeek-V3 in bf16 plans as the absorbed MLA step with its sigmoid,
// group-limited routing, from the preset alone (no kernels library).
func TestStepPlanDeepSeek(t *testing.T) {
	testEnv(t, "")
	stdout, _, code, msg := runApp(t, "step", "--model", "deepseek-v3", "--weight-dtype", "bf16", "--batch", "4", "--context", "512", "--plan")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	for _, want := range []string{"61 x layers 0-60 q_absorb (grouped_linear)", "layers 0-60 mla_rope_append", "layers 0-60 attention_mla", "58 x layers 3-60 moe_route (moe_route) top 8 of 256, sigmoid"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--plan does not say %q", want)
		}
	}
}
