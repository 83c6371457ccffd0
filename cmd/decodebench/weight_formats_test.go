package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// withQuantization writes Meta-Llama-3-8B's config.json with a quantization_config added.
func withQuantization(t *testing.T, dense, quant string) string {
	t.Helper()
	data, err := os.ReadFile(dense)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	var q any
	if err := json.Unmarshal([]byte(quant), &q); err != nil {
		t.Fatal(err)
	}
	cfg["quantization_config"] = q
	out, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// --weight-dtype prices a model's bytes as the matching quantization_config does, scales and
// zero points included: the flag and the checkpoint are one shape.
func TestWeightDTypeIsItsQuantizationConfig(t *testing.T) {
	dense, _ := filepath.Abs(filepath.Join("..", "..", "bench", "model", "testdata", "Meta-Llama-3-8B.json"))
	testEnv(t, "")
	show := func(args ...string) map[string]any {
		t.Helper()
		out, code, msg := runCLI(t, append([]string{"model", "show", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, msg)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	bf16 := show("--model-config", dense)["weight_bytes_per_step"].(float64)
	for _, c := range []struct {
		flags []string
		quant string
	}{
		{[]string{"--weight-dtype", "int4", "--group-size", "64"}, `{"quant_method": "gptq", "bits": 4, "group_size": 64}`},
		{[]string{"--weight-dtype", "int4"}, `{"quant_method": "gptq", "bits": 4, "group_size": 128}`},
		{[]string{"--weight-dtype", "int4-zp", "--group-size", "32"}, `{"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true}`},
		{[]string{"--weight-dtype", "fp8"}, `{"quant_method": "fbgemm_fp8"}`},
		{[]string{"--weight-dtype", "mxfp4"}, `{"quant_method": "mxfp4"}`},
	} {
		flag := show(append([]string{"--model-config", dense}, c.flags...)...)
		config := show("--model-config", withQuantization(t, dense, c.quant))
		for _, field := range []string{"weight_bytes_total", "weight_bytes_per_step", "flops_per_step"} {
			if flag[field] != config[field] {
				t.Errorf("%v: %s %v, the quantization_config %s gives %v", c.flags, field, flag[field], c.quant, config[field])
			}
		}
		if got := flag["weight_bytes_per_step"].(float64); !(got < bf16) {
			t.Errorf("%v: %g bytes a step, not fewer than bf16's %g", c.flags, got, bf16)
		}
	}
	// int4 g64: 4 bits a weight, an fp16 scale and a 4-bit zero per 64: 4.3125 bits on the projections.
	g64 := show("--model-config", dense, "--weight-dtype", "int4", "--group-size", "64")
	shape := g64["shape"].(map[string]any)
	if q := shape["quant"].(map[string]any); q["method"] != "gptq" || q["group_size"] != 64.0 || q["zeros"] != true {
		t.Errorf("int4 g64 sets quant %v, want gptq 4-bit g64 with zeros", q)
	}
}

// A bad format, a group on a format without groups and a group that does not fit a linear's K
// are one-line usage errors on every command, before any device work (testEnv finds no
// library: reaching the device would exit 1).
func TestWeightDTypeUsageErrorsOnEveryCommand(t *testing.T) {
	testEnv(t, "")
	gptOSS := []string{"--model", "gpt-oss-20b"} // hidden 2880: 22.5 groups of 128
	commands := map[string][]string{
		"model show": {"model", "show"},
		"predict":    {"predict", "--gpu", "h200"},
		"bench":      {"bench", "linear", "--backend", "emu"},
		"sweep":      {"sweep", "--backend", "emu", "--batch", "1", "--context", "64"},
		"step":       {"step", "--backend", "emu"},
	}
	cases := []struct {
		desc string
		args []string
		want []string
	}{
		{"unknown format", []string{"--model", "llama3-8b", "--weight-dtype", "int3"}, []string{`"int3"`, strings.Join(sweep.WeightDTypeNames(), ", ")}},
		{"group on fp8", []string{"--model", "llama3-8b", "--weight-dtype", "fp8", "--group-size", "64"}, []string{"--group-size 64", "fp8", "no groups"}},
		{"group without a format", []string{"--model", "llama3-8b", "--group-size", "64"}, []string{"--group-size 64", "--weight-dtype"}},
		{"group 128 does not fit K 2880", append(gptOSS, "--weight-dtype", "int4"), []string{"int4 g128", "qkv_proj", "K 2880", "group size 128"}},
		{"kv int8", []string{"--model", "llama3-8b", "--kv-dtype", "int8"}, []string{`--kv-dtype "int8"`, "bf16, fp16 and fp8"}},
	}
	for name, cmd := range commands {
		for _, c := range cases {
			t.Run(name+"/"+c.desc, func(t *testing.T) {
				args := append(append(append([]string(nil), cmd...), c.args...), "--out", filepath.Join(t.TempDir(), "out"))
				if name == "model show" {
					args = args[:len(args)-2]
				}
				out, code, msg := runCLI(t, args...)
				if code != exitUsage {
					t.Fatalf("exit %d, want %d; message %q\n%s", code, exitUsage, msg, out)
				}
				if strings.Contains(strings.TrimSpace(msg), "\n") {
					t.Errorf("message is not one line: %q", msg)
				}
				for _, want := range c.want {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not say %q", msg, want)
					}
				}
			})
		}
	}
}

// predict with a list of formats: a row per format in every output, and the charts.
func TestPredictWeightFormats(t *testing.T) {
	testEnv(t, "")
	dir := filepath.Join(t.TempDir(), "out")
	out, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1,8", "--context", "4k",
		"--weight-dtype", "bf16,fp8,int4", "--group-size", "64", "--format", "csv", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.Contains(lines[0], "weight_format") {
		t.Fatalf("want a header with weight_format and 6 rows:\n%s", out)
	}
	var rows []predictRow
	data, _ := os.ReadFile(filepath.Join(dir, "predict.json"))
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	bytes := map[string]float64{}
	for _, r := range rows {
		if r.Batch == 1 {
			bytes[r.WeightFormat] = r.WeightBytes
		}
	}
	if !(bytes["int4 g64"] < bytes["fp8"] && bytes["fp8"] < bytes["bf16"]) || len(bytes) != 3 {
		t.Errorf("weight bytes at batch 1 by format %v: want int4 g64 < fp8 < bf16", bytes)
	}
	csvData, _ := os.ReadFile(filepath.Join(dir, "predict.csv"))
	if !strings.Contains(string(csvData), ",int4 g64,") {
		t.Errorf("predict.csv has no int4 g64 rows:\n%s", csvData)
	}
	for _, name := range []string{"tokens_vs_batch.svg", "tradeoff.svg", "roofline.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, legend := range []string{">bf16", ">fp8", ">int4 g64"} {
			if !strings.Contains(string(svg), legend) {
				t.Errorf("%s has no %q in its legend", name, legend)
			}
		}
	}
	table, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1", "--context", "4k", "--weight-dtype", "int4-zp")
	if code != 0 || !strings.Contains(strings.Split(table, "\n")[0], "int4-zp g128") {
		t.Errorf("exit %d (%s): the table is not headed by its format, int4-zp g128:\n%s", code, msg, table)
	}
}

// sweep --weight-dtype with a list measures each format as its own model, records it, charts
// the formats side by side, and a resume finds every format's records.
func TestSweepWeightFormats(t *testing.T) {
	testtier.Slow(t, "a sweep per weight format")
	sweepHermetic(t, cgotest.EmuPath(t))
	args := tinySweep("run", "--batch", "1,2", "--context", "64", "--weight-dtype", "bf16,int4-zp", "--group-size", "64", "--step", "composed")
	if out, code, msg := runSweepCLI(t, args...); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, out)
	}
	records := readSweepRecords(t, "run")
	formats := map[string]int{}
	for _, r := range records {
		if r.Status != "ok" {
			t.Errorf("%s: %s (%s)", r.Key, r.Status, r.Reason)
		}
		formats[r.WeightFormat]++
		if !strings.HasSuffix(r.Model, "("+r.WeightFormat+")") {
			t.Errorf("record of %q names format %q", r.Model, r.WeightFormat)
		}
	}
	if formats["bf16"] != 2 || formats["int4-zp g64"] != 2 || len(records) != 4 {
		t.Errorf("records by format %v, want 2 of bf16 and 2 of int4-zp g64", formats)
	}
	for _, name := range []string{"formats_tokens_vs_batch.png", "formats_tradeoff.svg", "formats_roofline.png"} {
		if _, err := os.Stat(filepath.Join("run", "plots", "custom-"+name)); err != nil {
			t.Errorf("the per-format chart %s is missing: %v", name, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join("run", "report.md"))
	if !strings.Contains(string(md), "## Weight formats: custom") {
		t.Errorf("report.md has no weight-format section")
	}
	out, code, msg := runSweepCLI(t, "sweep", "--resume", "run", "--progress", "lines")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s\n%s", code, msg, out)
	}
	if again := readSweepRecords(t, "run"); len(again) != len(records) {
		t.Errorf("the resume wrote %d records more: a format's records were not found", len(again)-len(records))
	}
}
