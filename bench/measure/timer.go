package measure

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// minSampleSeconds is the least device time one sample should span: event timestamps resolve
// about 0.5 µs, and launch gaps of a few µs between back-to-back calls must not be the whole
// sample. Calls shorter than this are timed R at a time and divided by R.
const minSampleSeconds = 200e-6

// maxRepsPerSample bounds R: a 2 µs kernel reaches 200 µs at R = 100.
const maxRepsPerSample = 1 << 14

// timeCalls times launch(call) for call = 0, 1, 2, ... (each call picks its rotated copy from
// the call number) with the device's timer: each sample is R calls back to back between two
// events on the context's stream, R calibrated so that a sample spans minSampleSeconds, and
// reports per-call seconds under the sampling rule cfg (whose warm-up samples come first).
// The launches of a sample are queued from inside one Device.Do, so no goroutine hop sits
// between them.
func timeCalls(dev *cgo.Device, cfg timing.Config, launch func(call int) error) (timing.Stats, int, error) {
	tm, err := dev.NewTimer()
	if err != nil {
		return timing.Stats{}, 0, err
	}
	defer tm.Close()
	call := 0
	sample := func(reps int) (float64, error) {
		var ms float32
		err := dev.Do(func() error {
			if err := tm.Start(); err != nil {
				return err
			}
			for r := 0; r < reps; r++ {
				if err := launch(call); err != nil {
					return fmt.Errorf("call %d: %w", call, err)
				}
				call++
			}
			if err := tm.Stop(); err != nil {
				return err
			}
			var err error
			ms, err = tm.ElapsedMs()
			return err
		})
		return float64(ms) * 1e-3, err
	}

	reps, err := calibrateReps(sample)
	if err != nil {
		return timing.Stats{}, 0, err
	}
	stats, err := timing.Measure(cfg, func() (float64, error) {
		s, err := sample(reps)
		return s / float64(reps), err
	})
	return stats, reps, err
}

// calibrateReps finds R such that a sample of R calls spans minSampleSeconds. The first
// sample is thrown away (the first launch of a kernel may load its module).
func calibrateReps(sample func(reps int) (float64, error)) (int, error) {
	if _, err := sample(1); err != nil {
		return 0, fmt.Errorf("first call: %w", err)
	}
	reps := 1
	for range 6 {
		s, err := sample(reps)
		if err != nil {
			return 0, fmt.Errorf("calibrating calls per sample: %w", err)
		}
		if s >= minSampleSeconds || reps >= maxRepsPerSample {
			return reps, nil
		}
		next := 16 * reps // a sample of 0 is below the timer's resolution
		if s > 0 {
			next = int(math.Ceil(float64(reps) * 1.2 * minSampleSeconds / s))
		}
		reps = min(max(next, reps+1), maxRepsPerSample)
	}
	return reps, nil
}
