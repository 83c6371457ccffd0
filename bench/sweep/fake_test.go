package sweep

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// fakeMeasurer pretends to be a card of 2 TB/s and 500 TFLOP/s: a kernel's median is its
// roofline time plus 2 µs. Each measurement advances clock by wallSeconds.
type fakeMeasurer struct {
	mu          sync.Mutex
	calls       map[string]int
	order       []string
	fail        string // a Spec key containing this fails verification
	skip        string // ... is refused as unsupported
	noFit       string // ... does not fit
	lose        bool   // a failure loses the device
	lost        bool
	clock       *fakeClock
	wallSeconds float64
	onMeasure   func(key string) // called before each measurement
}

func newFake(clock *fakeClock) *fakeMeasurer {
	return &fakeMeasurer{calls: map[string]int{}, clock: clock, wallSeconds: 0.5}
}

func (f *fakeMeasurer) Fits(s measure.Spec) (bool, string) {
	if f.noFit != "" && strings.Contains(s.Key(), f.noFit) {
		return false, "needs 200 GB of device memory, 141 GB free"
	}
	return true, ""
}

func (f *fakeMeasurer) Measure(s measure.Spec) measure.Outcome {
	key := s.Key()
	if f.onMeasure != nil {
		f.onMeasure(key)
	}
	f.mu.Lock()
	f.calls[key]++
	f.order = append(f.order, key)
	f.mu.Unlock()
	if f.clock != nil {
		f.clock.advance(f.wallSeconds)
	}
	switch {
	case f.fail != "" && strings.Contains(key, f.fail):
		if f.lose {
			f.lost = true
		}
		return measure.Outcome{Spec: s, Status: measure.StatusFailed, Reason: "verification failed: rel error 0.5 > tolerance 0.01",
			Verification: measure.Verification{Passed: false, RelError: 0.5, Tolerance: 0.01}}
	case f.skip != "" && strings.Contains(key, f.skip):
		return measure.Outcome{Spec: s, Status: measure.StatusSkipped, Reason: "unsupported shape"}
	}
	m := measure.Outcome{Spec: s, Status: measure.StatusOK, Bytes: s.Bytes(), FLOPs: s.FLOPs(), Verification: measure.Verification{Passed: true, Checked: 10}}
	var median float64
	switch {
	case s.Kind == measure.KindProbe && s.Probe.Kind == cgo.ProbeRead:
		median = float64(s.Probe.Bytes) / 2e12
		m.Bytes = float64(s.Probe.Bytes)
	case s.Kind == measure.KindProbe:
		m.FLOPs = 1e12
		median = m.FLOPs / 500e12
	default:
		median = max(s.Bytes()/2e12, s.FLOPs()/500e12) + 2e-6
	}
	m.Stats = timing.Summarize([]float64{median * 0.99, median, median * 1.01})
	m.Stats.Converged = true
	m.AchievedBytesPerSec = m.Bytes / median
	m.AchievedFLOPsPerSec = m.FLOPs / median
	m.Rotation = measure.Rotation{Copies: 4, Method: "rotate 4 copies"}
	return m
}

func (f *fakeMeasurer) Healthy() error {
	if f.lost {
		return errors.New("CUDA error: an illegal memory access was encountered")
	}
	return nil
}

func (f *fakeMeasurer) count(substr string) (n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, c := range f.calls {
		if strings.Contains(k, substr) {
			n += c
		}
	}
	return n
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(seconds float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Duration(seconds * 1e9))
}

// tinyModel is a small dense model the kernels accept.
func tinyModel() model.Shape {
	return model.Shape{Name: "tiny", Family: "custom", Hidden: 128, FFN: 256, Layers: 2, QHeads: 2, KVHeads: 1,
		HeadDim: 64, Vocab: 512, GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1, Source: "test"}
}

// newRun makes a run directory and a Runner on the fake.
func newRun(t *testing.T, dir string, f *fakeMeasurer, clock *fakeClock, axes Axes) (*Runner, Prior) {
	t.Helper()
	d, err := Create(dir, RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	info := testInfo(clock, axes)
	return testRunner(d, &info, f, clock), Prior{}
}

func testInfo(clock *fakeClock, axes Axes) RunInfo {
	return RunInfo{
		Version: "test", CommandLine: []string{"decodebench", "sweep"}, Started: clock.now(),
		Backend: Backend{Name: "cuda"}, Card: Card{Name: "NVIDIA H200", UUID: "GPU-h200", MemoryTotalBytes: 141 << 30},
		Axes: axes, Sessions: []Session{{Started: clock.now(), CommandLine: []string{"decodebench", "sweep"}}},
	}
}

func testRunner(d *RunDir, info *RunInfo, f *fakeMeasurer, clock *fakeClock) *Runner {
	return &Runner{
		Dir: d, Info: info, Measurer: f, ProbeBytes: 1 << 30, Now: clock.now,
		Ceilings: Ceilings{Datasheet: datasheetH200()},
		Cost:     &CostModel{Timing: timing.Default, SetupSeconds: DefaultSetupSeconds},
	}
}

// throttleDuring is a telemetry source that reports a power cap while active is true.
func throttleDuring(active *bool, mu *sync.Mutex) telemetry.Source {
	return telemetry.Func(func() (gpuinfo.Telemetry, error) {
		mu.Lock()
		defer mu.Unlock()
		t := gpuinfo.Telemetry{SMClockMHz: 1980, MemClockMHz: 3201, PowerWatts: 500}
		if *active {
			t.ThrottleReasons, t.Throttled, t.SMClockMHz = 4 /* SW power cap */, true, 1500
		}
		return t, nil
	})
}

func datasheetH200() roofline.Ceiling {
	g, err := roofline.LookupGPU("h200")
	if err != nil {
		panic(err)
	}
	return roofline.DatasheetCeiling(g)
}
