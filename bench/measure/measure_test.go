package measure

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cgotest.RemoveFakes()
	os.Exit(code)
}

// fastOptions keep emulated measurements to milliseconds: three samples, no minimum time, and
// a small rotation cap (the emulator's 4 MiB L2 would otherwise ask for 16 MiB of copies).
func fastOptions() Options {
	o := DefaultOptions()
	o.Timing = timing.Config{Warmup: 1, MinSamples: 3, MinSeconds: 0, TargetSpread: 1, MaxSeconds: 5}
	o.MaxRotateBytes = 256 << 10
	return o
}

// fakeDevice opens device 0 of testdata/fakekernels.c built with defines.
func fakeDevice(t *testing.T, defines ...string) *cgo.Device {
	t.Helper()
	lib, err := cgo.OpenPath(cgotest.FakeLibrary(t, "libdecodebench_emu.so", defines...))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := lib.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// checkOK asserts an emulated measurement that verified and timed.
func checkOK(t *testing.T, desc string, out Outcome, o Options) {
	t.Helper()
	if out.Status != StatusOK {
		t.Fatalf("%s: %s: %s (verification %+v)", desc, out.Status, out.Reason, out.Verification)
	}
	if !out.Emulated {
		t.Errorf("%s: the emulator's outcome does not say it is emulated", desc)
	}
	if !out.Verification.Passed || out.Verification.Checked < 1 || !(out.Verification.RelError <= out.Verification.Tolerance) {
		t.Errorf("%s: verification %+v", desc, out.Verification)
	}
	st := out.Stats
	if len(st.Samples) < o.Timing.MinSamples || !(st.Median > 0) || st.Min > st.Median || st.Median > st.Max || st.Q1 > st.Q3 {
		t.Errorf("%s: stats %+v", desc, st)
	}
	if out.RepsPerSample < 1 || !(out.Bytes > 0 || out.FLOPs > 0) {
		t.Errorf("%s: reps %d, bytes %g, flops %g", desc, out.RepsPerSample, out.Bytes, out.FLOPs)
	}
	if math.Abs(out.AchievedBytesPerSec-out.Bytes/st.Median) > 1e-9*out.AchievedBytesPerSec ||
		math.Abs(out.AchievedFLOPsPerSec-out.FLOPs/st.Median) > 1e-9*out.AchievedFLOPsPerSec {
		t.Errorf("%s: rates %g B/s %g FLOP/s from median %g", desc, out.AchievedBytesPerSec, out.AchievedFLOPsPerSec, st.Median)
	}
	if out.Rotation.Copies < 1 || out.Rotation.Method == "" {
		t.Errorf("%s: rotation %+v", desc, out.Rotation)
	}
}

func TestLinearOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	cases := []LinearSpec{
		{Batch: 1, N: 7, K: 24, DType: cgo.DTypeBF16},
		{Batch: 3, N: 300, K: 64, DType: cgo.DTypeFP16, Variant: cgo.LinearGEMV, SplitK: 2},
		{Batch: 17, N: 40, K: 200, DType: cgo.DTypeBF16, Variant: cgo.LinearMMA},
	}
	for _, s := range cases {
		out := Linear(dev, s, o)
		checkOK(t, "linear", out, o)
		if out.Kernel != "linear" || out.Bytes != s.Bytes() || out.FLOPs != 2*float64(s.Batch*s.N*s.K) {
			t.Errorf("%+v: kernel %q bytes %g flops %g", s, out.Kernel, out.Bytes, out.FLOPs)
		}
		if s.Variant != cgo.LinearAuto && out.Plan.Variant != s.Variant.String() {
			t.Errorf("%+v: plan %v", s, out.Plan)
		}
		if s.SplitK > 0 && out.Plan.SplitK != s.SplitK {
			t.Errorf("%+v: plan %v", s, out.Plan)
		}
		// 256 kB of copies at most: how many fit.
		wStride := roundUp(uint64(s.N*s.K)*s.DType.Bytes(), copyAlign)
		if want := min(int((256<<10)/wStride), int(math.Ceil(4*float64(4<<20)/float64(s.N*s.K*2)))); out.Rotation.Copies != want {
			t.Errorf("%+v: %d copies, want %d (%s)", s, out.Rotation.Copies, want, out.Rotation.Method)
		}
	}
	// N above the sampled rows: 64 rows of 300 checked for every sequence.
	if out := Linear(dev, cases[1], o); out.Verification.Checked != 3*maxLinearRefRows || !strings.Contains(out.Verification.Reason, "64 of 300") {
		t.Errorf("sampled verification: %+v", out.Verification)
	}
}

func TestRotationReachesTheFactor(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	o.MaxRotateBytes = 0 // 1/4 of the emulator's free memory
	out := Linear(dev, LinearSpec{Batch: 1, N: 64, K: 256, DType: cgo.DTypeBF16}, o)
	checkOK(t, "linear", out, o)
	r := out.Rotation
	if r.L2Bytes != 4<<20 || r.WorkingSetBytes < 4*r.L2Bytes || r.Copies != 4*(4<<20)/(64*256*2) || !strings.HasPrefix(r.Method, "rotate 512 copies") {
		t.Errorf("rotation %+v", r)
	}
}

func TestAttentionOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	cases := []AttentionSpec{
		{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 64, Contexts: []int{40}, DType: cgo.DTypeBF16},
		{Batch: 3, QHeads: 4, KVHeads: 1, HeadDim: 128, Contexts: []int{1, 100, 37}, PageSize: 16, DType: cgo.DTypeFP16},
		{Batch: 1, QHeads: 7, KVHeads: 1, HeadDim: 80, Contexts: []int{300}, Splits: 3, DType: cgo.DTypeBF16},
		{Batch: 2, QHeads: 16, KVHeads: 1, HeadDim: 96, Contexts: []int{70, 9}, PageSize: 32, DType: cgo.DTypeFP16, Variant: cgo.AttentionMMA},
		{Batch: 1, QHeads: 8, KVHeads: 2, HeadDim: 256, Contexts: []int{300}, Splits: 3, DType: cgo.DTypeBF16, Variant: cgo.AttentionMMA},
	}
	for _, s := range cases {
		out := Attention(dev, s, o)
		checkOK(t, "attention", out, o)
		if out.Kernel != "attention" || out.Bytes != s.Bytes() || out.FLOPs != s.FLOPs() {
			t.Errorf("%+v: kernel %q bytes %g flops %g", s, out.Kernel, out.Bytes, out.FLOPs)
		}
		if s.Splits > 0 && out.Plan.Splits != s.Splits {
			t.Errorf("%+v: plan %v", s, out.Plan)
		}
		if (s.PageSize > 0) != (out.Plan.Layout == "paged") {
			t.Errorf("%+v: plan %v", s, out.Plan)
		}
		wantVariant := s.Variant.String()
		if s.Variant == cgo.AttentionAuto {
			wantVariant = "simt" // until a card has timed both
		}
		if out.Plan.Variant != wantVariant {
			t.Errorf("%+v: plan variant %v, want %s", s, out.Plan.Variant, wantVariant)
		}
	}
	// KV read: 2 sequences x 40 tokens x 2 heads x 64 x 2 bytes, K and V.
	if got := cases[0].KVBytes(); got != 2*40*2*64*2*2 {
		t.Errorf("KV bytes %g", got)
	}
}

func TestProbesOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	for _, kind := range cgo.ProbeKinds {
		out := Probe(dev, ProbeSpec{Kind: kind, Bytes: 64 << 10}, o)
		checkOK(t, kind.String(), out, o)
		if out.Kernel != "probe:"+kind.String() {
			t.Errorf("kernel %q", out.Kernel)
		}
		if kind.Memory() && out.Bytes != float64(probeBuffers(kind)*(64<<10)) {
			t.Errorf("%v moves %g bytes", kind, out.Bytes)
		}
		if !kind.Memory() && (out.FLOPs <= 0 || out.Plan.Iterations != emuProbeIterations) {
			t.Errorf("%v: %g FLOPs, plan %v", kind, out.FLOPs, out.Plan)
		}
	}
	// Auto size under the emulator: small, and said in the plan.
	if out := Probe(dev, ProbeSpec{Kind: cgo.ProbeRead}, o); out.Status != StatusOK || out.Plan.BufferBytes != uint64(emuProbeBytes) {
		t.Errorf("auto read probe: %s %s %v", out.Status, out.Reason, out.Plan)
	}
}

func TestVerificationFailuresAreNeverTimed(t *testing.T) {
	o := fastOptions()
	linear := LinearSpec{Batch: 2, N: 9, K: 16, DType: cgo.DTypeBF16}
	cases := []struct {
		desc    string
		defines []string
		run     func(*cgo.Device) Outcome
		reason  string
	}{
		{"a linear layer that adds 0.5", []string{"FAKE_LINEAR_BIAS=0.5"},
			func(d *cgo.Device) Outcome { return Linear(d, linear, o) }, "relative L2 error"},
		{"a linear layer that skips an output", []string{"FAKE_LINEAR_SKIP=13"},
			func(d *cgo.Device) Outcome { return Linear(d, linear, o) }, "1 of 18 outputs are NaN or infinite (first: sequence 1, feature 4"},
		{"an attention that writes nothing", nil,
			func(d *cgo.Device) Outcome {
				return Attention(d, AttentionSpec{Batch: 1, QHeads: 2, KVHeads: 1, HeadDim: 64, Contexts: []int{5}, DType: cgo.DTypeBF16}, o)
			}, "128 of 128 outputs are NaN"},
		{"a read probe one off", []string{"FAKE_PROBE_BUG"},
			func(d *cgo.Device) Outcome { return Probe(d, ProbeSpec{Kind: cgo.ProbeRead, Bytes: 4096}, o) }, "sum of 1024 words"},
		{"a copy probe with one wrong word", []string{"FAKE_PROBE_BUG"},
			func(d *cgo.Device) Outcome { return Probe(d, ProbeSpec{Kind: cgo.ProbeCopy, Bytes: 4096}, o) }, "1 of 1024 words differ (first: word 0"},
		{"a triad probe with one wrong value", []string{"FAKE_PROBE_BUG"},
			func(d *cgo.Device) Outcome { return Probe(d, ProbeSpec{Kind: cgo.ProbeTriad, Bytes: 4096}, o) }, "1 of 1024 words differ (first: word 1"},
		{"an fma probe that writes 1.0", nil,
			func(d *cgo.Device) Outcome { return Probe(d, ProbeSpec{Kind: cgo.ProbeFMAF32}, o) }, "512 of 512 words differ"},
	}
	for _, c := range cases {
		out := c.run(fakeDevice(t, c.defines...))
		if out.Status != StatusFailed || out.Verification.Passed || !strings.Contains(out.Reason, c.reason) {
			t.Errorf("%s: %s: %q (want failed with %q)", c.desc, out.Status, out.Reason, c.reason)
		}
		if len(out.Stats.Samples) != 0 || out.AchievedBytesPerSec != 0 || out.RepsPerSample != 0 {
			t.Errorf("%s: a failed verification was timed: %+v", c.desc, out.Stats)
		}
	}
}

// The fake library's timer always reads 0.25 ms: the rates follow from it exactly.
func TestTimingArithmetic(t *testing.T) {
	dev := fakeDevice(t)
	o := fastOptions()
	s := LinearSpec{Batch: 4, N: 32, K: 64, DType: cgo.DTypeFP16}
	out := Linear(dev, s, o)
	if out.Status != StatusOK || out.RepsPerSample != 1 || out.Stats.Median != float64(float32(0.25))*1e-3 {
		t.Fatalf("%s %s: reps %d, median %g", out.Status, out.Reason, out.RepsPerSample, out.Stats.Median)
	}
	if want := s.Bytes() / 0.25e-3; math.Abs(out.AchievedBytesPerSec-want) > 1e-9*want {
		t.Errorf("achieved %g B/s, want %g", out.AchievedBytesPerSec, want)
	}
	if out.Emulated != true { // the fake calls itself "emu"
		t.Error("the fake emulator's outcome is not marked emulated")
	}
	o.Verify = false
	if out := Linear(dev, s, o); out.Status != StatusOK || out.Verification.Passed || !strings.Contains(out.Verification.Reason, "not verified") {
		t.Errorf("without verification: %s, %+v", out.Status, out.Verification)
	}
}

func TestCalibrateReps(t *testing.T) {
	cases := []struct {
		desc    string
		perCall float64
		want    int
	}{
		{"a 1 ms call times alone", 1e-3, 1},
		{"a 10 µs call: 24 a sample", 10e-6, 24},
		{"a 10 ns call: up to the cap", 10e-9, maxRepsPerSample},
	}
	for _, c := range cases {
		calls := 0
		reps, err := calibrateReps(func(reps int) (float64, error) {
			calls++
			return float64(reps) * c.perCall, nil
		})
		if err != nil || reps != c.want {
			t.Errorf("%s: %d reps (%v), want %d", c.desc, reps, err, c.want)
		}
		if calls > 7 {
			t.Errorf("%s: %d calibration samples", c.desc, calls)
		}
	}
}

func TestBadSpecs(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	bf := cgo.DTypeBF16
	att := func(mod func(*AttentionSpec)) AttentionSpec {
		s := AttentionSpec{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Contexts: []int{8}, DType: bf}
		mod(&s)
		return s
	}
	badOptions := o
	badOptions.RotateFactor = -1
	cases := []struct {
		desc, status, reason string
		out                  Outcome
	}{
		{"batch 0", StatusFailed, "invalid shape batch 0", Linear(dev, LinearSpec{Batch: 0, N: 8, K: 8, DType: bf}, o)},
		{"negative split-k", StatusFailed, "invalid split-k -1", Linear(dev, LinearSpec{Batch: 1, N: 8, K: 8, DType: bf, SplitK: -1}, o)},
		{"batch 1025", StatusSkipped, "batch 1025", Linear(dev, LinearSpec{Batch: 1025, N: 8, K: 8, DType: bf}, o)},
		{"k 12", StatusSkipped, "k 12 is not a multiple of 8", Linear(dev, LinearSpec{Batch: 1, N: 8, K: 12, DType: bf}, o)},
		{"f32", StatusSkipped, "dtype f32", Linear(dev, LinearSpec{Batch: 1, N: 8, K: 8, DType: cgo.DTypeF32}, o)},
		{"mma split-k", StatusSkipped, "split-k 2 with the mma", Linear(dev, LinearSpec{Batch: 1, N: 8, K: 8, DType: bf, Variant: cgo.LinearMMA, SplitK: 2}, o)},
		{"bad options", StatusFailed, "rotate factor -1", Linear(dev, LinearSpec{Batch: 1, N: 8, K: 8, DType: bf}, badOptions)},
		{"no device", StatusFailed, "no device", Linear(nil, LinearSpec{Batch: 1, N: 8, K: 8, DType: bf}, o)},
		{"head dim 72", StatusSkipped, "head dim 72", Attention(dev, att(func(s *AttentionSpec) { s.HeadDim = 72 }), o)},
		{"group 3 of 2", StatusFailed, "q heads 3 is not a multiple of kv heads 2", Attention(dev, att(func(s *AttentionSpec) { s.QHeads = 3 }), o)},
		{"three contexts for two", StatusFailed, "3 lengths for a batch of 2", Attention(dev, att(func(s *AttentionSpec) { s.Contexts = []int{1, 2, 3} }), o)},
		{"context 0", StatusFailed, "context length 0", Attention(dev, att(func(s *AttentionSpec) { s.Contexts = []int{0} }), o)},
		{"page 24", StatusSkipped, "page size 24", Attention(dev, att(func(s *AttentionSpec) { s.PageSize = 24 }), o)},
		{"2000 splits", StatusSkipped, "2000 splits", Attention(dev, att(func(s *AttentionSpec) { s.Splits = 2000 }), o)},
		{"variant 7", StatusFailed, "invalid variant variant(7)", Attention(dev, att(func(s *AttentionSpec) { s.Variant = 7 }), o)},
		{"an absurd cache", StatusSkipped, "too large", Attention(dev, att(func(s *AttentionSpec) { s.KVHeads, s.QHeads, s.Contexts = 1<<30, 1<<30, []int{1 << 30} }), o)},
		{"probe of 10 bytes", StatusFailed, "10 bytes: want a multiple of 16", Probe(dev, ProbeSpec{Kind: cgo.ProbeRead, Bytes: 10}, o)},
		{"probe kind 99", StatusFailed, "kind 99", Probe(dev, ProbeSpec{Kind: 99}, o)},
		{"a probe larger than memory", StatusSkipped, "does not fit", Probe(dev, ProbeSpec{Kind: cgo.ProbeCopy, Bytes: 1 << 40}, o)},
		{"a linear layer larger than memory", StatusSkipped, "does not fit", Linear(dev, LinearSpec{Batch: 1, N: 1 << 20, K: 1 << 20, DType: bf}, o)},
	}
	for _, c := range cases {
		if c.out.Status != c.status || !strings.Contains(c.out.Reason, c.reason) {
			t.Errorf("%s: %s %q, want %s with %q", c.desc, c.out.Status, c.out.Reason, c.status, c.reason)
		}
		if len(c.out.Stats.Samples) > 0 {
			t.Errorf("%s: timed", c.desc)
		}
	}
}

func TestFits(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	if ok, why := Fits(dev, 1<<20); !ok {
		t.Errorf("1 MiB does not fit: %s", why)
	}
	ok, why := Fits(dev, 1<<40)
	if ok || !strings.Contains(why, "needs 1.10 TB of device memory") {
		t.Errorf("1 TiB fits (%v) or the reason is unclear: %q", ok, why)
	}
	if ok, why := Fits(nil, 1); ok || why != "no device" {
		t.Errorf("nil device: %v %q", ok, why)
	}
	s := LinearSpec{Batch: 2, N: 10, K: 16, DType: cgo.DTypeBF16}
	if got := s.MinDeviceBytes(); got != 512+2*16*2+2*10*2 {
		t.Errorf("linear needs %d bytes", got)
	}
	a := AttentionSpec{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Contexts: []int{8, 3}, DType: cgo.DTypeBF16}
	if got := a.MinDeviceBytes(); got != 2*4096+2*2*4*64*2+8 {
		t.Errorf("attention needs %d bytes", got)
	}
}
