// Package telemetry samples a GPU's clocks, temperature, power and throttle reasons while a
// measurement runs, and says whether the card slowed itself down during it.
//
// A Sampler reads a Source (NVML through bench/gpuinfo, or a fake in tests) on its own
// goroutine: once when the measurement starts, every Interval while it runs and once when it
// stops, so even a measurement shorter than the interval gets two readings. A measurement is
// Throttled when any reading in its window had a reason of gpuinfo.ThrottleMask set (hardware
// or software slowdown, thermal or power): its timing may be slower than the card can do.
package telemetry

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// Source gives one reading of the card's state. It must be safe to call from another
// goroutine than the one that created it (NVML is).
type Source interface {
	Read() (gpuinfo.Telemetry, error)
}

// DefaultInterval is how often a Sampler reads while a measurement runs. NVML answers a
// reading in tens of microseconds; ten readings a second cost nothing beside a kernel and
// catch a power-cap episode, which lasts hundreds of milliseconds.
const DefaultInterval = 100 * time.Millisecond

// maxErrors is the most distinct read errors a Summary keeps.
const maxErrors = 4

// Sampler reads Source every Interval between Start and Stop. A nil Source gives empty
// summaries (no telemetry: the emulator, or a machine without NVML).
type Sampler struct {
	Source   Source
	Interval time.Duration // 0 means DefaultInterval
}

// Window is one sampling window, from Start to Stop.
type Window struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	acc  accumulator
}

// Start takes a first reading and starts sampling on a goroutine until Stop.
func (s Sampler) Start() *Window {
	w := &Window{stop: make(chan struct{}), done: make(chan struct{})}
	if s.Source == nil {
		close(w.done)
		return w
	}
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	w.read(s.Source)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				w.read(s.Source) // the state at the end of the measurement
				return
			case <-tick.C:
				w.read(s.Source)
			}
		}
	}()
	return w
}

// Stop ends the window after one last reading and returns what was seen. Calling it again
// returns the same summary.
func (w *Window) Stop() Summary {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acc.summary()
}

func (w *Window) read(src Source) {
	t, err := src.Read()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acc.add(t, err)
}

// Summary is what the readings of one window say. Clocks and power are over the readings that
// gave them (a field NVML cannot give stays zero).
type Summary struct {
	Readings          int      `json:"readings"`
	SMClockMHzMin     uint32   `json:"sm_clock_mhz_min,omitempty"`
	SMClockMHzMax     uint32   `json:"sm_clock_mhz_max,omitempty"`
	MemClockMHzMin    uint32   `json:"mem_clock_mhz_min,omitempty"`
	MemClockMHzMax    uint32   `json:"mem_clock_mhz_max,omitempty"`
	TemperatureCMax   int      `json:"temperature_c_max,omitempty"`
	PowerWattsMean    float64  `json:"power_watts_mean,omitempty"`
	PowerWattsMax     float64  `json:"power_watts_max,omitempty"`
	ThrottleReasons   uint64   `json:"throttle_reasons,omitempty"` // every clocks event reason seen (bitwise or)
	ThrottleText      []string `json:"throttle_text,omitempty"`    // their names, as nvidia-smi gives them
	Throttled         bool     `json:"throttled"`                  // a reading had a reason of gpuinfo.ThrottleMask
	ThrottledReadings int      `json:"throttled_readings,omitempty"`
	Unavailable       []string `json:"unavailable,omitempty"` // what NVML could not give
	Errors            []string `json:"errors,omitempty"`      // distinct failed reads (a lost GPU says so here)
}

// Merge combines the summaries of several windows, as for a decode step composed of several
// measurements: throttled if any was.
func Merge(parts ...Summary) Summary {
	var m Summary
	var powerSum float64
	for _, p := range parts {
		if p.Readings == 0 && len(p.Errors) == 0 {
			continue
		}
		m.SMClockMHzMin = minNonZero(m.SMClockMHzMin, p.SMClockMHzMin)
		m.SMClockMHzMax = max(m.SMClockMHzMax, p.SMClockMHzMax)
		m.MemClockMHzMin = minNonZero(m.MemClockMHzMin, p.MemClockMHzMin)
		m.MemClockMHzMax = max(m.MemClockMHzMax, p.MemClockMHzMax)
		m.TemperatureCMax = max(m.TemperatureCMax, p.TemperatureCMax)
		m.PowerWattsMax = max(m.PowerWattsMax, p.PowerWattsMax)
		powerSum += p.PowerWattsMean * float64(p.Readings)
		m.Readings += p.Readings
		m.ThrottleReasons |= p.ThrottleReasons
		m.Throttled = m.Throttled || p.Throttled
		m.ThrottledReadings += p.ThrottledReadings
		m.Unavailable = union(m.Unavailable, p.Unavailable, 16)
		m.Errors = union(m.Errors, p.Errors, maxErrors)
	}
	if m.Readings > 0 {
		m.PowerWattsMean = powerSum / float64(m.Readings)
	}
	m.ThrottleText, _ = gpuinfo.DecodeClockEventReasons(m.ThrottleReasons)
	return m
}

// accumulator folds readings into a Summary.
type accumulator struct {
	s        Summary
	powerSum float64
	powerN   int
}

func (a *accumulator) add(t gpuinfo.Telemetry, err error) {
	if err != nil {
		a.s.Errors = union(a.s.Errors, []string{err.Error()}, maxErrors)
		// ReadTelemetry returns what it read before the failure; an all-zero reading is none.
		if t.SMClockMHz == 0 && t.MemClockMHz == 0 && t.PowerWatts == 0 && t.ThrottleReasons == 0 {
			return
		}
	}
	s := &a.s
	s.Readings++
	s.SMClockMHzMin = minNonZero(s.SMClockMHzMin, t.SMClockMHz)
	s.SMClockMHzMax = max(s.SMClockMHzMax, t.SMClockMHz)
	s.MemClockMHzMin = minNonZero(s.MemClockMHzMin, t.MemClockMHz)
	s.MemClockMHzMax = max(s.MemClockMHzMax, t.MemClockMHz)
	s.TemperatureCMax = max(s.TemperatureCMax, t.TemperatureC)
	if t.PowerWatts > 0 {
		a.powerSum += t.PowerWatts
		a.powerN++
		s.PowerWattsMax = max(s.PowerWattsMax, t.PowerWatts)
	}
	s.ThrottleReasons |= t.ThrottleReasons
	if t.Throttled {
		s.Throttled = true
		s.ThrottledReadings++
	}
	s.Unavailable = union(s.Unavailable, t.Unavailable, 16)
}

func (a *accumulator) summary() Summary {
	s := a.s
	if a.powerN > 0 {
		s.PowerWattsMean = a.powerSum / float64(a.powerN)
	}
	s.ThrottleText, _ = gpuinfo.DecodeClockEventReasons(s.ThrottleReasons)
	s.Unavailable = slices.Clone(s.Unavailable)
	s.Errors = slices.Clone(s.Errors)
	return s
}

// Describe is one line for a report: "throttled (SW Power Cap) in 3 of 12 readings; SM 1755-1980
// MHz, 68 °C max, 612 W max".
func (s Summary) Describe() string {
	if s.Readings == 0 {
		if len(s.Errors) > 0 {
			return "no telemetry: " + s.Errors[0]
		}
		return "no telemetry"
	}
	state := "not throttled"
	if s.Throttled {
		_, names := splitThrottle(s.ThrottleReasons)
		state = fmt.Sprintf("THROTTLED (%s) in %d of %d readings", joinOr(names, "unknown reason"), s.ThrottledReadings, s.Readings)
	}
	return fmt.Sprintf("%s; SM %d-%d MHz, memory %d-%d MHz, %d °C max, %.0f W max",
		state, s.SMClockMHzMin, s.SMClockMHzMax, s.MemClockMHzMin, s.MemClockMHzMax, s.TemperatureCMax, s.PowerWattsMax)
}

// splitThrottle names the reasons of mask that count as throttling.
func splitThrottle(mask uint64) (all, throttling []string) {
	all, _ = gpuinfo.DecodeClockEventReasons(mask)
	throttling, _ = gpuinfo.DecodeClockEventReasons(mask & gpuinfo.ThrottleMask)
	return all, throttling
}

func joinOr(items []string, empty string) string {
	if len(items) == 0 {
		return empty
	}
	out := items[0]
	for _, s := range items[1:] {
		out += ", " + s
	}
	return out
}

func minNonZero(a, b uint32) uint32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// union appends the items of add not yet in have, keeping at most limit.
func union(have, add []string, limit int) []string {
	for _, s := range add {
		if len(have) >= limit {
			break
		}
		if !slices.Contains(have, s) {
			have = append(have, s)
		}
	}
	return have
}
