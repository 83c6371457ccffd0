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
