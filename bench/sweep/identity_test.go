package sweep

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
)

// Every line of results.jsonl names the card and the decodebench that measured it (so that
// several boxes' results concatenate), and a failed configuration carries no times: its
// step_seconds is absent, never 0.
func TestRecordsCarryIdentityAndNoZeroTimes(t *testing.T) {
	clock := newClock()
	f := newFake(clock)
	f.fail = "attention bf16 b=2 q=2 kv=1 d=64 ctx=128"
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2}, Contexts: []int{128}}
	r, prior := newRun(t, t.TempDir(), f, clock, axes)
	r.Info.Card.Driver, r.Info.Card.CUDAVersion = "560.35.03", "12.6"
	r.Info.Sessions[0].Version = "v1.2-resumed"
	if _, err := r.Run(context.Background(), axes.Configs(), prior); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(r.Dir.Path, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), data)
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"card": "NVIDIA H200", "card_uuid": "GPU-h200", "driver": "560.35.03", "cuda_version": "12.6",
			"decodebench_version": "v1.2-resumed"}
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("%s: %s = %v, want %q", rec["key"], k, rec[k], v)
			}
		}
		_, hasStep := rec["step_seconds"]
		_, hasFraction := rec["roofline_fraction_datasheet"]
		if ok := rec["status"] == measure.StatusOK; ok != hasStep || ok != hasFraction {
			t.Errorf("%s (%s): step_seconds present %v, roofline_fraction_datasheet present %v: a failed record has no times, an ok one has them",
				rec["key"], rec["status"], hasStep, hasFraction)
		}
	}
}

// A kernel whose output held NaN has no relative error: null in the record, not 0.
func TestKernelEntryRelErrorOfNaNOutputIsNull(t *testing.T) {
	s := tinyModel()
	cfg := Config{Model: s, Batch: 1, Context: 128}
	f := newFake(nil)
	measured := map[string]Measurement{}
	for _, k := range s.Kernels(cfg.Batch, cfg.Context) {
		spec := SpecOf(k, s)
		measured[spec.Key()] = Measurement{Key: spec.Key(), Outcome: f.Measure(spec)}
	}
	attn := SpecOf(s.Kernels(cfg.Batch, cfg.Context)[1], s).Key()
	bad := measured[attn]
	bad.Status, bad.Reason = measure.StatusFailed, "verification failed: 3 NaN outputs"
	bad.Verification = measure.Verification{Passed: false, RelError: 0, NonFinite: 3, Checked: 128, Tolerance: 0.01}
	measured[attn] = bad
	r := Compose(cfg, measured, Ceilings{Datasheet: datasheetH200(), Measured: roofline.Ceiling{}})
	for _, k := range r.Kernels {
		raw, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		nan := k.Key == attn
		if got := strings.Contains(string(raw), `"rel_error":null`); got != nan {
			t.Errorf("%s (NaN output %v): %s", k.Name, nan, raw)
		}
	}
}
