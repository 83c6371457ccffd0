package measure

import (
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/cgo"
)

// A speed above the datasheet is a failed measurement: with a timer that reports 1e-20 ms
// (the fake's timer-tiny fault) on a card with a datasheet, every kernel fails as
// implausible, at the first calibration sample; with the fake's honest timer it passes.
func TestImplausibleSpeedFails(t *testing.T) {
	specs := []struct {
		desc    string
		measure func(dev *cgo.Device, o Options) Outcome
	}{
		{"linear", func(dev *cgo.Device, o Options) Outcome {
			return Linear(dev, LinearSpec{Batch: 2, N: 64, K: 64, DType: cgo.DTypeBF16}, o)
		}},
		{"read probe", func(dev *cgo.Device, o Options) Outcome {
			return Probe(dev, ProbeSpec{Kind: cgo.ProbeRead, Bytes: 1 << 16}, o)
		}},
	}
	dev := fakeDevice(t)
	for _, s := range specs {
		// The datasheet found by the device's name.
		t.Setenv("FAKEKERNELS_NAME", "h200")
		t.Setenv("FAKEKERNELS_FAULT", "timer-tiny")
		start := time.Now()
		out := s.measure(dev, fastOptions())
		if out.Status != StatusFailed || !strings.HasPrefix(out.Reason, ImplausibleReason) || !strings.Contains(out.Reason, "H200") {
			t.Errorf("%s, timer-tiny on an H200: %s %q; want failed as implausible against the H200's datasheet", s.desc, out.Status, out.Reason)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: %v to refuse an impossible time (calibration climbed to its cap)", s.desc, d)
		}
		// An honest timer on the same card: plausible.
		t.Setenv("FAKEKERNELS_FAULT", "")
		if out := s.measure(dev, fastOptions()); out.Status != StatusOK {
			t.Errorf("%s, honest timer: %s %q", s.desc, out.Status, out.Reason)
		}
		// Options.Datasheet replaces the spec row: 1 kB/s makes the fake's honest time implausible
		// after sampling, on a device with no row of its own.
		t.Setenv("FAKEKERNELS_NAME", "")
		o := fastOptions()
		o.Datasheet = Datasheet{BytesPerSec: 1e3, FLOPsPerSec: 1e3, Source: "test"}
		if out := s.measure(dev, o); out.Status != StatusFailed || !strings.HasPrefix(out.Reason, ImplausibleReason) {
			t.Errorf("%s, 1 kB/s datasheet: %s %q", s.desc, out.Status, out.Reason)
		}
		if out := s.measure(dev, fastOptions()); out.Status != StatusOK {
			t.Errorf("%s, no datasheet: %s %q; want ok (nothing to compare with)", s.desc, out.Status, out.Reason)
		}
	}
}

// The bound: 1.05x the datasheet; 10x for bandwidth where the operands may come from L2
// (its working set under twice L2), never for arithmetic.
func TestImplausibleBound(t *testing.T) {
	d := Datasheet{BytesPerSec: 4.8e12, FLOPsPerSec: 989e12, Source: "h200"}
	tests := []struct {
		bytes, flops, seconds float64
		inL2, want            bool
	}{
		{4.8e12, 0, 1, false, false},
		{5.1e12, 0, 1, false, true},
		{5.1e12, 0, 1, true, false}, // L2 serves more than HBM
		{4.9e13, 0, 1, true, true},  // no cache does 10x
		{0, 1.1e15, 1, true, true},  // arithmetic has no cache
		{1, 0, 1e-23, false, true},  // a timer that says 1e-20 ms
		{1e30, 0, 1, false, false},  /* unknown card */
	}
	for i, tc := range tests {
		ds := d
		if i == len(tests)-1 {
			ds = Datasheet{}
		}
		if got := implausible(tc.bytes, tc.flops, tc.seconds, ds, tc.inL2) != ""; got != tc.want {
			t.Errorf("%g B, %g FLOP in %g s (L2 %v): implausible %v, want %v", tc.bytes, tc.flops, tc.seconds, tc.inL2, got, tc.want)
		}
	}
	if !mayHitL2(Rotation{WorkingSetBytes: 1e6, L2Bytes: 60e6}) || mayHitL2(Rotation{WorkingSetBytes: 240e6, L2Bytes: 60e6}) {
		t.Error("mayHitL2")
	}
}
