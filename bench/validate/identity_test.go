package validate

import (
	"context"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

// A card's memory against its kind: half of it fails, more than the kind has is suspicious
// (WARN), what NVML reports on a genuine card passes without a check.
func TestIdentityMemory(t *testing.T) {
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1), fakenvml.H100(2)}
	gpus[1].Set(func(s *fakenvml.State) { s.MemoryBytes = 40 << 30 })
	gpus[2].Set(func(s *fakenvml.State) { s.MemoryBytes = 96 << 30 }) // an "80GB" H100 with 96 GiB
	tg, f := targets(t, gpus, []Runner{goodH100(), goodH100(), goodH100()})
	cards, _, err := Run(context.Background(), Config{Suite: standard(t), Thresholds: BuiltinThresholds(), Features: f, SampleInterval: time.Millisecond}, tg, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards[0].Checks {
		if c.ID == "identity.memory" {
			t.Errorf("a genuine H100's 79.6 GiB: %s %s", c.Verdict, c.Message)
		}
	}
	expect(t, find(t, cards[1].Checks, "identity.memory"), Fail, "40.0 GiB", "short of the 80 GiB")
	expect(t, find(t, cards[2].Checks, "identity.memory"), Warn, "96.0 GiB", "20% more than the 80 GiB a h100-sxm has", "suspicious")
	if cards[2].SpecKey != "h100-sxm" {
		t.Errorf("the 96 GiB card matched %q, want its name's h100-sxm", cards[2].SpecKey)
	}
}

// On the emulator no kernel runs on the card: its idle memory clock (and PCIe link) are not
// read under load, so a low memory clock is SKIP, not a WARN about the card.
func TestEmulatedRunIsNoLoad(t *testing.T) {
	g := fakenvml.H100(0)
	g.Set(func(s *fakenvml.State) { s.MemClockMHz = 405 })
	emu := goodH100()
	emu.emulated = true
	tg, f := targets(t, []*fakenvml.GPU{g}, []Runner{emu})
	cards, _, err := Run(context.Background(), Config{Suite: TinySuite(), Thresholds: BuiltinThresholds(), Features: f, SampleInterval: time.Millisecond}, tg, 1)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, find(t, cards[0].Checks, "health.mem_clock"), Skip, "only while the card idled")
}
