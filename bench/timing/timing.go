// Package timing decides how long to sample a measurement and summarises the samples: the
// sampling rule of every measurement in plain Go, independent of any device.
//
// Rule: take at least MinSamples samples and at least MinSeconds of wall time, then keep going
// until the relative spread (interquartile range / median) falls under TargetSpread, or the
// MaxSeconds timeout passes. Every sample is kept; a result that stopped on the timeout says so
// (Converged false) rather than pretending to be precise.
package timing

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Config is the sampling rule.
type Config struct {
	Warmup       int     // untimed calls before sampling (clocks up, caches and TLBs warm)
	MinSamples   int     // at least this many samples
	MinSeconds   float64 // and at least this much wall time spent sampling
	TargetSpread float64 // then stop once (Q3 - Q1) / median falls under this
	MaxSeconds   float64 // or once this much wall time has passed
	MaxSamples   int     // hard cap on samples kept (memory), 0 = 100000
}

// Default is the rule every command uses unless told otherwise (the README's "Timing kernels on
// a GPU"): 10 samples and 0.5 s, then spread under 0.5%, 10 s at most.
var Default = Config{Warmup: 3, MinSamples: 10, MinSeconds: 0.5, TargetSpread: 0.005, MaxSeconds: 10}

// Validate reports a rule that cannot terminate or makes no sense.
func (c Config) Validate() error {
	switch {
	case c.Warmup < 0:
		return fmt.Errorf("warm-up %d: must be >= 0", c.Warmup)
	case c.MinSamples < 1:
		return fmt.Errorf("minimum samples %d: must be >= 1", c.MinSamples)
	case c.MinSeconds < 0 || math.IsNaN(c.MinSeconds):
		return fmt.Errorf("minimum seconds %g: must be >= 0", c.MinSeconds)
	case !(c.TargetSpread > 0):
		return fmt.Errorf("target spread %g: must be > 0", c.TargetSpread)
	case !(c.MaxSeconds > 0) || c.MaxSeconds < c.MinSeconds:
		return fmt.Errorf("timeout %gs: must be > 0 and >= the minimum %gs", c.MaxSeconds, c.MinSeconds)
	}
	return nil
}

// Stats summarises the samples of one measurement, in seconds.
type Stats struct {
	Samples     []float64 `json:"samples_seconds"`
	Median      float64   `json:"median_seconds"`
	Min         float64   `json:"min_seconds"`
	Max         float64   `json:"max_seconds"`
	Q1          float64   `json:"q1_seconds"`
	Q3          float64   `json:"q3_seconds"`
	Spread      float64   `json:"spread"` // (Q3 - Q1) / median
	Converged   bool      `json:"converged"`
	WallSeconds float64   `json:"wall_seconds"`
}

// ErrBadSample is returned when a sampler gives a non-finite or non-positive duration.
var ErrBadSample = errors.New("timing: sample is not a positive finite duration")

// Clock is the wall clock; tests replace it.
type Clock func() time.Time

// Measure runs warm-up calls, then calls sample until the rule is met. sample returns one
// duration in seconds (device time for kernels); its error stops the measurement.
func Measure(cfg Config, sample func() (float64, error)) (Stats, error) {
	return MeasureWithClock(cfg, time.Now, sample)
}

// MeasureWithClock is Measure with an injected wall clock.
func MeasureWithClock(cfg Config, now Clock, sample func() (float64, error)) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	maxSamples := cfg.MaxSamples
	if maxSamples <= 0 {
		maxSamples = 100000
	}
	for i := 0; i < cfg.Warmup; i++ {
		if _, err := sample(); err != nil {
			return Stats{}, fmt.Errorf("warm-up call %d: %w", i+1, err)
		}
	}
	start := now()
	var samples []float64
	for {
		s, err := sample()
		if err != nil {
			return Stats{}, fmt.Errorf("sample %d: %w", len(samples)+1, err)
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return Stats{}, fmt.Errorf("sample %d = %g: %w", len(samples)+1, s, ErrBadSample)
		}
		samples = append(samples, s)
		elapsed := now().Sub(start).Seconds()
		if len(samples) < cfg.MinSamples || elapsed < cfg.MinSeconds {
			if elapsed < cfg.MaxSeconds && len(samples) < maxSamples {
				continue
			}
		}
		st := Summarize(samples)
		st.WallSeconds = elapsed
		st.Converged = st.Spread < cfg.TargetSpread && len(samples) >= cfg.MinSamples
		if st.Converged || elapsed >= cfg.MaxSeconds || len(samples) >= maxSamples {
			return st, nil
		}
	}
}

// Summarize computes the order statistics of samples (kept in measurement order).
func Summarize(samples []float64) Stats {
	st := Stats{Samples: samples}
	if len(samples) == 0 {
		return st
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	st.Min, st.Max = sorted[0], sorted[len(sorted)-1]
	st.Median = Quantile(sorted, 0.5)
	st.Q1, st.Q3 = Quantile(sorted, 0.25), Quantile(sorted, 0.75)
	if st.Median > 0 {
		st.Spread = (st.Q3 - st.Q1) / st.Median
	}
	return st
}

// Median of xs (not modified), as Summarize takes it; 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Quantile(s, 0.5)
}

// Quantile of sorted data by linear interpolation between closest ranks (type 7, as numpy's
// default). sorted must be ascending and non-empty.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
}
