package sweep

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// Launch is the launch baseline: what one kernel launch costs on this card, measured as the
// launch-to-launch time of an empty kernel. Every kernel time of the run includes at least this
// much per launch, so a kernel near it measures the launch, not itself. run.json holds it as
// "launch"; bench prints it and writes it as a record of kind "launch".
type Launch struct {
	Status string `json:"status"` // ok, skipped (the library has no empty kernel) or failed
	Reason string `json:"reason,omitempty"`
	// SecondsPerLaunch is the median over the samples of one sample's time / LaunchesPerSample.
	SecondsPerLaunch       float64   `json:"seconds_per_launch"`
	LaunchesPerSample      int       `json:"launches_per_sample"`
	Samples                int       `json:"samples"`
	SampleSecondsPerLaunch []float64 `json:"sample_seconds_per_launch,omitempty"`
	Method                 string    `json:"method"`
	// Emulated: the CPU emulator ran it; the time is the emulator's, not a card's.
	Emulated   bool      `json:"emulated"`
	MeasuredAt time.Time `json:"measured_at,omitzero"`
}

// The launch baseline's method: LaunchesPerSample launches of an empty kernel back to back
// between two events, after one untimed batch of as many (warm-up: module load, first-launch
// costs), LaunchSamples times. 1000 launches of a few µs each span milliseconds, far above the
// events' resolution.
const (
	LaunchesPerSample = 1000
	LaunchSamples     = 5
)

// LaunchMethod says how the baseline is measured, in run.json and the report.
var LaunchMethod = fmt.Sprintf("db_empty_kernel (one block of 32 threads, no work) launched %d times back to back on the "+
	"measurement stream between two device events, after one untimed batch of %d; median of %d samples of elapsed / %d. "+
	"Where the host enqueues launches more slowly than the card runs them, this is the host's launch rate: "+
	"either way the least time any kernel launch costs in this process", LaunchesPerSample, LaunchesPerSample, LaunchSamples, LaunchesPerSample)

// MeasureLaunch measures the launch baseline on dev. A library without db_empty_kernel gives a
// skipped baseline that says so; an error of the device a failed one.
func MeasureLaunch(dev *cgo.Device) Launch {
	l := Launch{LaunchesPerSample: LaunchesPerSample, Method: LaunchMethod, Emulated: dev.Library().Emulated(), MeasuredAt: time.Now().UTC()}
	fail := func(err error) Launch {
		l.Status, l.Reason = measure.StatusFailed, err.Error()
		if errors.Is(err, cgo.ErrNotExported) {
			l.Status, l.Reason = measure.StatusSkipped, "not measured: "+err.Error()
		}
		l.SampleSecondsPerLaunch = nil
		return l
	}
	if err := dev.EmptyKernel(LaunchesPerSample); err != nil {
		return fail(err)
	}
	if err := dev.Synchronize(); err != nil {
		return fail(err)
	}
	tm, err := dev.NewTimer()
	if err != nil {
		return fail(err)
	}
	defer tm.Close()
	for range LaunchSamples {
		if err := tm.Start(); err != nil {
			return fail(err)
		}
		if err := dev.EmptyKernel(LaunchesPerSample); err != nil {
			return fail(err)
		}
		if err := tm.Stop(); err != nil {
			return fail(err)
		}
		ms, err := tm.ElapsedMs()
		if err != nil {
			return fail(err)
		}
		s := float64(ms) * 1e-3 / LaunchesPerSample
		if !(s > 0) || math.IsInf(s, 0) {
			return fail(fmt.Errorf("timer fault: a sample of %d launches took %g ms", LaunchesPerSample, ms))
		}
		l.SampleSecondsPerLaunch = append(l.SampleSecondsPerLaunch, s)
	}
	l.Status, l.Samples, l.SecondsPerLaunch = measure.StatusOK, len(l.SampleSecondsPerLaunch), timing.Median(l.SampleSecondsPerLaunch)
	return l
}

// Text is the baseline in a sentence: "3.1 µs per launch (median of 5 samples of 1000 launches)".
func (l Launch) Text() string {
	switch l.Status {
	case "":
		return "not measured"
	case measure.StatusOK:
		s := fmt.Sprintf("%.2f µs per launch (empty kernel, median of %d samples of %d launches back to back)",
			l.SecondsPerLaunch*1e6, l.Samples, l.LaunchesPerSample)
		if l.Emulated {
			s += "; EMULATED: the CPU emulator's, not a card's"
		}
		return s
	}
	return l.Status + ": " + l.Reason
}
