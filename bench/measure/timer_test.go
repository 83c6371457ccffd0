package measure

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// simDevice models one CUDA stream and the host that feeds it: every host call costs host time,
// the device runs what is queued in order, never before it is queued. Times in seconds.
type simDevice struct {
	canHold    bool
	hostLaunch float64 // host seconds to queue one call (cgo + cudaLaunchKernel)
	kernel     float64 // device seconds of one call
	holdScale  float64 // the device's hold lasts holdScale x what was asked (a wrong estimate)

	host, free                float64 // host clock; when the device has run everything queued
	holdStart, start, stop    float64
	heldFor                   float64
	holds, starts, maxPerHold int
}

func (d *simDevice) now() time.Time {
	return time.Unix(0, 0).Add(time.Duration(d.host * 1e9))
}

// run queues a device op of dur at the current host time, the host paying cost.
func (d *simDevice) run(cost, dur float64) (begin float64) {
	d.host += cost
	begin = math.Max(d.host, d.free)
	d.free = begin + dur
	return begin
}

func (d *simDevice) Do(f func() error) error { return f() }
func (d *simDevice) CanHold() bool           { return d.canHold }
func (d *simDevice) Hold(s float64) error {
	d.holds++
	d.holdStart = d.run(1e-6, 0)
	d.run(d.hostLaunch, s*d.holdScale)
	d.heldFor = d.free - d.holdStart
	return nil
}
func (d *simDevice) Start() error { d.starts++; d.start = d.run(1e-6, 0); return nil }
func (d *simDevice) Stop() error  { d.stop = d.run(1e-6, 0); return nil }
func (d *simDevice) Elapsed() (float64, float64, error) {
	d.host = math.Max(d.host, d.stop) // cudaEventSynchronize
	held := 0.0
	if d.canHold {
		held = d.heldFor
	}
	return d.stop - d.start, held, nil
}

func (d *simDevice) launch(int) error { d.run(d.hostLaunch, d.kernel); return nil }

var simRule = timing.Config{Warmup: 2, MinSamples: 10, MinSeconds: 0, TargetSpread: 0.005, MaxSeconds: 1}

// A kernel shorter than the host's launch cost is timed at its own speed, not the host's: the
// calls of a sample are queued behind a hold before the start event fires.
func TestHoldKeepsTheHostOutOfTheSample(t *testing.T) {
	for _, c := range []struct {
		desc               string
		hostLaunch, kernel float64
		holdScale          float64
	}{
		{"3 µs kernel, 8 µs launches", 8e-6, 3e-6, 1},
		{"20 µs kernel, 5 µs launches (the first call's gap)", 5e-6, 20e-6, 1},
		{"the hold lasts half what was asked", 8e-6, 3e-6, 0.5},
		{"the hold lasts 3x what was asked", 8e-6, 3e-6, 3},
	} {
		d := &simDevice{canHold: true, hostLaunch: c.hostLaunch, kernel: c.kernel, holdScale: c.holdScale}
		st, reps, note, err := timeSamples(d, d.now, simRule, d.launch, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.desc, err)
		}
		if math.Abs(st.Median-c.kernel) > 1e-3*c.kernel {
			t.Errorf("%s: median %.3g s per call, want the kernel's %.3g (reps %d; %s)", c.desc, st.Median, c.kernel, reps, note)
		}
		if d.holds != d.starts {
			t.Errorf("%s: %d holds for %d samples", c.desc, d.holds, d.starts)
		}
		if strings.Contains(note, "kept although") {
			t.Errorf("%s: %s", c.desc, note)
		}
	}
}

// Without a hold (what the emulator does) the same device is timed
// at the host's launch rate: the simulation shows the error the hold removes.
func TestWithoutAHoldTheHostSetsTheTime(t *testing.T) {
	d := &simDevice{canHold: false, hostLaunch: 8e-6, kernel: 3e-6, holdScale: 1}
	st, _, note, err := timeSamples(d, d.now, simRule, d.launch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Median < 7e-6 || d.holds != 0 || !strings.Contains(note, "no hold") {
		t.Errorf("median %.3g s with no hold (%d holds, %q): the simulation no longer models launch gaps", st.Median, d.holds, note)
	}
}

// The CUDA path's hold (the FMA probe on one warp between the hold timer's events) runs on the
// emulator when forced: the plumbing works and its time is read back.
func TestDeviceSamplerHoldRuns(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	d, err := newDeviceSampler(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if d.CanHold() {
		t.Fatal("the emulator should not hold")
	}
	if d.hold, err = dev.NewTimer(); err == nil {
		d.buf, err = dev.Alloc(4 * 32)
	}
	if err != nil {
		t.Fatal(err)
	}
	d.canHold = true
	err = d.Do(func() error {
		for _, f := range []func() error{func() error { return d.Hold(1e-6) }, d.Start, d.Stop} {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sample, held, err := d.Elapsed()
	if err != nil || sample < 0 || !(held > 0) {
		t.Fatalf("elapsed %g s, held %g s: %v", sample, held, err)
	}
}

// A timer that gives NaN, zero or a negative time is refused at the first sample, not read as
// "too short" and retried with more and more calls.
func TestCalibrationRefusesABadTimerAtOnce(t *testing.T) {
	for _, bad := range []float64{math.NaN(), 0, -2.5e-4, math.Inf(1)} {
		calls, samples := 0, 0
		_, err := calibrateReps(func(reps int) (float64, error) {
			calls += reps
			samples++
			return bad, nil
		})
		if !errors.Is(err, timing.ErrBadSample) || !strings.Contains(err.Error(), "timer fault") || samples != 1 || calls != 1 {
			t.Errorf("sample %g: %v after %d samples, %d calls; want ErrBadSample at the first", bad, err, samples, calls)
		}
	}
}

// On the fake library with a faulty timer the measurement fails at once, naming the fault.
func TestMeasureWithAFaultyTimer(t *testing.T) {
	dev := fakeDevice(t)
	for _, fault := range []string{"timer-nan", "timer-zero", "timer-negative"} {
		t.Setenv("FAKEKERNELS_FAULT", fault)
		start := time.Now()
		out := Linear(dev, LinearSpec{Batch: 1, N: 16, K: 32, DType: cgo.DTypeBF16}, fastOptions())
		if out.Status != StatusFailed || !strings.Contains(out.Reason, "timer fault") || time.Since(start) > 5*time.Second {
			t.Errorf("%s: %s %q after %v; want failed at once naming the timer fault", fault, out.Status, out.Reason, time.Since(start))
		}
	}
}
