package step

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// TimedDevice is a Device that can time its stream.
type TimedDevice interface {
	Device
	NewTimer() (*cgo.Timer, error)
}

// Options are how a step is measured.
type Options struct {
	Timing    timing.Config     // the sampling rule (zero: timing.Default); one sample is Steps steps
	Telemetry telemetry.Sampler // NVML around each mode's samples (zero: none)
	// Trace keeps every step's ids and logits of an untimed run in each mode (Result.Traces),
	// and compares the modes with each other.
	Trace bool
}

// Timed is one mode's samples: per-step seconds, each sample the mean of Steps steps.
type Timed struct {
	Mode   Mode   `json:"mode"`
	Status string `json:"status"` // measure.StatusOK, StatusFailed or StatusSkipped
	Reason string `json:"reason,omitempty"`
	// Stats are per step: every sample is one run of Steps steps from a reset divided by
	// Steps, timed by events on the device's stream.
	Stats timing.Stats `json:"timing"`
	// HostSecondsPerStep is the median host time to queue one step (Go, cgo and the launch
	// calls): what the host adds where the device waits for it.
	HostSecondsPerStep float64           `json:"host_seconds_per_step"`
	Telemetry          telemetry.Summary `json:"telemetry"`
}

// OK reports whether the mode has a time.
func (t Timed) OK() bool { return t.Status == measure.StatusOK && t.Stats.Median > 0 }

// Result is what Measure found for one configuration.
type Result struct {
	Status      string   // ok when every asked mode is ok
	Reason      string   // why not
	Launches    int      // calls in one step
	DeviceBytes uint64   // allocated
	Notes       []string // how the step differs from the composed one
	Modes       []Timed
	Traces      []Trace // with Options.Trace, one per mode
	// ModesAgree: with Options.Trace and both modes, whether graph and eager gave the same
	// tokens and logits bit for bit at every step.
	ModesAgree *bool
	Emulated   bool
	// Verification: how the step was checked before it was timed (Verify).
	Verification Verification
}

// Measure runs c in each mode: plans the step (skipped, with the reason, when it does not fit
// or a shape is refused), verifies it against the float64 forward pass (Verify: a step that
// disagrees fails with its first bad logit and is never timed), allocates it, optionally
// traces every step untimed, then times each mode under the sampling rule with telemetry
// around it. Only a device error stops it early.
func Measure(dev TimedDevice, emulated bool, c Config, modes []Mode, o Options) Result {
	r := Result{Status: measure.StatusOK, Emulated: emulated}
	p, err := New(c)
	if err != nil {
		return Result{Status: measure.StatusSkipped, Reason: err.Error(), Emulated: emulated}
	}
	r.Notes = p.Notes
	// Whether the step fits is known before anything is allocated: a step that does not is
	// skipped without spending its check.
	workspaces, err := p.Plan(dev)
	if err == nil {
		err = Fits(dev, p, p.BufferBytes()+workspaces.Total())
	}
	var e *Engine
	if err == nil {
		var modeErrs map[Mode]error
		r.Verification, modeErrs = Verify(dev, c, modes)
		if err = verificationError(r.Verification, modeErrs, modes); err == nil {
			e, err = Open(dev, p)
		}
		if err == nil {
			defer e.Close()
			r.Launches, r.DeviceBytes = len(e.Ops), e.DeviceBytes
		}
		for _, m := range modes {
			if merr, ok := modeErrs[m]; ok && err == nil {
				r.Modes = append(r.Modes, Timed{Mode: m, Status: statusOf(merr), Reason: "verification: " + merr.Error()})
			}
		}
	}
	if err != nil {
		r.Status = measure.StatusFailed
		if errors.Is(err, ErrDoesNotFit) || errors.Is(err, cgo.ErrUnsupportedShape) || errors.Is(err, cgo.ErrOutOfMemory) || errors.Is(err, cgo.ErrNotExported) || errors.Is(err, errUnverifiable) {
			r.Status = measure.StatusSkipped
		}
		r.Reason = err.Error()
		return r
	}
	cfg := o.Timing
	if cfg == (timing.Config{}) {
		cfg = timing.Default
	}
	for _, m := range modes {
		if hasMode(r, m) {
			continue // its steps could not run untimed: said above
		}
		t := Timed{Mode: m, Status: measure.StatusOK}
		if o.Trace {
			tr, err := e.Trace(m)
			if err != nil {
				t.Status, t.Reason = statusOf(err), "trace: "+err.Error()
				r.Modes = append(r.Modes, t)
				continue
			}
			r.Traces = append(r.Traces, tr)
		}
		w := o.Telemetry.Start()
		t.Stats, t.HostSecondsPerStep, err = e.Time(dev, m, cfg)
		t.Telemetry = w.Stop()
		if err == nil {
			err = e.checkLogits()
		}
		if err != nil {
			t.Status, t.Reason = statusOf(err), err.Error()
		}
		r.Modes = append(r.Modes, t)
	}
	if len(r.Traces) == 2 {
		agree := slices.EqualFunc(r.Traces[0].Logits, r.Traces[1].Logits, slices.Equal) &&
			slices.EqualFunc(r.Traces[0].Next, r.Traces[1].Next, slices.Equal)
		r.ModesAgree = &agree
	}
	var why []string
	for _, t := range r.Modes {
		if t.Status != measure.StatusOK {
			why = append(why, fmt.Sprintf("%s: %s", t.Mode, t.Reason))
			if r.Status == measure.StatusOK || t.Status == measure.StatusFailed {
				r.Status = t.Status
			}
		}
	}
	if r.ModesAgree != nil && !*r.ModesAgree {
		r.Status = measure.StatusFailed
		why = append(why, "graph and eager modes gave different tokens or logits")
	}
	r.Reason = strings.Join(why, "; ")
	return r
}

// errUnverifiable marks a step the float64 forward pass cannot check: never timed, skipped.
var errUnverifiable = errors.New("not verified")

// verificationError is why a verified step is not timed at all: it was wrong (failed), the
// reference could not check it or no mode ran (skipped, with the modes' errors). Nil when
// it is verified; a mode that alone could not run is recorded by Measure as that mode's.
func verificationError(v Verification, modeErrs map[Mode]error, modes []Mode) error {
	switch {
	case v.Verified:
		return nil
	case v.FirstBad != nil:
		return fmt.Errorf("the step disagrees with the float64 forward pass (%s): %s", v.How(), v.Reason)
	case len(modeErrs) == len(modes) && len(modes) > 0:
		return fmt.Errorf("%s mode, run untimed to verify it: %w", modes[0], modeErrs[modes[0]])
	}
	return fmt.Errorf("%w: %s", errUnverifiable, v.Reason)
}

// hasMode reports whether r already holds mode m (a mode that could not run untimed).
func hasMode(r Result, m Mode) bool {
	return slices.ContainsFunc(r.Modes, func(t Timed) bool { return t.Mode == m })
}

// statusOf: a function the library lacks (graphs before they are built) or a shape a kernel
// refuses is skipped; anything else failed.
func statusOf(err error) string {
	if errors.Is(err, cgo.ErrNotExported) || errors.Is(err, cgo.ErrUnsupportedShape) {
		return measure.StatusSkipped
	}
	return measure.StatusFailed
}

// Time measures mode under cfg. Each sample resets the state (untimed), then queues Steps
// steps between the timer's two events and waits for them: per-step seconds are the sample
// over Steps. Graph mode captures before the first sample. No device-side hold precedes the
// start event: the first launch reaches the device a few microseconds after it, under 0.2% of
// a 32-step sample of any step above 100 µs, and in eager mode the host's pace is part of what
// is measured (an engine without graphs pays it too).
func (e *Engine) Time(dev TimedDevice, mode Mode, cfg timing.Config) (stats timing.Stats, hostPerStep float64, err error) {
	if mode == Graph && e.graph == nil {
		if err := e.Reset(); err != nil {
			return stats, 0, err
		}
		if err := e.Step(Graph); err != nil { // captures, then replays one step
			return stats, 0, err
		}
	}
	tm, err := dev.NewTimer()
	if err != nil {
		return stats, 0, err
	}
	defer tm.Close()
	steps := e.Program.Steps
	var hosts []float64
	sample := func() (float64, error) {
		if err := e.Reset(); err != nil {
			return 0, err
		}
		var queued time.Duration
		err := dev.Do(func() error {
			if err := tm.Start(); err != nil {
				return err
			}
			t0 := time.Now()
			for i := 0; i < steps; i++ {
				if err := e.Step(mode); err != nil {
					return fmt.Errorf("step %d: %w", i, err)
				}
			}
			queued = time.Since(t0)
			return tm.Stop()
		})
		if err != nil {
			return 0, err
		}
		ms, err := tm.ElapsedMs()
		if err != nil {
			return 0, err
		}
		hosts = append(hosts, queued.Seconds()/float64(steps))
		return float64(ms) * 1e-3 / float64(steps), nil
	}
	stats, err = timing.Measure(cfg, sample)
	if err != nil {
		return stats, 0, err
	}
	if len(hosts) > 0 {
		hostPerStep = timing.Summarize(hosts).Median
	}
	return stats, hostPerStep, nil
}

// checkLogits reads the last step's logits: a NaN or infinity anywhere (an op that wrote
// nothing leaves its 0xFF poison, which reads as NaN) fails the mode.
func (e *Engine) checkLogits() error {
	p := e.Program
	bits := make([]uint16, p.Batch*p.Model.Vocab)
	if err := cgo.Read(e.bufs[bufLogits], bits); err != nil {
		return fmt.Errorf("reading the logits: %w", err)
	}
	bad := 0
	for _, f := range LogitsOf(p.DType, bits) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d logits of the last step are NaN or infinite", bad, len(bits))
	}
	return nil
}

// LogitsOf converts logits bits of dtype d to float64.
func LogitsOf(d cgo.DType, bits []uint16) []float64 {
	out := make([]float64, len(bits))
	for i, b := range bits {
		if d == cgo.DTypeFP16 {
			out[i] = float64(ref.FP16ToFloat32(b))
		} else {
			out[i] = float64(ref.BF16ToFloat32(b))
		}
	}
	return out
}
