package validate

import (
	"context"
	"sync"
	"testing"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The tiny suite through bench/measure on the emulator: every step runs and is verified, and
// every gate says the emulator is no speed.
func TestTinySuiteOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	var lock sync.Mutex
	runner := DeviceRunner{Device: dev, Options: measure.DefaultOptions(), Lock: &lock}
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1)}
	tg, f := targets(t, gpus, []Runner{runner, runner})
	cards, _, err := Run(context.Background(), Config{Suite: TinySuite(), Thresholds: BuiltinThresholds(), Features: f}, tg, 2)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := TinySuite().Plan()
	for _, c := range cards {
		if len(c.Outcomes) != len(plan.Steps) {
			t.Fatalf("%d outcomes for %d steps", len(c.Outcomes), len(plan.Steps))
		}
		for _, o := range c.Outcomes {
			if o.Status != measure.StatusOK || !o.Verification.Ran || !o.Verification.Passed || !o.Emulated {
				t.Errorf("%s (%s): %s %q, verification %+v, emulated %v", o.Step, o.Kernel, o.Status, o.Reason, o.Verification, o.Emulated)
			}
		}
		for _, ch := range c.Checks {
			switch ch.Category {
			case CategoryPerformance:
				expect(t, ch, Skip, "emulated backend")
			case CategoryOutlier:
				t.Errorf("emulated cards compared as peers: %s", ch.Message)
			default:
				expect(t, ch, Pass)
			}
		}
		// SKIP checks count as PASS: the emulator's missing speed says nothing about the card.
		if c.Verdict != Pass {
			t.Errorf("card verdict %s, want PASS (healthy, correct, speed gates SKIP)", c.Verdict)
		}
	}
}
