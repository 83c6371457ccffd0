package sweep

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/timing"
)

// StepMode says which step times a sweep records: the composed one (results.jsonl, from the
// kernels measured alone), the end-to-end one (steps.jsonl: the real step run eager and as a
// graph, bench/step), or both.
type StepMode string

const (
	StepComposed StepMode = "composed"
	StepE2E      StepMode = "e2e"
	StepBoth     StepMode = "both"
)

// ParseStepMode reads composed, e2e or both.
func ParseStepMode(s string) (StepMode, error) {
	switch m := StepMode(s); m {
	case StepComposed, StepE2E, StepBoth:
		return m, nil
	}
	return "", fmt.Errorf("step %q: want composed (kernels measured alone, summed), e2e (the real step, eager and as a graph) or both", s)
}

// Composed reports whether the sweep composes steps from kernels ("" is composed).
func (m StepMode) Composed() bool { return m != StepE2E }

// E2E reports whether the sweep runs whole steps.
func (m StepMode) E2E() bool { return m == StepE2E || m == StepBoth }

// E2EOptions are how a sweep runs whole steps.
type E2EOptions struct {
	Steps int         // steps in one sample (0: step.DefaultSteps)
	Modes []step.Mode // nil: graph and eager
	Seed  uint64      // base seed of the synthetic weights
	// CompareModes runs every step untimed in each mode first and compares graph and eager
	// bit for bit (the record's modes_agree); it keeps batch x vocab x steps logits a mode.
	CompareModes bool
}

// StepMeasurer is a Measurer that also runs whole decode steps.
// Its own sampling rule applies where o.Timing is zero.
type StepMeasurer interface {
	MeasureStep(c step.Config, modes []step.Mode, o step.Options) step.Result
}

// StepProgress hears each end-to-end record as it is written (a Progress may implement it).
type StepProgress interface {
	RecordedStep(r step.Record)
}

// MeasureStep runs c through bench/step on the device, timed by the measurer's rule.
func (d DeviceMeasurer) MeasureStep(c step.Config, modes []step.Mode, o step.Options) step.Result {
	if o.Timing == (timing.Config{}) {
		o.Timing = d.Options.Timing
	}
	var dev step.TimedDevice = d.Device
	if d.StepDevice != nil {
		dev = d.StepDevice(d.Device)
	}
	return step.Measure(dev, d.Device.Library().Emulated(), c, modes, o)
}

// stepConfig is the end-to-end configuration of cfg.
func (s *state) stepConfig(cfg Config) step.Config {
	steps := s.E2E.Steps
	if steps == 0 {
		steps = step.DefaultSteps
	}
	return step.Config{Model: cfg.Model, Batch: cfg.Batch, Context: cfg.Context, Steps: steps, Seed: s.E2E.Seed}
}

// stepKey is what steps.jsonl knows cfg by.
func (s *state) stepKey(cfg Config) string { return step.Key(cfg.Key(), s.stepConfig(cfg).Steps) }

// e2e runs cfg's whole step and writes its record beside composed (the configuration's
// composed record, or nil when the sweep composes none).
func (s *state) e2e(cfg Config, composed *Record, skipReason string, done, total int) error {
	c := s.stepConfig(cfg)
	modes := s.E2E.Modes
	if modes == nil {
		modes = step.Modes
	}
	var r step.Result
	sm, can := s.Measurer.(StepMeasurer)
	switch {
	case skipReason != "":
		r = step.Result{Status: measure.StatusSkipped, Reason: skipReason, Emulated: s.Info.Backend.Emulated}
	case !can:
		r = step.Result{Status: measure.StatusSkipped, Reason: "this sweep's measurer runs no whole steps", Emulated: s.Info.Backend.Emulated}
	default:
		s.progress.Measuring(done, total, fmt.Sprintf("%s B=%d S=%d: the whole step (%d steps a sample)", cfg.Model.Name, cfg.Batch, cfg.Context, c.Steps), 0)
		started := s.Now()
		r = sm.MeasureStep(c, modes, step.Options{Telemetry: s.Telemetry, Trace: s.E2E.CompareModes})
		if r.Status == measure.StatusOK {
			s.Cost.ObserveWholeStep(cfg, s.Now().Sub(started).Seconds())
		}
		if r.Status == measure.StatusFailed {
			if err := s.Measurer.Healthy(); err != nil {
				s.result.DeviceLost = fmt.Errorf("%w after the whole step of %s: %v", ErrDeviceLost, cfg.Key(), err)
				s.progress.Note(s.result.DeviceLost.Error())
			}
		}
	}
	ct := step.StepTime{Status: measure.StatusNotMeasured, Reason: "not composed: --step e2e, and the run directory has no composed record of it"}
	if composed != nil {
		ct = step.ComposedTime(composed.Status, composed.Reason, composed.StepSeconds)
	}
	rec := step.NewRecord(c, cfg.Key(), ModelKey(cfg.Model), r, ct, step.Ceilings{Datasheet: s.Ceilings.Datasheet, Measured: s.Ceilings.Measured})
	if err := s.Dir.AppendStep(rec); err != nil {
		return err
	}
	s.stepsDone[rec.Key] = true
	s.result.Steps++
	switch rec.Status {
	case measure.StatusOK:
		s.result.StepsOK++
	case measure.StatusFailed:
		s.result.StepsFailed++
	}
	if p, ok := s.progress.(StepProgress); ok {
		p.RecordedStep(rec)
	}
	return nil
}
