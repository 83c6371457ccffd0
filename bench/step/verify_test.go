package step_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/step/steptest"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

var oneSample = timing.Config{Warmup: 0, MinSamples: 1, MinSeconds: 0, TargetSpread: 1, MaxSeconds: 60}

// modesOf is graph and eager where the library captures graphs, else eager.
func modesOf(dev *cgo.Device) []step.Mode {
	if dev.Library().HasFunction("db_graph_begin") && dev.Library().HasFunction("db_add_i32") {
		return step.Modes
	}
	return []step.Mode{step.Eager}
}

// TestMeasureVerifiesTheStep: before a sample is timed, the step's logits and greedy tokens
// are checked against the float64 forward pass in every mode, and the record says how.
func TestMeasureVerifiesTheStep(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	modes := modesOf(dev)
	c := step.Config{Model: step.Tiny()[0], Batch: 3, Context: 20, Steps: 3, Seed: 3}
	r := step.Measure(dev, true, c, modes, step.Options{Timing: oneSample})
	v := r.Verification
	if r.Status != measure.StatusOK || !v.Verified {
		t.Fatalf("status %s (%s), verification %+v", r.Status, r.Reason, v)
	}
	if len(v.Modes) != len(modes) || v.Layers != 1 || v.ModelLayers != 3 || v.Batch != 3 || v.Sequences != 2 || v.Context != 20 || v.Steps != 2 {
		t.Errorf("checked %+v; want every mode, 1 of 3 layers, 2 of 3 sequences, context 20, 2 steps", v)
	}
	if want := len(modes) * 2 * 2 * c.Model.Vocab; v.Logits != want || v.MaxError > v.Bound || v.Bound == 0 || v.MaxBoundShare > 1 || v.FirstBad != nil || v.Seconds <= 0 {
		t.Errorf("%d logits (want %d), max error %g, bound %g, share %g, first bad %v", v.Logits, want, v.MaxError, v.Bound, v.MaxBoundShare, v.FirstBad)
	}
	rec := step.NewRecord(c, "k", "m", r, step.StepTime{Status: measure.StatusNotMeasured}, step.Ceilings{})
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"verification":{"verified":true`) {
		t.Errorf("the record does not say verified: %s", line)
	}
	if how := v.How(); !strings.HasPrefix(how, "verified: 1 of 3 layers, 2 of 3 sequences, context 20, 2 steps") {
		t.Errorf("How() = %q", how)
	}
}

// TestMeasureRefusesAWrongStep: a small op that computes wrong but finite numbers (every
// RMSNorm with the wrong epsilon) on a device that is not the emulator is caught by the check:
// the configuration fails with the first bad logit, and no mode is timed.
func TestMeasureRefusesAWrongStep(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	modes := modesOf(dev)
	c := step.Config{Model: step.Tiny()[0], Batch: 2, Context: 20, Steps: 2, Seed: 3}
	r := step.Measure(steptest.WrongRMSNorm(dev), false, c, modes, step.Options{Timing: oneSample})
	v := r.Verification
	if r.Status != measure.StatusFailed || v.Verified || v.FirstBad == nil || !strings.Contains(r.Reason, "disagrees with the float64 forward pass") {
		t.Fatalf("status %s (%s), verification %+v; want failed, not verified, with the first bad logit", r.Status, r.Reason, v)
	}
	if b := v.FirstBad; b.Got == b.Want || b.Index < 0 || b.Index >= c.Model.Vocab || b.Mode != modes[0] || b.Step != 0 {
		t.Errorf("first bad logit %+v", b)
	}
	if len(r.Modes) != 0 {
		t.Errorf("a wrong step was timed: %+v", r.Modes)
	}
	rec := step.NewRecord(c, "k", "m", r, step.StepTime{Status: measure.StatusNotMeasured}, step.Ceilings{})
	if rec.Status != measure.StatusFailed || rec.Graph.OK() || rec.Eager.OK() || rec.Graph.Status != measure.StatusFailed || rec.Verification.FirstBad == nil {
		t.Errorf("record %+v", rec)
	}
	if _, _, ok := rec.Best(); ok {
		t.Error("a wrong step has a time to plot")
	}
}

// TestVerifyConfig: the check keeps the first layer of each kind a model has, and no more;
// the context is capped where the reference would be slow, but never under a window or chunk.
func TestVerifyConfig(t *testing.T) {
	lookup := func(name string) model.Shape {
		s, err := model.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		desc    string
		shape   model.Shape
		context int
		layers  int
		ctx     int
	}{
		{"dense: one layer", lookup("Llama-3-8B"), 1024, 1, 1024},
		{"dense 70B, long context capped", lookup("Llama-3-70B"), 32768, 1, step.VerifyContext},
		{"gemma 3: sliding and global", lookup("Gemma-3-27B"), 512, 2, 512},
		{"llama 4: chunked with rotary, global without, experts", lookup("Llama-4-Scout"), 9000, 2, 8192 + 2 + 1},
		{"deepseek: dense first, then experts", lookup("DeepSeek-V3"), 512, 2, 512},
		{"tiny sliding", step.TinySliding(), 4000, 2, 4000},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := tc.shape
			c := step.Config{Model: s, Batch: 8, Context: tc.context, Steps: 32}
			v, seqs := step.VerifyConfig(c)
			if v.Model.Layers != tc.layers || v.Context != tc.ctx || v.Steps != 2 || v.Batch != 8 || seqs != 2 {
				t.Errorf("checked %d layers, context %d, %d steps, batch %d of which %d recomputed; want %d layers, context %d, 2 steps, batch 8, 2",
					v.Model.Layers, v.Context, v.Steps, v.Batch, seqs, tc.layers, tc.ctx)
			}
			kinds := map[model.Layer]bool{}
			for l := 0; l < v.Model.Layers; l++ {
				ly := v.Model.Layer(l)
				ly.Index = 0
				kinds[ly] = true
			}
			for l := 0; l < s.Layers; l++ {
				ly := s.Layer(l)
				ly.Index = 0
				if !kinds[ly] {
					t.Errorf("layer %d's kind %+v is not checked", l, ly)
				}
			}
		})
	}
}
