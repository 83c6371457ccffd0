package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/plan"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/sweeptest"
)

// writePlanRun writes a run of Llama-3-8B at batches 1, 8, 64 and contexts 1k and 8k.
func writePlanRun(t *testing.T, dir string, fail [][2]int) []sweep.Record {
	t.Helper()
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	r := sweeptest.Run{Card: "NVIDIA H200", Model: s, Batches: []int{1, 8, 64}, Contexts: []int{1024, 8192}, Noise: 0.003, Samples: 10, Seed: 1, Fail: fail}
	if err := sweeptest.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	run, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return run.Records
}

func TestPlanMeasured(t *testing.T) {
	testEnv(t, "")
	records := writePlanRun(t, "run", nil)
	var r8, r64 sweep.Record
	for _, r := range records {
		if r.Context == 8192 && r.Batch == 8 {
			r8 = r
		}
		if r.Context == 8192 && r.Batch == 64 {
			r64 = r
		}
	}
	// A target halfway (in log) between batch 8's and batch 64's per-request rates: the
	// interpolation r(b) = r8 (b/8)^k, k = ln(r64/r8) / ln 8, meets it up to b = 8 (target/r8)^(1/k).
	target := math.Sqrt(r8.PerRequestTokensPerSec * r64.PerRequestTokensPerSec)
	k := math.Log(r64.PerRequestTokensPerSec/r8.PerRequestTokensPerSec) / math.Log(8)
	wantBatch := int(math.Floor(8 * math.Pow(target/r8.PerRequestTokensPerSec, 1/k)))
	rateAt := r8.PerRequestTokensPerSec * math.Pow(float64(wantBatch)/8, k)
	wantServers := int(math.Ceil(20000 / (float64(wantBatch) * rateAt * 0.75)))

	args := []string{"plan", "--context", "8k", "--min-request-rate", strconv.FormatFloat(target, 'g', -1, 64),
		"--tokens-per-s", "20000", "--headroom", "0.25", "--price-per-gpu-hour", "2", "--format", "json", "--out", "plan-out", "run"}
	out, _, code, msg := runApp(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := p.Chosen
	if c.Batch != wantBatch || c.Source != plan.SourceInterpolated || c.Servers != wantServers || c.GPUs != wantServers ||
		math.Abs(c.PerRequestTokensPerSec-rateAt) > 1e-9*rateAt {
		t.Errorf("chosen %+v, want batch %d at %.6g tok/s, %d servers", c, wantBatch, rateAt, wantServers)
	}
	if want := float64(c.GPUs) * 2 / (20000 * 3600) * 1e6; math.Abs(c.CostPerMillionTokens-want) > 1e-12 {
		t.Errorf("cost %g per million, want %g", c.CostPerMillionTokens, want)
	}
	if len(p.Neighbours) != 2 || p.Neighbours[0].Batch != 8 || p.Neighbours[1].Batch != 64 || p.Neighbours[1].MeetsTarget {
		t.Errorf("neighbours %+v, want 8 (meets) and 64 (misses)", p.Neighbours)
	}
	for _, name := range []string{plan.JSONFile, plan.MarkdownFile, plan.ChartBase + ".png", plan.ChartBase + ".svg"} {
		if _, err := os.Stat(filepath.Join("plan-out", name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	svg, _ := os.ReadFile(filepath.Join("plan-out", plan.ChartBase+".svg"))
	if !strings.Contains(string(svg), "chosen: batch") || !strings.Contains(string(svg), "target:") {
		t.Errorf("the chart lacks the chosen point or the target")
	}
	// The table says how it read between batches, and the verdict.
	out, _, code, msg = runApp(t, "plan", "--context", "8k", "--min-request-rate", "1", "run")
	if code != 0 || !strings.Contains(out, "interpolated linearly in log batch") || !strings.Contains(out, "the largest measured: a larger batch may meet it too but is not extrapolated") {
		t.Errorf("target 1: exit %d %s\n%s", code, msg, out)
	}
}

func TestPlanPredicted(t *testing.T) {
	testEnv(t, "")
	out, _, code, msg := runApp(t, "plan", "--model", "llama3-8b", "--gpu", "h200", "--context", "8k", "--min-request-rate", "40",
		"--requests-per-s", "10", "--output-tokens", "500", "--format", "md")
	if code != 0 || !strings.Contains(out, "| batch | source |") || !strings.Contains(out, "predicted") || !strings.Contains(out, "<- chosen") {
		t.Errorf("exit %d %s\n%s", code, msg, out)
	}
}

func TestPlanBadInput(t *testing.T) {
	testEnv(t, "")
	writePlanRun(t, "run", nil)
	writePlanRun(t, "broken", [][2]int{{1, 1024}, {8, 1024}, {64, 1024}, {1, 8192}, {8, 8192}, {64, 8192}})
	measured := func(extra ...string) []string {
		return append(append([]string{"--context", "8k", "--min-request-rate", "20"}, extra...), "run")
	}
	cases := []struct {
		desc string
		args []string
		want string
	}{
		{"no target", []string{"--context", "8k", "run"}, "--min-request-rate is required"},
		{"zero target", []string{"--context", "8k", "--min-request-rate", "0", "run"}, "--min-request-rate 0: must be more than 0"},
		{"negative target", []string{"--context", "8k", "--min-request-rate", "-5", "run"}, "--min-request-rate -5: must be more than 0"},
		{"text target", []string{"--context", "8k", "--min-request-rate", "fast", "run"}, `--min-request-rate fast: want a number`},
		{"NaN target", []string{"--context", "8k", "--min-request-rate", "NaN", "run"}, "--min-request-rate NaN: want a number"},
		{"infinite target", []string{"--context", "8k", "--min-request-rate", "Inf", "run"}, "--min-request-rate Inf: want a number"},
		{"unreachable target", []string{"--context", "8k", "--min-request-rate", "100000", "run"}, "the best reachable is"},
		{"requests without tokens", measured("--requests-per-s", "10"), "--requests-per-s needs --output-tokens"},
		{"tokens without requests", measured("--output-tokens", "500"), "--output-tokens needs --requests-per-s"},
		{"traffic twice", measured("--tokens-per-s", "100", "--requests-per-s", "1", "--output-tokens", "5"), "give one of them"},
		{"zero requests", measured("--requests-per-s", "0", "--output-tokens", "5"), "--requests-per-s 0: must be more than 0"},
		{"negative tokens/s", measured("--tokens-per-s", "-1"), "--tokens-per-s -1: must be more than 0"},
		{"headroom 1", measured("--headroom", "1"), `--headroom 1: give the fraction`},
		{"headroom negative", measured("--headroom", "-0.2"), `--headroom -0.2: give the fraction`},
		{"headroom text", measured("--headroom", "some"), `--headroom some: give the fraction`},
		{"price zero", measured("--price-per-gpu-hour", "0"), "--price-per-gpu-hour 0: must be more than 0"},
		{"format xml", measured("--format", "xml"), `--format "xml": accepted are table, md, json`},
		{"two contexts", []string{"--context", "1k,8k", "--min-request-rate", "20", "run"}, "one context length"},
		{"context not measured", []string{"--context", "4k", "--min-request-rate", "20", "run"}, "at context 4096: it has contexts 1024, 8192"},
		{"context not chosen", []string{"--min-request-rate", "20", "run"}, "choose one with --context"},
		{"model not in the run", measured("--model", "llama3-70b"), `model "llama3-70b"`},
		{"no configuration ok", []string{"--context", "8k", "--min-request-rate", "20", "broken"}, "has no configuration measured ok"},
		{"DIR and --gpu", measured("--gpu", "h100-sxm"), "--gpu describes a prediction"},
		{"not a run directory", []string{"--context", "8k", "--min-request-rate", "20", "."}, "not a run directory"},
		{"two directories", []string{"--min-request-rate", "20", "run", "run"}, "at most one run directory"},
		{"prediction without context", []string{"--model", "llama3-8b", "--gpu", "h200", "--min-request-rate", "20"}, "--context is required for a prediction"},
		{"prediction without model", []string{"--gpu", "h200", "--context", "8k", "--min-request-rate", "20"}, "no model given"},
		{"prediction that does not fit", []string{"--model", "llama3-70b", "--gpu", "h200", "--context", "8k", "--min-request-rate", "20"}, "shard it with --tp"},
	}
	for _, tc := range cases {
		out, _, code, msg := runApp(t, append([]string{"plan", "--out", "plan-out"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: exit %d, %q (stdout %q), want exit 2 and one line saying %q", tc.desc, code, msg, out, tc.want)
		}
		if out != "" {
			t.Errorf("%s: printed %q on bad input", tc.desc, out)
		}
		if _, err := os.Stat("plan-out"); err == nil {
			t.Fatalf("%s: bad input wrote plan-out/", tc.desc)
		}
	}
}
