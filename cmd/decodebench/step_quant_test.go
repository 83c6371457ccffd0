package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/internal/testtier"
)

// quantConfig writes the tiny llama's config.json with a quantization_config into dir.
func quantConfig(t *testing.T, tiny, dir, name, quant string) string {
	t.Helper()
	raw, err := os.ReadFile(tiny)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(quant), &q); err != nil {
		t.Fatal(err)
	}
	cfg["quantization_config"] = q
	out, _ := json.Marshal(cfg)
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// stepRecord runs the step with args on the emulator and gives its one JSON record.
func stepRecord(t *testing.T, args ...string) step.Record {
	t.Helper()
	args = append([]string{"step", "--backend", "emu", "--batch", "3", "--context", "20", "--steps", "2", "--mode", "eager", "--json"}, args...)
	stdout, _, code, msg := runApp(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d %s\n%s", args, code, msg, stdout)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1 record:\n%s", len(lines), stdout)
	}
	var r step.Record
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != measure.StatusOK || !r.Eager.OK() {
		t.Errorf("%v: record %s: %s", args, r.Status, r.Reason)
	}
	return r
}

// TestStepQuantized: the step runs the formats that --weight-dtype and --kv-dtype name today
// and those a config's quantization_config sets, and its record says the format and the bytes.
func TestStepQuantized(t *testing.T) {
	testtier.Slow(t, "a whole emulated step per format")
	tiny := tinyStepConfig(t)
	emuEnv(t)
	dir := t.TempDir()
	bf16 := stepRecord(t, "--model-config", tiny)
	if bf16.WeightFormat != "bf16" || bf16.KVDType != "bf16" || bf16.WeightBytes == 0 {
		t.Errorf("bf16 record: weight format %q, kv %q, %d weight bytes", bf16.WeightFormat, bf16.KVDType, bf16.WeightBytes)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		format string
		kv     string
	}{
		{"fp8 weights and cache", []string{"--model-config", tiny, "--weight-dtype", "fp8", "--kv-dtype", "fp8"}, "fp8", "fp8"},
		{"int8 weights", []string{"--model-config", tiny, "--weight-dtype", "int8"}, "int8", "bf16"},
		{"awq config", []string{"--model-config", quantConfig(t, tiny, dir, "awq", `{"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true}`)}, "int4-zp g64", "bf16"},
		{"gptq config, fp8 cache", []string{"--model-config", quantConfig(t, tiny, dir, "gptq", `{"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false}`), "--kv-dtype", "fp8"}, "int4 g128", "fp8"},
		{"fbgemm fp8 config", []string{"--model-config", quantConfig(t, tiny, dir, "fbgemm", `{"quant_method": "fbgemm_fp8"}`)}, "fp8", "bf16"},
		{"mxfp4 config", []string{"--model-config", quantConfig(t, tiny, dir, "mxfp4", `{"quant_method": "mxfp4"}`)}, "mxfp4", "bf16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := stepRecord(t, tc.args...)
			if r.WeightFormat != tc.format || r.KVDType != tc.kv || r.DType != "bf16" {
				t.Errorf("record: weight format %q, kv %q, dtype %q; want %q, %q, bf16", r.WeightFormat, r.KVDType, r.DType, tc.format, tc.kv)
			}
			if !(r.WeightBytes < bf16.WeightBytes) {
				t.Errorf("%d weight bytes, not fewer than bf16's %d", r.WeightBytes, bf16.WeightBytes)
			}
			if tc.kv == "fp8" && 2*r.KVBytes != bf16.KVBytes {
				t.Errorf("fp8 cache of %d bytes, want half of bf16's %d", r.KVBytes, bf16.KVBytes)
			}
		})
	}
}

// TestStepQuantizedRefusals: what the step cannot run in a format is a usage error naming it.
func TestStepQuantizedRefusals(t *testing.T) {
	tiny := tinyStepConfig(t)
	emuEnv(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"fp8 64x64 block scales", []string{"--model-config", quantConfig(t, tiny, dir, "fp8-block-64", `{"quant_method": "fp8", "weight_block_size": [64, 64]}`)}, "64x64 block scales"},
		{"group that does not fit", []string{"--model-config", quantConfig(t, tiny, dir, "g96", `{"quant_method": "gptq", "bits": 4, "group_size": 96}`)}, "group size 96"},
		{"int8 cache", []string{"--model-config", tiny, "--kv-dtype", "int8"}, `--kv-dtype "int8": accepted are bf16, fp16 and fp8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, code, msg := runApp(t, append([]string{"step", "--backend", "emu"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("exit %d %q; want exit 2, one line naming %q", code, msg, tc.want)
			}
		})
	}
}

// TestStepPlanGptOSS: gpt-oss-20b's config plans its step in its own format: mxfp4 experts
// through the quantized grouped linear, attention kept bf16.
func TestStepPlanGptOSS(t *testing.T) {
	gptOSS, err := filepath.Abs(filepath.Join("..", "..", "bench", "model", "testdata", "gpt-oss-20b.json"))
	if err != nil {
		t.Fatal(err)
	}
	testEnv(t, "")
	stdout, _, code, msg := runApp(t, "step", "--model-config", gptOSS, "--plan")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	for _, want := range []string{"projections in mxfp4, attention kept bf16", "layers 0-23 expert_gate_up (grouped_linear)",
		"[5760 x 2880]^T mxfp4", "layers 0-23 expert_down (grouped_linear)", "[2880 x 2880]^T mxfp4", "layers 0-23 qkv_proj (linear) [1 x 2880] . [5120 x 2880]^T\n"} {
		if !strings.Contains(stdout, want) { // qkv_proj ends its line: dense
			t.Errorf("--plan does not say %q", want)
		}
	}
}
