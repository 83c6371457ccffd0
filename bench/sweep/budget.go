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

// Budget is what --budget did to the sweep, as run.json records it.
type Budget struct {
	Seconds          float64 `json:"seconds"`
	EstimatedSeconds float64 `json:"estimated_seconds"` // of the configurations kept, when planned
	Planned          int     `json:"planned"`           // configurations kept
	// Dropped lists the configurations left out to fit, by key, coarse grid kept: the finest
	// points of the batch x context grid go first (see Axes.Configs).
	Dropped []string `json:"dropped,omitempty"`
	Note    string   `json:"note,omitempty"`
}

// CostModel estimates the wall time of measuring one kernel shape, to plan a budget and to
// show an ETA. A measurement costs its setup (allocating and filling the operands, verifying
// against the host reference) plus its sampling: warm-up calls, then at least MinSamples
// calls and MinSeconds. A kernel's call time is predicted from its bytes and FLOPs on the
// ceiling. Scale corrects all of it by what the measurements so far actually took.
type CostModel struct {
	Timing timing.Config
	// BytesPerSec and FLOPsPerSec predict a call's time: the measured ceiling once the probes
	// ran, the datasheet's before. Zero: every call is taken to cost MinCallSeconds.
	BytesPerSec, FLOPsPerSec float64
	SetupSeconds             float64 // per measurement
	// Peer is the linear variant measured beside each of our linear kernels (Runner.Peer):
	// its measurements count in the estimates too. LinearAuto: none.
	Peer cgo.LinearVariant
	// WholeSteps > 0: the sweep also runs each configuration's whole step (--step e2e or
	// both), WholeSteps steps a sample in WholeStepModes modes; they count in the estimates.
	WholeSteps, WholeStepModes int
	Scale                      float64 // observed / estimated so far; 0 means 1

	observed, estimated float64
}

// Setup and call-time floors of the default cost model. The setup time is a starting guess,
// not a measurement: Observe replaces it with what the sweep's own measurements take after
// the first few. No kernel launch takes less than a few microseconds.
const (
	DefaultSetupSeconds = 0.3
	MinCallSeconds      = 3e-6
)

// Kernel estimates the wall seconds of measuring s.
func (c *CostModel) Kernel(s measure.Spec) float64 {
	return c.unscaled(s) * c.scale()
}

func (c *CostModel) unscaled(s measure.Spec) float64 {
	call := MinCallSeconds
	if c.BytesPerSec > 0 {
		call = math.Max(call, s.Bytes()/c.BytesPerSec)
	}
	if c.FLOPsPerSec > 0 {
		call = math.Max(call, s.FLOPs()/c.FLOPsPerSec)
	}
	t := c.Timing
	sampling := math.Max(t.MinSeconds, float64(t.MinSamples)*call) + float64(t.Warmup)*call
	return c.SetupSeconds + sampling
}

func (c *CostModel) scale() float64 {
	if c.Scale > 0 {
		return c.Scale
	}
	return 1
}

// Observe learns from a measurement of s that took wallSeconds: Scale becomes the ratio of
// everything observed to everything estimated so far.
func (c *CostModel) Observe(s measure.Spec, wallSeconds float64) {
	if !(wallSeconds > 0) {
		return
	}
	c.observed += wallSeconds
	c.estimated += c.unscaled(s)
	if c.estimated > 0 {
		c.Scale = c.observed / c.estimated
	}
}

// WholeStep estimates the wall seconds of running cfg's whole step: filling its weights and
// caches (a fill writes at about a third of the bandwidth), then in each mode the sampling
// rule over samples of WholeSteps steps, a step taking its roofline time on the ceiling.
func (c *CostModel) WholeStep(cfg Config) float64 {
	if c.WholeSteps <= 0 {
		return 0
	}
	s := cfg.Model
	bytes := s.WeightBytesPerStep(cfg.Batch) + float64(cfg.Batch)*s.KVBytesPerSequence(cfg.Context)
	stepTime := MinCallSeconds * float64(s.Layers*10)
	fill := 0.0
	if c.BytesPerSec > 0 {
		stepTime = math.Max(stepTime, bytes/c.BytesPerSec)
		fill = 3 * (s.WeightBytesTotal() + float64(cfg.Batch)*s.KVBytesPerSequence(cfg.Context+c.WholeSteps)) / c.BytesPerSec
	}
	sample := float64(c.WholeSteps) * stepTime
	t := c.Timing
	perMode := math.Max(t.MinSeconds, float64(t.MinSamples)*sample) + float64(t.Warmup)*sample
	return (c.SetupSeconds + fill + float64(max(c.WholeStepModes, 1))*perMode) * c.scale()
}

// ObserveWholeStep learns from a whole step of cfg that took wallSeconds, as Observe does.
func (c *CostModel) ObserveWholeStep(cfg Config, wallSeconds float64) {
	est := c.WholeStep(cfg) / c.scale()
	if !(wallSeconds > 0) || !(est > 0) {
		return
	}
	c.observed += wallSeconds
	c.estimated += est
	c.Scale = c.observed / c.estimated
}

// Plan keeps configurations in order while their new kernels fit in seconds; a kernel shape
// counts once, and not at all when it is in measured already. It returns the kept and the
// dropped configurations and the estimated seconds of the kept ones. An infinite limit keeps
// all; a limit <= 0 keeps only configurations that need no new measurement.
func Plan(configs []Config, measured map[string]bool, cost *CostModel, limitSeconds float64) (kept, dropped []Config, estimate float64) {
	planned := map[string]bool{}
	for _, cfg := range configs {
		newKernels := map[string]measure.Spec{}
		var extra float64
		for _, spec := range stepSpecs(cfg, cost.Peer) {
			key := spec.Key()
			if _, seen := newKernels[key]; measured[key] || planned[key] || seen {
				continue
			}
			newKernels[key] = spec
			extra += cost.Kernel(spec)
		}
		extra += cost.WholeStep(cfg)
		if extra > 0 && estimate+extra > limitSeconds {
			dropped = append(dropped, cfg)
			continue
		}
		for key := range newKernels {
			planned[key] = true
		}
		estimate += extra
		kept = append(kept, cfg)
	}
	return kept, dropped, estimate
}

// ErrBudget is returned by CheckBudget for a budget that leaves nothing to measure.
var ErrBudget = errors.New("the budget drops every configuration")

// CheckBudget estimates, before anything is measured, whether BudgetSeconds keeps at least
// one of the configurations that need a measurement, with the cost model on the datasheet
// ceiling (the fastest the card can be, so the estimate is the least the sweep needs). A
// budget that keeps none is ErrBudget, naming what the cheapest one needs.
func (r *Runner) CheckBudget(configs []Config, prior Prior) error {
	if r.BudgetSeconds <= 0 {
		return nil
	}
	if r.Cost == nil {
		r.Cost = &CostModel{SetupSeconds: DefaultSetupSeconds}
	}
	r.Cost.Peer = r.Peer
	r.wholeStepCost()
	s := &state{Runner: r, done: map[string]bool{}}
	measured := map[string]bool{}
	for _, m := range prior.Kernels {
		if m.Status != measure.StatusFailed || !r.RetryFailed {
			measured[m.Key] = true
		}
	}
	for _, rec := range prior.Records {
		if rec.Status != measure.StatusFailed || !r.RetryFailed {
			s.done[rec.Key] = true
		}
	}
	s.useCeilingForCost()
	var runnable []Config
	for _, cfg := range configs {
		if ok, _ := s.stepFits(cfg); ok && !s.done[cfg.Key()] {
			runnable = append(runnable, cfg)
		}
	}
	kept, dropped, _ := Plan(runnable, measured, r.Cost, r.BudgetSeconds)
	if len(kept) > 0 || len(dropped) == 0 {
		return nil
	}
	cheapest := math.Inf(1)
	for _, cfg := range dropped {
		_, _, need := Plan([]Config{cfg}, measured, r.Cost, math.Inf(1))
		cheapest = min(cheapest, need)
	}
	return fmt.Errorf("--budget %s: %w (%d): the cheapest needs about %s; give a longer --budget, or none",
		durationText(r.BudgetSeconds), ErrBudget, len(dropped), durationText(cheapest))
}

// durationText prints seconds as a duration, "more than 100 years" past what time.Duration
// holds.
func durationText(seconds float64) string {
	const maxSeconds = 100 * 365.25 * 24 * 3600
	switch {
	case math.IsNaN(seconds) || seconds < 0:
		return "unknown"
	case seconds > maxSeconds:
		return "more than 100 years"
	case seconds < 1:
		return time.Duration(seconds * 1e9).String()
	}
	return time.Duration(seconds * 1e9).Round(time.Second).String()
}
