package step

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/cgo"
)

// fakePlanner plans every call with a fixed workspace per kind and counts the calls.
type fakePlanner struct{ linear, attention, argmax uint64 }

func (f fakePlanner) LinearPlan(p cgo.LinearParams) (cgo.LinearParams, uint64, error) {
	p.Variant = cgo.LinearGEMV
	return p, f.linear, nil
}
func (f fakePlanner) AttentionPlan(p cgo.AttentionParams) (cgo.AttentionParams, uint64, error) {
	p.NumSplits = 2
	return p, f.attention, nil
}
func (f fakePlanner) ArgmaxPlan(p cgo.ArgmaxParams) (cgo.ArgmaxParams, uint64, error) {
	p.NumSplits = 4
	return p, f.argmax, nil
}
func (f fakePlanner) MLAAttentionPlan(p cgo.MLAAttentionParams) (cgo.MLAAttentionParams, uint64, error) {
	p.NumSplits = 2
	return p, f.attention, nil
}

type fakeProps struct{ free, total uint64 }

func (f fakeProps) Props() (cgo.DeviceProps, error) {
	return cgo.DeviceProps{MemFreeBytes: f.free, MemTotalBytes: f.total}, nil
}

func names(ops []Op) []string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Name)
	}
	return out
}

func count(ops []Op, kernel string) int {
	n := 0
	for _, o := range ops {
		if o.Kernel() == kernel {
			n++
		}
	}
	return n
}

// TestProgramOps: the calls of a tiny step in order, per layer and around the layers.
func TestProgramOps(t *testing.T) {
	s := Tiny()[0] // 3 layers
	qkNorm := s
	qkNorm.QKNorm = "rms"
	for _, tc := range []struct {
		s     model.Shape
		batch int
	}{{s, 1}, {s, 4}, {qkNorm, 4}} {
		s, batch := tc.s, tc.batch
		p, err := New(Config{Model: s, Batch: batch, Context: 10, Steps: 2})
		if err != nil {
			t.Fatal(err)
		}
		ops := p.Ops(func(string) uint64 { return planAddress })
		linearsPerLayer := 4 // qkv, o, gate_up, down
		if batch > 1 && s.QKNorm != "" {
			linearsPerLayer = 6 // q, k and v apart: QK-norm normalises contiguous rows
		}
		if got, want := count(ops, "linear"), s.Layers*linearsPerLayer+1; got != want {
			t.Errorf("batch %d: %d linears, want %d: %v", batch, got, want, names(ops))
		}
		norms := 2*s.Layers + 1
		if s.QKNorm != "" {
			norms += 2 * s.Layers
		}
		if got, want := count(ops, "rmsnorm"), norms; got != want {
			t.Errorf("batch %d: %d norms, want %d", batch, got, want)
		}
		for _, k := range []string{"attention", "rope_kv_append", "gated_act"} {
			if got := count(ops, k); got != s.Layers {
				t.Errorf("batch %d: %d %s calls, want one a layer", batch, got, k)
			}
		}
		first, last := ops[0], ops[len(ops)-2:]
		if first.Name != "embedding" || last[0].Name != "argmax" || last[1].AddInt32 == nil || last[1].AddInt32.Count != 2*batch || last[1].AddInt32.Delta != 1 {
			t.Errorf("batch %d: the step starts with %s and ends with %v", batch, first, names(last))
		}
		// Layer 0 norms the embedding alone; every later layer adds the previous MLP output.
		for _, o := range ops {
			if o.Name == "attn_norm" && (o.Layer == 0) != (o.RMSNorm.Residual == 0) {
				t.Errorf("batch %d: %s residual %#x", batch, o, o.RMSNorm.Residual)
			}
		}
	}
}

// TestProgramMemory: the weights the program fills are the model's weight bytes, the caches
// hold context + steps tokens, and the plan's workspace is the largest any call asks.
func TestProgramMemory(t *testing.T) {
	for _, s := range append(Tiny(), TinyMoE(), TinySliding()) {
		c := Config{Model: s, Batch: 3, Context: 50, Steps: 6}
		p, err := New(c)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if got, want := float64(p.WeightBytes()), s.WeightBytesTotal(); got != want {
			t.Errorf("%s: the program fills %g weight bytes, the model has %g", s.Name, got, want)
		}
		if got, want := float64(p.CacheBytes()), 3*s.KVBytesPerToken()*56; got != want {
			t.Errorf("%s: caches of %g bytes, want %g (3 sequences x 56 tokens)", s.Name, got, want)
		}
		ws, err := p.Plan(fakePlanner{linear: 100, attention: 5000, argmax: 7})
		if err != nil || ws.Attention != 5000 || ws.Shared != 100 {
			t.Errorf("%s: workspaces %+v (%v), want the attention's 5000 and the linears' 100", s.Name, ws, err)
		}
	}
}

// TestProgramMoE: route, group, the two grouped linears, the activation and the combine.
func TestProgramMoE(t *testing.T) {
	s := TinyMoE()
	p, err := New(Config{Model: s, Batch: 5, Context: 10, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	ops := p.Ops(func(string) uint64 { return planAddress })
	for _, k := range []string{"moe_route", "moe_group", "moe_combine"} {
		if count(ops, k) != s.Layers {
			t.Errorf("%d %s calls, want %d", count(ops, k), k, s.Layers)
		}
	}
	if count(ops, "grouped_linear") != 2*s.Layers {
		t.Errorf("%d grouped linears, want %d", count(ops, "grouped_linear"), 2*s.Layers)
	}
	for _, o := range ops {
		if o.MoERoute != nil && (o.MoERoute.TopK != 2 || o.MoERoute.Experts != 4 || !o.MoERoute.Renormalize) {
			t.Errorf("%s: %+v", o, o.MoERoute)
		}
		if o.GroupedLinear != nil && o.GroupedLinear.Rows != 10 {
			t.Errorf("%s: %d rows, want batch x top-k = 10", o, o.GroupedLinear.Rows)
		}
	}
}

// TestFeatures: what the step does not build is named, before any device work.
func TestFeatures(t *testing.T) {
	look := func(name string) model.Shape {
		s, err := model.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ungated := Tiny()[0]
	ungated.GatedMLP = false
	int8KV := Tiny()[0]
	int8KV.KVDType = model.INT8
	// DeepSeek-V3 in bf16: its latent attention (bench/step/mla.go) and its sigmoid routing run.
	deepseekBF16 := look("deepseek-v3")
	deepseekBF16.Quant = nil
	// gpt-oss-20b in its own format: mxfp4 experts through the quantized grouped linear.
	for _, built := range []model.Shape{deepseekBF16, look("llama-4-scout"), look("qwen3-30b-a3b"), look("gemma-3-27b"), look("gpt-oss-20b")} {
		if got := Feature(built); got != "" {
			t.Errorf("Feature(%s) = %q, want it built", built.Name, got)
		}
	}
	tests := []struct {
		shape model.Shape
		want  string
	}{
		{look("deepseek-v3"), "quantized weights in an MLA model"},
		{look("gemma-2-9b"), "soft-capping"},
		{ungated, "without a gate"},
		{int8KV, "int8 KV cache"},
	}
	for _, tc := range tests {
		if got := Feature(tc.shape); !strings.Contains(got, tc.want) {
			t.Errorf("%s: Feature = %q, want it to name %q", tc.shape.Name, got, tc.want)
		}
		if err := (Config{Model: tc.shape, Batch: 1, Context: 1, Steps: 1}).Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v", tc.shape.Name, err)
		}
	}
	for _, name := range []string{"llama3-8b", "qwen2.5-7b", "mixtral-8x7b", "qwen3-8b", "mistral-7b-v0.1", "gemma-7b"} {
		if f := Feature(look(name)); f != "" {
			t.Errorf("%s: refused for %s", name, f)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	s := Tiny()[0] // 4096 positions
	for _, c := range []Config{
		{Model: s, Batch: 0, Context: 1, Steps: 1},
		{Model: s, Batch: 1, Context: 0, Steps: 1},
		{Model: s, Batch: 1, Context: 1, Steps: 0},
		{Model: s, Batch: 1, Context: 4090, Steps: 7},
		{Model: s, Batch: cgo.MaxBatch + 1, Context: 1, Steps: 1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid", c)
		}
	}
	if err := (Config{Model: s, Batch: 1, Context: 4090, Steps: 6}).Validate(); err != nil {
		t.Errorf("4096 positions exactly: %v", err)
	}
}

// TestFits: a step larger than free memory less the reserve is refused, naming its parts.
func TestFits(t *testing.T) {
	p, err := New(Config{Model: Tiny()[0], Batch: 1, Context: 10, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	dev := fakeProps{free: 1 << 30, total: 1 << 34} // reserve 512 MiB
	if err := Fits(dev, p, 511<<20); err != nil {
		t.Errorf("511 MiB of 1 GiB free: %v", err)
	}
	err = Fits(dev, p, 513<<20)
	if !errors.Is(err, ErrDoesNotFit) || !strings.Contains(err.Error(), "KV caches") {
		t.Errorf("513 MiB of 1 GiB free with 512 MiB reserve: %v", err)
	}
}

// TestRecordArithmetic checks a record's rates, fractions and gaps by hand: graph 4 ms, eager
// 5 ms, composed 3.5 ms, batch 8, bound 3 ms (measured) and 2.5 ms (datasheet).
func TestRecordArithmetic(t *testing.T) {
	s := Tiny()[0]
	c := Config{Model: s, Batch: 8, Context: 100, Steps: 32}
	r := Result{Status: measure.StatusOK, Modes: []Timed{
		{Mode: Graph, Status: measure.StatusOK},
		{Mode: Eager, Status: measure.StatusOK},
	}}
	r.Modes[0].Stats.Median, r.Modes[1].Stats.Median = 4e-3, 5e-3
	// Ceilings chosen so the bound is exactly known: the memory bound of the step.
	bytes := s.WeightBytesPerStep(8) + 8*s.KVBytesPerSequence(100)
	ceil := Ceilings{
		Datasheet: roofline.Ceiling{Name: roofline.CeilingDatasheet, BandwidthBytesPerSec: bytes / 2.5e-3, FLOPsPerSec: 1e30},
		Measured:  roofline.Ceiling{Name: roofline.CeilingMeasured, BandwidthBytesPerSec: bytes / 3e-3, FLOPsPerSec: 1e30},
	}
	rec := NewRecord(c, "model=x batch=8 context=100", "x", r, ComposedTime(measure.StatusOK, "", 3.5e-3), ceil)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Abs(want) {
			t.Errorf("%s = %.12g, want %.12g", what, got, want)
		}
	}
	near("graph per request", rec.Graph.PerRequestTokensPerSec, 250)
	near("graph per server", rec.Graph.PerServerTokensPerSec, 2000)
	near("eager per request", rec.Eager.PerRequestTokensPerSec, 200)
	near("eager per server", rec.Eager.PerServerTokensPerSec, 1600)
	near("composed per server", rec.Composed.PerServerTokensPerSec, 8/3.5e-3)
	near("bound measured", rec.BoundSecondsMeasured, 3e-3)
	near("bound datasheet", rec.BoundSecondsDatasheet, 2.5e-3)
	near("graph fraction measured", rec.Graph.RooflineFractionMeasured, 0.75)
	near("graph fraction datasheet", rec.Graph.RooflineFractionDatasheet, 0.625)
	near("eager fraction measured", rec.Eager.RooflineFractionMeasured, 0.6)
	near("composed fraction measured", rec.Composed.RooflineFractionMeasured, 3/3.5)
	near("launch gap", rec.LaunchGapSeconds, 1e-3)
	near("launch gap share", rec.LaunchGapShare, 0.2)
	near("run-together gap", rec.RunTogetherSeconds, 0.5e-3)
	near("run-together share", rec.RunTogetherShare, 0.125)
	if rec.Key != "model=x batch=8 context=100 steps=32" || rec.Status != measure.StatusOK || rec.BoundLimit != roofline.LimitMemory || rec.TPNote != "" {
		t.Errorf("record: %+v", rec)
	}

	// No graph: no gap is claimed; the composed time is not measured in an e2e-only sweep.
	r.Modes[0].Status = measure.StatusSkipped
	rec = NewRecord(c, "k", "x", r, StepTime{Status: measure.StatusNotMeasured}, ceil)
	if rec.LaunchGapSeconds != 0 || rec.RunTogetherSeconds != 0 || rec.Graph.PerRequestTokensPerSec != 0 || rec.Composed.RooflineFractionMeasured != 0 {
		t.Errorf("gaps without a graph time: %+v", rec)
	}
	if best, mode, ok := rec.Best(); !ok || mode != Eager || best.StepSeconds != 5e-3 {
		t.Errorf("best = %v %v %v, want eager's 5 ms", best, mode, ok)
	}

	// A shard says so.
	shard, err := s.Shard(2)
	if err != nil {
		t.Fatal(err)
	}
	c.Model = shard
	if rec := NewRecord(c, "k", "x", r, StepTime{}, ceil); rec.TP != 2 || rec.TPNote != AllReduceLeftOut {
		t.Errorf("tp 2: %d %q", rec.TP, rec.TPNote)
	}
}

// TestRecordStatus: a skipped mode beside a measured one leaves the record ok, saying why; a
// failed mode or modes that disagree fail it.
func TestRecordStatus(t *testing.T) {
	c := Config{Model: Tiny()[0], Batch: 1, Context: 10, Steps: 2}
	ok := Timed{Mode: Eager, Status: measure.StatusOK}
	ok.Stats.Median = 1e-3
	disagree := false
	for _, tc := range []struct {
		desc string
		r    Result
		want string
	}{
		{"graph skipped", Result{Status: measure.StatusSkipped, Reason: "graph: not exported", Modes: []Timed{{Mode: Graph, Status: measure.StatusSkipped}, ok}}, measure.StatusOK},
		{"graph failed", Result{Status: measure.StatusFailed, Modes: []Timed{{Mode: Graph, Status: measure.StatusFailed}, ok}}, measure.StatusFailed},
		{"disagree", Result{Status: measure.StatusFailed, Modes: []Timed{ok, ok}, ModesAgree: &disagree}, measure.StatusFailed},
		{"nothing ran", Result{Status: measure.StatusSkipped, Reason: "does not fit"}, measure.StatusSkipped},
	} {
		rec := NewRecord(c, "k", "m", tc.r, StepTime{}, Ceilings{})
		if rec.Status != tc.want || rec.Reason != tc.r.Reason {
			t.Errorf("%s: status %s (%s), want %s", tc.desc, rec.Status, rec.Reason, tc.want)
		}
	}
}

// TestRecordImplausible: a step faster than the datasheet's roofline fails (past any cache,
// beyond 5%; under 256 MB, only past 10x).
func TestRecordImplausible(t *testing.T) {
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	gpu, _ := roofline.LookupGPU("h200")
	ceil := Ceilings{Datasheet: roofline.DatasheetCeiling(gpu)}
	c := Config{Model: s, Batch: 1, Context: 1024, Steps: 32}
	bound := roofline.StepBound(s, ceil.Datasheet, 1, 1024).StepSeconds
	for _, tc := range []struct {
		model  model.Shape
		factor float64 // step = bound x factor
		want   string
	}{
		{s, 1.0, measure.StatusOK},
		{s, 0.9, measure.StatusFailed},
		{Tiny()[0], 0.5, measure.StatusOK},
		{Tiny()[0], 0.05, measure.StatusFailed},
	} {
		c.Model = tc.model
		b := roofline.StepBound(tc.model, ceil.Datasheet, 1, 1024).StepSeconds
		if tc.model.Name == s.Name {
			b = bound
		}
		g := Timed{Mode: Graph, Status: measure.StatusOK}
		g.Stats.Median = b * tc.factor
		rec := NewRecord(c, "k", "m", Result{Status: measure.StatusOK, Modes: []Timed{g}}, StepTime{}, ceil)
		if rec.Status != tc.want || (tc.want == measure.StatusFailed && !strings.Contains(rec.Reason, measure.ImplausibleReason)) {
			t.Errorf("%s at %.2fx the bound: %s (%s), want %s", tc.model.Name, tc.factor, rec.Status, rec.Reason, tc.want)
		}
	}
}
