package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/units"
	"math"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// Progress hears what a sweep is doing; the command line draws a bar or prints lines. Every
// method is called from the sweep's goroutine. etaSeconds is the cost model's estimate of what
// is left (0 when nothing is).
type Progress interface {
	Start(total int, etaSeconds float64)
	Measuring(done, total int, what string, etaSeconds float64)
	Recorded(r Record, done, total int, etaSeconds float64)
	Note(msg string)
	Stop()
}

// Runner runs a sweep into a run directory.
type Runner struct {
	Dir       *RunDir
	Info      *RunInfo // written to Dir as the sweep goes
	Measurer  Measurer
	Telemetry telemetry.Sampler
	// Ceilings: Datasheet set by the caller (zero when unknown); Measured filled by the probes,
	// or by the caller from a resumed run.json.
	Ceilings Ceilings
	// MemoryBytes is the card's memory for the question "does this step fit": the weights
	// plus Batch KV caches of Context tokens, with ReserveFraction kept free. 0: not asked.
	MemoryBytes     float64
	ReserveFraction float64
	ProbeBytes      uint64 // bytes of the read probe's buffer
	// BudgetSeconds > 0 trims the sweep to fit (see Plan).
	BudgetSeconds float64
	Cost          *CostModel
	Progress      Progress // nil: silent
	// RetryFailed measures again the configurations and kernels a resumed directory has as
	// failed; otherwise they count as done.
	RetryFailed bool
	// Peer is the linear variant measured beside every linear kernel of ours (cgo.LinearCUBLAS
	// for `--peer cublas`), under its own key in kernels.jsonl; the steps are composed of our
	// kernels only. LinearAuto (0): no peer.
	Peer cgo.LinearVariant
	// Step says which step times to record: composed ("" too), e2e or both. E2E says how the
	// whole steps run (steps.jsonl, one step.Record per configuration).
	Step StepMode
	E2E  E2EOptions
	Now  func() time.Time // nil: time.Now
}

// Result sums up a sweep.
type Result struct {
	Records     int // written by this run
	OK          int
	Failed      int
	Skipped     int
	Resumed     int      // configurations the directory already had
	Dropped     []string // to fit the budget
	Interrupted bool
	// BudgetExhausted: once the probes had run, --budget left no configuration to measure.
	BudgetExhausted bool
	// DeviceLost is the error of a device that stopped working (a lost CUDA context): the
	// sweep stopped there.
	DeviceLost error
	// Steps: end-to-end records written by this run (steps.jsonl), StepsOK of them verified
	// and timed, StepsFailed failed.
	Steps, StepsOK, StepsFailed int
}

// ErrDeviceLost wraps Result.DeviceLost.
var ErrDeviceLost = errors.New("the device stopped working")

// Run measures the probes (unless the ceilings are known), then every configuration not
// already done in prior, in the order given (Axes.Configs: coarse to fine). It stops after
// the measurement in flight when ctx is cancelled (Result.Interrupted), and when the device is
// lost. run.json's state says which; the directory is resumable either way. The error is for
// the run directory itself (a full disk).
func (r *Runner) Run(ctx context.Context, configs []Config, prior Prior) (Result, error) {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Cost == nil {
		r.Cost = &CostModel{SetupSeconds: DefaultSetupSeconds}
	}
	r.Cost.Peer = r.Peer
	r.wholeStepCost()
	progress := r.Progress
	if progress == nil {
		progress = silent{}
	}
	s := &state{Runner: r, progress: progress, cache: map[string]Measurement{}, done: map[string]bool{},
		records: map[string]Record{}, stepsDone: map[string]bool{}}
	for _, m := range prior.Kernels {
		if m.Status == measure.StatusFailed && r.RetryFailed {
			continue
		}
		s.cache[m.Key] = m
	}
	for _, rec := range prior.Records {
		if rec.Status == measure.StatusFailed && r.RetryFailed {
			continue
		}
		s.done[rec.Key] = true
		s.records[rec.Key] = rec
	}
	for _, rec := range prior.Steps {
		if rec.Status == measure.StatusFailed && r.RetryFailed {
			continue
		}
		s.stepsDone[rec.Key] = true
	}
	res, err := s.run(ctx, configs)
	progress.Stop()
	return res, err
}

// state is one Run in progress.
type state struct {
	*Runner
	progress Progress
	cache    map[string]Measurement // by Spec key: measured, or known from the directory
	done     map[string]bool        // configuration keys with a record
	records  map[string]Record      // the composed records known, by configuration key
	// stepsDone: end-to-end record keys (step.Key) in steps.jsonl.
	stepsDone map[string]bool
	result    Result
	session   *Session
}

func (s *state) run(ctx context.Context, configs []Config) (Result, error) {
	s.session = &s.Info.Sessions[len(s.Info.Sessions)-1]
	var pending []Config
	for _, cfg := range configs {
		if s.configDone(cfg) {
			s.result.Resumed++
			continue
		}
		pending = append(pending, cfg)
	}

	if err := s.probes(ctx); err != nil || s.result.Interrupted || s.result.DeviceLost != nil {
		return s.result, s.finish(err)
	}
	s.launchBaseline()

	// Steps that cannot fit in the card's memory are recorded as skipped before anything is
	// allocated; they cost nothing and are never dropped by the budget.
	var runnable []Config
	for _, cfg := range pending {
		if ok, why := s.stepFits(cfg); !ok {
			if s.Step.Composed() && !s.done[cfg.Key()] {
				if err := s.write(SkippedRecord(cfg, why, s.Info.Backend.Emulated)); err != nil {
					return s.result, s.finish(err)
				}
			}
			if s.Step.E2E() && !s.stepsDone[s.stepKey(cfg)] {
				if err := s.e2e(cfg, nil, why, 0, 0); err != nil {
					return s.result, s.finish(err)
				}
			}
			continue
		}
		runnable = append(runnable, cfg)
	}

	limit := math.Inf(1)
	if s.BudgetSeconds > 0 {
		limit = s.BudgetSeconds - s.elapsed()
	}
	kept, dropped, estimate := Plan(runnable, s.measuredKeys(), s.Cost, limit)
	if s.BudgetSeconds > 0 {
		s.Info.Budget = &Budget{Seconds: s.BudgetSeconds, EstimatedSeconds: estimate, Planned: len(kept)}
		s.drop(dropped, "")
		if len(kept) == 0 && len(dropped) > 0 {
			s.result.BudgetExhausted = true
			return s.result, s.finish(nil)
		}
	}
	if err := s.saveInfo(StateRunning, ""); err != nil {
		return s.result, s.finish(err)
	}

	total := len(kept)
	s.progress.Start(total, estimate)
	for i := 0; i < len(kept); i++ {
		if ctx.Err() != nil {
			s.result.Interrupted = true
			break
		}
		if s.BudgetSeconds > 0 && i > 0 {
			// The cost model learns as it goes: drop more if what is left no longer fits.
			rest, more, _ := Plan(kept[i:], s.measuredKeys(), s.Cost, s.BudgetSeconds-s.elapsed())
			if len(more) > 0 {
				s.drop(more, "re-planned at "+time.Duration(s.elapsed()*1e9).Round(time.Second).String())
				kept = append(kept[:i:i], rest...)
				total = len(kept)
				if i >= len(kept) {
					break
				}
			}
		}
		cfg := kept[i]
		var composed *Record
		if s.Step.Composed() {
			if rec, ok := s.records[cfg.Key()]; ok {
				composed = &rec
			} else {
				rec, stop, err := s.config(ctx, cfg, i, total, kept[i:])
				if err != nil {
					return s.result, s.finish(err)
				}
				if stop {
					break
				}
				if err := s.write(rec); err != nil {
					return s.result, s.finish(err)
				}
				composed = &rec
				s.progress.Recorded(rec, i+1, total, s.eta(kept[i+1:]))
			}
		}
		if s.result.DeviceLost != nil {
			break
		}
		if rec, ok := s.records[cfg.Key()]; ok && composed == nil {
			composed = &rec // an e2e-only sweep of a directory that has the composed step
		}
		if s.Step.E2E() && !s.stepsDone[s.stepKey(cfg)] {
			if ctx.Err() != nil {
				s.result.Interrupted = true
				break
			}
			if err := s.e2e(cfg, composed, "", i, total); err != nil {
				return s.result, s.finish(err)
			}
			if s.result.DeviceLost != nil {
				break
			}
		}
	}
	return s.result, s.finish(nil)
}

// config measures the kernels of cfg not yet in the cache and composes its record. stop is
// true when ctx was cancelled before the step was complete (no record: its kernels measured so
// far are in kernels.jsonl and a resume will not repeat them).
func (s *state) config(ctx context.Context, cfg Config, done, total int, rest []Config) (rec Record, stop bool, err error) {
	var wall float64
	for _, k := range cfg.Model.Kernels(cfg.Batch, cfg.Context) {
		spec := SpecOf(k, cfg.Model)
		what := fmt.Sprintf("%s B=%d S=%d: %s", cfg.Model.Name, cfg.Batch, cfg.Context, k.Name)
		m, ok := s.cache[spec.Key()]
		if !ok {
			if ctx.Err() != nil {
				s.result.Interrupted = true
				return rec, true, nil
			}
			s.progress.Measuring(done, total, what, s.eta(rest))
			if m, err = s.measure(spec); err != nil {
				return rec, false, err
			}
			wall += m.WallSeconds
		}
		// The peer beside ours, under its own key: a resume measures it where it is missing.
		if peer, isLinear := PeerSpec(spec, s.Peer); isLinear && m.Status != measure.StatusSkipped && s.result.DeviceLost == nil {
			if _, have := s.cache[peer.Key()]; !have {
				if ctx.Err() != nil {
					s.result.Interrupted = true
					return rec, true, nil
				}
				s.progress.Measuring(done, total, what+" ("+s.Peer.String()+" peer)", s.eta(rest))
				pm, err := s.measure(peer)
				if err != nil {
					return rec, false, err
				}
				wall += pm.WallSeconds
			}
		}
		if !m.OK() {
			break // the step fails or is skipped; its other kernels wait for a step that needs them
		}
	}
	rec = Compose(cfg, s.cache, s.Ceilings)
	rec.MeasuredSeconds = wall
	if s.result.DeviceLost != nil && rec.Status != measure.StatusOK {
		rec.Reason += "; the device stopped working: " + s.result.DeviceLost.Error()
	}
	return rec, false, nil
}

// measure runs one kernel shape with telemetry, appends it to kernels.jsonl and caches it. A
// failure is followed by a health check of the device.
func (s *state) measure(spec measure.Spec) (Measurement, error) {
	key := spec.Key()
	started := s.Now()
	var m Measurement
	if ok, why := s.Measurer.Fits(spec); !ok {
		m.Outcome = measure.Outcome{Spec: spec, Kernel: spec.Kind, Status: measure.StatusSkipped, Reason: "does not fit: " + why}
	} else {
		window := s.Telemetry.Start()
		m.Outcome = s.Measurer.Measure(spec)
		m.Telemetry = window.Stop()
	}
	m.Key, m.Spec, m.Started = key, spec, started.UTC()
	m.WallSeconds = s.Now().Sub(started).Seconds()
	if m.Status == "" {
		m.Status, m.Reason = measure.StatusFailed, "the measurement returned no status"
	}
	if m.Status == measure.StatusOK {
		s.Cost.Observe(spec, m.WallSeconds)
	}
	if m.Status == measure.StatusFailed {
		if err := s.Measurer.Healthy(); err != nil {
			s.result.DeviceLost = fmt.Errorf("%w after %s: %v", ErrDeviceLost, spec.Label(), err)
			s.progress.Note(s.result.DeviceLost.Error())
		}
	}
	if _, err := json.Marshal(m); err != nil {
		// Whatever the kernel produced, the failure is recorded and the sweep goes on.
		m.Outcome = measure.Outcome{Spec: spec, Kernel: m.Kernel, Emulated: m.Emulated, Status: measure.StatusFailed,
			Reason: fmt.Sprintf("the measurement cannot be recorded (%v): %s", err, m.Reason)}
	}
	s.cache[key] = m
	if err := s.Dir.AppendMeasurement(m); err != nil {
		return m, err
	}
	return m, nil
}

// probes measures the ceilings first, unless run.json already has them (a resume).
func (s *state) probes(ctx context.Context) error {
	if s.Info.Measured.Known() {
		s.Ceilings.Measured = roofline.Ceiling{Name: roofline.CeilingMeasured,
			BandwidthBytesPerSec: s.Info.Measured.BandwidthBytesPerSec, FLOPsPerSec: s.Info.Measured.FLOPsPerSec}
		s.useCeilingForCost()
		return nil
	}
	var found [2]Measurement // the read probe, the mma probe
	for i, spec := range []measure.Spec{readProbe(s.ProbeBytes), mmaProbe()} {
		if m, ok := s.cache[spec.Key()]; ok {
			found[i] = m
			continue
		}
		if ctx.Err() != nil {
			s.result.Interrupted = true
			return nil
		}
		s.progress.Measuring(0, 0, spec.Label(), 0)
		m, err := s.measure(spec)
		if err != nil {
			return err
		}
		found[i] = m
		if s.result.DeviceLost != nil {
			return nil
		}
	}
	read, mma := found[0], found[1]
	info := CeilingInfo{Probes: []string{read.Key, mma.Key}}
	var notes []string
	if read.OK() {
		info.BandwidthBytesPerSec = read.AchievedBytesPerSec
	} else {
		notes = append(notes, "read probe "+read.Status+": "+read.Reason)
	}
	if mma.OK() {
		info.FLOPsPerSec = mma.AchievedFLOPsPerSec
	} else {
		notes = append(notes, "mma probe "+mma.Status+": "+mma.Reason)
	}
	info.Source = "decodebench probes on this card: read bandwidth, bf16 mma.sync rate"
	if len(notes) > 0 {
		info.Source += " (" + strings.Join(notes, "; ") + ")"
		s.progress.Note("the measured ceiling is incomplete: " + strings.Join(notes, "; "))
	}
	s.Info.Measured = info
	s.Ceilings.Measured = roofline.Ceiling{Name: roofline.CeilingMeasured, BandwidthBytesPerSec: info.BandwidthBytesPerSec, FLOPsPerSec: info.FLOPsPerSec}
	s.useCeilingForCost()
	return s.saveInfo(StateRunning, "")
}

// launchBaseline measures what one launch costs (an empty kernel's launch-to-launch time) once
// per session and records it in run.json; a measurer that cannot says so there.
func (s *state) launchBaseline() {
	l := Launch{Status: measure.StatusSkipped, Reason: "not measured: this sweep's measurer has no empty kernel to launch", Method: LaunchMethod}
	if lm, ok := s.Measurer.(LaunchMeasurer); ok {
		l = lm.MeasureLaunch()
	}
	s.progress.Note("launch baseline: " + l.Text())
	s.Info.Launch = &l
}

// useCeilingForCost predicts kernel times from the measured ceiling where it is known.
func (s *state) useCeilingForCost() {
	if bw := s.Ceilings.Measured.BandwidthBytesPerSec; bw > 0 {
		s.Cost.BytesPerSec = bw
	} else if s.Cost.BytesPerSec == 0 {
		s.Cost.BytesPerSec = s.Ceilings.Datasheet.BandwidthBytesPerSec
	}
	if f := s.Ceilings.Measured.FLOPsPerSec; f > 0 {
		s.Cost.FLOPsPerSec = f
	} else if s.Cost.FLOPsPerSec == 0 {
		s.Cost.FLOPsPerSec = s.Ceilings.Datasheet.FLOPsPerSec
	}
}

// stepFits asks whether the library has the step's kernels and whether the weights and the
// batch's KV caches fit in the card's memory.
func (s *state) stepFits(cfg Config) (bool, string) {
	if why := StepCallsWithin(cfg); why != "" {
		return false, why
	}
	// A kernel the library lacks (MissingKernel): the step is skipped, naming it, before
	// anything is allocated; predict still models it.
	if why := MissingKernels(cfg.Model.Kernels(cfg.Batch, cfg.Context), cfg.Model); why != "" {
		return false, why + " decodebench predict models this step"
	}
	if s.MemoryBytes <= 0 {
		return true, ""
	}
	fit := roofline.MaxBatchThatFits(cfg.Model, s.MemoryBytes, cfg.Context, s.ReserveFraction)
	if cfg.Batch <= fit {
		return true, ""
	}
	weights := cfg.Model.WeightBytesTotal()
	kv := float64(cfg.Batch) * cfg.Model.KVBytesPerSequence(cfg.Context)
	why := fmt.Sprintf("does not fit in memory: weights %s + KV cache %s (%d sequences x %d tokens) > %s usable (%s less %.0f%% reserve)",
		units.Bytes(weights), units.Bytes(kv), cfg.Batch, cfg.Context, units.Bytes(s.MemoryBytes*(1-s.ReserveFraction)), units.Bytes(s.MemoryBytes), s.ReserveFraction*100)
	if fit > 0 {
		why += fmt.Sprintf("; at most batch %d fits at this context", fit)
	}
	return false, why
}

func (s *state) write(rec Record) error {
	rec.Identity = IdentityOf(*s.Info, s.session.Version)
	if _, err := json.Marshal(rec); err != nil {
		rec = Record{Key: rec.Key, Model: rec.Model, ModelKey: rec.ModelKey, Batch: rec.Batch, Context: rec.Context,
			DType: rec.DType, WeightFormat: rec.WeightFormat, KVDType: rec.KVDType, TP: rec.TP, Identity: rec.Identity, Emulated: rec.Emulated, RecordedAt: rec.RecordedAt,
			Status: measure.StatusFailed, Reason: fmt.Sprintf("the record cannot be written (%v): %s", err, rec.Reason)}
	}
	if err := s.Dir.AppendRecord(rec); err != nil {
		return err
	}
	s.done[rec.Key] = true
	s.records[rec.Key] = rec
	s.result.Records++
	s.session.Measured++
	switch rec.Status {
	case measure.StatusOK:
		s.result.OK++
	case measure.StatusFailed:
		s.result.Failed++
	default:
		s.result.Skipped++
	}
	return nil
}

func (s *state) drop(cfgs []Config, when string) {
	if len(cfgs) == 0 {
		return
	}
	for _, c := range cfgs {
		s.Info.Budget.Dropped = append(s.Info.Budget.Dropped, c.Key())
		s.result.Dropped = append(s.result.Dropped, c.Key())
	}
	if when != "" {
		s.Info.Budget.Planned -= min(s.Info.Budget.Planned, len(cfgs))
		s.Info.Budget.Note = fmt.Sprintf("%d configurations dropped when %s: measurements took longer than estimated", len(cfgs), when)
	}
	s.progress.Note(fmt.Sprintf("--budget %s: %d configuration(s) dropped to fit (listed in run.json)",
		durationText(s.BudgetSeconds), len(cfgs)))
}

// wholeStepCost tells the cost model of the whole steps the sweep runs.
func (r *Runner) wholeStepCost() {
	r.Cost.WholeSteps, r.Cost.WholeStepModes = 0, 0
	if r.Step.E2E() {
		r.Cost.WholeSteps = r.E2E.Steps
		if r.Cost.WholeSteps == 0 {
			r.Cost.WholeSteps = step.DefaultSteps
		}
		r.Cost.WholeStepModes = len(r.E2E.Modes)
		if r.E2E.Modes == nil {
			r.Cost.WholeStepModes = len(step.Modes)
		}
	}
}

// configDone reports whether the run directory has every record the sweep asks of cfg.
func (s *state) configDone(cfg Config) bool {
	if s.Step.Composed() && !s.done[cfg.Key()] {
		return false
	}
	return !s.Step.E2E() || s.stepsDone[s.stepKey(cfg)]
}

// measuredKeys are the kernel shapes whose measurement is known.
func (s *state) measuredKeys() map[string]bool {
	keys := make(map[string]bool, len(s.cache))
	for k := range s.cache {
		keys[k] = true
	}
	return keys
}

// eta estimates the seconds left for rest.
func (s *state) eta(rest []Config) float64 {
	_, _, estimate := Plan(rest, s.measuredKeys(), s.Cost, math.Inf(1))
	return estimate
}

func (s *state) elapsed() float64 {
	return s.Now().Sub(s.session.Started).Seconds()
}

// finish records the state in run.json; err (a run directory error) is returned after.
func (s *state) finish(err error) error {
	st, detail := StateComplete, ""
	switch {
	case err != nil:
		st, detail = StateFailed, err.Error()
	case s.result.DeviceLost != nil:
		st, detail = StateDeviceLost, s.result.DeviceLost.Error()
	case s.result.Interrupted:
		st, detail = StateInterrupted, "stopped by a signal after the measurement in flight"
	}
	s.session.Ended, s.session.State = s.Now().UTC(), st
	if werr := s.saveInfo(st, detail); err == nil {
		err = werr
	}
	return err
}

func (s *state) saveInfo(st, detail string) error {
	s.Info.State, s.Info.StateDetail, s.Info.Updated = st, detail, s.Now().UTC()
	return s.Dir.WriteInfo(*s.Info)
}

type silent struct{}

func (silent) Start(int, float64)                  {}
func (silent) Measuring(int, int, string, float64) {}
func (silent) Recorded(Record, int, int, float64)  {}
func (silent) Note(string)                         {}
func (silent) Stop()                               {}
