package measure

import (
	"fmt"
	"math"
	"time"

	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// minSampleSeconds is the least device time one sample should span: event timestamps resolve
// about 0.5 µs, and launch gaps of a few µs between back-to-back calls must not be the whole
// sample. Calls shorter than this are timed R at a time and divided by R.
const minSampleSeconds = 200e-6

// maxRepsPerSample bounds R: a 2 µs kernel reaches 200 µs at R = 100.
const maxRepsPerSample = 1 << 14

// The hold: events time the device, but the device can only run what
// the host has queued. Without a hold the start event fires as soon as it is queued, the first
// call reaches the device one host launch later (a few µs through cgo and cudaLaunchKernel), and
// a kernel shorter than the host's launch cost (short-context attention, which is two launches,
// a router, a small expert) is timed at the host's launch rate, not its own: both make every
// sample slower than the device. So each sample first queues an untimed hold (one warp spinning
// on FMAs), then the start event, the R calls and the stop event; when the host has queued all
// of them before the hold ends (checked every sample: the host's enqueue time against the hold's
// own event time), the device runs the R calls back to back with no host gap in between. A
// sample whose queueing outlasted its hold is retaken with a longer hold.
const (
	minHoldSeconds  = 50e-6 // the shortest hold: covers queueing the start event and one call
	maxHoldSeconds  = 0.1   // the longest: 16384 calls at 6 µs each
	holdMargin      = 1.5   // hold >= 1.5x the host's expected queueing time
	maxHoldRetries  = 4     // retakes of a sample whose queueing outlasted its hold
	firstHostLaunch = 20e-6 // the guess of one call's host cost before any is seen
)

// sampleDevice is what timeCalls needs of a device: a stream with a timer and a hold.
type sampleDevice interface {
	// Do runs f with the device's calls inline (no goroutine hop between the launches).
	Do(f func() error) error
	// CanHold reports whether Hold does anything (the emulator runs launches synchronously).
	CanHold() bool
	// Hold queues an untimed device-side wait of about seconds on the stream.
	Hold(seconds float64) error
	// Start and Stop queue the timer's events.
	Start() error
	Stop() error
	// Elapsed waits for the stop event and gives the seconds between start and stop, and how
	// long the last hold actually held the stream (0 without one).
	Elapsed() (sample, held float64, err error)
}

// timeCalls times launch(call) for call = 0, 1, 2, ... (each call picks its rotated copy from
// the call number) with the device's timer: each sample is R calls back to back between two
// events on the context's stream, behind a hold (see above), R calibrated so that a sample
// spans minSampleSeconds, and reports per-call seconds under the sampling rule cfg (whose
// warm-up samples come first). The note says how the hold went.
//
// implausible (nil: none) says why a time per call is faster than the card can be: such a
// sample fails the calibration at once instead of raising the calls per sample to the cap.
func timeCalls(dev *cgo.Device, cfg timing.Config, launch func(call int) error, implausible func(secondsPerCall float64) string) (timing.Stats, int, string, error) {
	sd, err := newDeviceSampler(dev)
	if err != nil {
		return timing.Stats{}, 0, "", err
	}
	defer sd.close()
	return timeSamples(sd, time.Now, cfg, launch, implausible)
}

// sampler runs the samples of one measurement.
type sampler struct {
	dev    sampleDevice
	now    func() time.Time
	launch func(call int) error
	call   int
	// hostPerCall is the host's recent queueing time per call, seconds; holdScale the ratio
	// of the hold the device gave to the hold asked (its duration estimate's error).
	hostPerCall, holdScale float64
	retaken, starved       int
	longestHold            float64
}

func timeSamples(dev sampleDevice, now func() time.Time, cfg timing.Config, launch func(call int) error, implausible func(float64) string) (timing.Stats, int, string, error) {
	s := &sampler{dev: dev, now: now, launch: launch, hostPerCall: firstHostLaunch, holdScale: 1}
	reps, err := calibrateReps(func(reps int) (float64, error) {
		t, err := s.sample(reps)
		if err == nil && implausible != nil {
			if why := implausible(t / float64(reps)); why != "" {
				return t, errImplausible(why)
			}
		}
		return t, err
	})
	if err != nil {
		return timing.Stats{}, 0, "", err
	}
	stats, err := timing.Measure(cfg, func() (float64, error) {
		t, err := s.sample(reps)
		return t / float64(reps), err
	})
	return stats, reps, s.note(), err
}

// want is the hold a sample of reps calls needs, in seconds.
func (s *sampler) want(reps int) float64 {
	return min(maxHoldSeconds, max(minHoldSeconds, holdMargin*s.hostPerCall*float64(reps)))
}

// sample times reps calls behind a hold, retaking it while the host's queueing outlasted the
// hold (up to maxHoldRetries times; a sample kept anyway counts as starved in the note).
func (s *sampler) sample(reps int) (float64, error) {
	for attempt := 0; ; attempt++ {
		hold := 0.0
		if s.dev.CanHold() {
			hold = s.want(reps)
		}
		var elapsed, held float64
		var queued time.Duration
		err := s.dev.Do(func() error {
			t0 := s.now()
			if hold > 0 {
				if err := s.dev.Hold(hold / s.holdScale); err != nil {
					return fmt.Errorf("holding the stream: %w", err)
				}
			}
			if err := s.dev.Start(); err != nil {
				return err
			}
			for r := 0; r < reps; r++ {
				if err := s.launch(s.call); err != nil {
					return fmt.Errorf("call %d: %w", s.call, err)
				}
				s.call++
			}
			if err := s.dev.Stop(); err != nil {
				return err
			}
			queued = s.now().Sub(t0)
			var err error
			elapsed, held, err = s.dev.Elapsed()
			return err
		})
		if err != nil {
			return 0, err
		}
		if hold == 0 {
			return elapsed, nil
		}
		q := queued.Seconds()
		s.hostPerCall = max(q/float64(reps), 0.8*s.hostPerCall)
		if held > 0 {
			// Within [1/20, 20]: one odd reading must not ask for a hold of minutes.
			s.holdScale = min(20, max(0.05, held/(hold/s.holdScale)))
			s.longestHold = max(s.longestHold, held)
		}
		// The device reached the start event only after the hold; if the host had queued the
		// stop event by then, no call of the sample waited for the host.
		if q <= held {
			return elapsed, nil
		}
		if attempt == maxHoldRetries {
			s.starved++
			return elapsed, nil
		}
		s.retaken++
	}
}

func (s *sampler) note() string {
	if !s.dev.CanHold() {
		return "no hold: launches run synchronously (emulator)"
	}
	n := fmt.Sprintf("each sample queued behind a device-side hold (longest %.3g ms) so that no call waited for the host", s.longestHold*1e3)
	if s.retaken > 0 {
		n += fmt.Sprintf("; %d sample(s) retaken with a longer hold", s.retaken)
	}
	if s.starved > 0 {
		n += fmt.Sprintf("; %d sample(s) kept although the host was still queueing when the hold ended (they may include host gaps)", s.starved)
	}
	return n
}

// calibrateReps finds R such that a sample of R calls spans minSampleSeconds. The first
// sample is thrown away (the first launch of a kernel may load its module).
//
// Every sample must be a positive, finite time: a NaN, zero or negative one is a timer fault
// (events never recorded, a broken timer, a kernel that did not run), refused at once rather
// than read as "too short" and retried with ever more calls.
func calibrateReps(sample func(reps int) (float64, error)) (int, error) {
	first, err := sample(1)
	if err != nil {
		return 0, fmt.Errorf("first call: %w", err)
	}
	if err := checkSample(first, 1); err != nil {
		return 0, fmt.Errorf("first call: %w", err)
	}
	reps := 1
	for range 6 {
		s, err := sample(reps)
		if err == nil {
			err = checkSample(s, reps)
		}
		if err != nil {
			return 0, fmt.Errorf("calibrating calls per sample: %w", err)
		}
		if s >= minSampleSeconds || reps >= maxRepsPerSample {
			return reps, nil
		}
		next := int(math.Ceil(float64(reps) * 1.2 * minSampleSeconds / s))
		reps = min(max(next, reps+1), maxRepsPerSample)
	}
	return reps, nil
}

// checkSample refuses a sample that is not a positive finite time.
func checkSample(seconds float64, reps int) error {
	if seconds > 0 && !math.IsInf(seconds, 0) {
		return nil
	}
	return fmt.Errorf("timer fault: a sample of %d call(s) took %g s: %w", reps, seconds, timing.ErrBadSample)
}

// deviceSampler is sampleDevice on a cgo.Device: the hold is the FMA probe on one warp (no
// memory traffic, one SM, so nothing of the timed calls' working set is touched), timed by a
// second timer around it.
type deviceSampler struct {
	dev      *cgo.Device
	tm, hold *cgo.Timer
	buf      *cgo.Buffer
	canHold  bool
	held     bool
}

// holdSecondsPerIteration is the nominal time of one trip of the FMA probe's loop on one warp
// (128 dependent-in-8-chains FMAs, about 128 cycles at ~2 GHz); the sampler corrects it from
// each hold's measured duration.
const holdSecondsPerIteration = 64e-9

func newDeviceSampler(dev *cgo.Device) (*deviceSampler, error) {
	d := &deviceSampler{dev: dev, canHold: !dev.Library().Emulated()}
	var err error
	if d.tm, err = dev.NewTimer(); err != nil {
		return nil, err
	}
	if !d.canHold {
		return d, nil
	}
	if d.hold, err = dev.NewTimer(); err == nil {
		d.buf, err = dev.Alloc(4 * 32)
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("preparing the hold: %w", err)
	}
	return d, nil
}

func (d *deviceSampler) close() {
	for _, tm := range []*cgo.Timer{d.tm, d.hold} {
		if tm != nil {
			tm.Close()
		}
	}
	if d.buf != nil {
		d.buf.Close()
	}
}

func (d *deviceSampler) Do(f func() error) error { return d.dev.Do(f) }
func (d *deviceSampler) CanHold() bool           { return d.canHold }
func (d *deviceSampler) Start() error            { return d.tm.Start() }
func (d *deviceSampler) Stop() error             { return d.tm.Stop() }

func (d *deviceSampler) Hold(seconds float64) error {
	iterations := math.Ceil(seconds / holdSecondsPerIteration)
	iterations = min(max(iterations, 1), math.MaxInt32)
	if err := d.hold.Start(); err != nil {
		return err
	}
	p := cgo.ProbeParams{Kind: cgo.ProbeFMAF32, Result: d.buf.Ptr, Blocks: 1, Threads: 32, Iterations: int(iterations)}
	if _, err := d.dev.Probe(p); err != nil {
		return err
	}
	d.held = true
	return d.hold.Stop()
}

func (d *deviceSampler) Elapsed() (sample, held float64, err error) {
	ms, err := d.tm.ElapsedMs()
	if err != nil {
		return 0, 0, err
	}
	if d.held {
		d.held = false
		hms, err := d.hold.ElapsedMs()
		if err != nil {
			return 0, 0, err
		}
		held = float64(hms) * 1e-3
	}
	return float64(ms) * 1e-3, held, nil
}
