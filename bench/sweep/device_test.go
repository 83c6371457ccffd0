package sweep

import (
	"context"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// tinyTiming keeps an emulated measurement to a few calls.
var tinyTiming = timing.Config{Warmup: 1, MinSamples: 3, MinSeconds: 0, TargetSpread: 0.5, MaxSeconds: 0.05, MaxSamples: 5}

// The sweep through bench/measure on the emulator: probes, linears, attention, all verified.
func TestRunOnEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	opts := measure.DefaultOptions()
	opts.Timing = tinyTiming
	opts.MaxRotateBytes = 1 << 20
	m := DeviceMeasurer{Device: dev, Options: opts}

	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 4}, Contexts: []int{64, 128}}
	dir := t.TempDir()
	d, err := Create(dir, RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	clock := newClock()
	info := testInfo(clock, axes)
	info.Backend = Backend{Name: "emu", Emulated: true}
	r := &Runner{Dir: d, Info: &info, Measurer: m, Now: time.Now}
	start := time.Now()
	res, err := r.Run(context.Background(), axes.Configs(), Prior{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("emulated sweep of %d configurations in %v", res.Records, time.Since(start))
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range p.Kernels {
		if k.Status != measure.StatusOK || !k.Emulated || !k.Verification.Passed {
			t.Errorf("%s: %s %q (emulated %v, verified %v)", k.Key, k.Status, k.Reason, k.Emulated, k.Verification.Passed)
		}
	}
	if res.OK != 4 {
		t.Fatalf("result %+v", res)
	}
	for _, rec := range p.Records {
		if !rec.Emulated || rec.PerServerTokensPerSec != float64(rec.Batch)*rec.PerRequestTokensPerSec {
			t.Errorf("%s: emulated %v, per-server %g, per-request %g", rec.Key, rec.Emulated, rec.PerServerTokensPerSec, rec.PerRequestTokensPerSec)
		}
	}
	if !p.Info.Measured.Known() {
		t.Errorf("no measured ceiling: %+v", p.Info.Measured)
	}
}
