package sweep

import (
	"context"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/timing"
)

// fakeStepper is the fake card that also runs whole steps: graph at 1.1x the composed time's
// guess of the step (its kernels' roofline), eager 0.2 ms slower.
type fakeStepper struct {
	*fakeMeasurer
	steps []step.Config
}

func (f *fakeStepper) MeasureStep(c step.Config, modes []step.Mode, o step.Options) step.Result {
	f.steps = append(f.steps, c)
	r := step.Result{Status: measure.StatusOK, Launches: 40}
	for _, m := range modes {
		t := step.Timed{Mode: m, Status: measure.StatusOK}
		sec := 1e-3 * float64(c.Batch)
		if m == step.Eager {
			sec += 0.2e-3
		}
		t.Stats = timing.Summarize([]float64{sec, sec, sec})
		r.Modes = append(r.Modes, t)
	}
	return r
}

func TestRunE2E(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2}, Contexts: []int{128, 256}}
	clock := newClock()
	f := &fakeStepper{fakeMeasurer: newFake(clock)}
	dir := t.TempDir()
	d, err := Create(dir, RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	info := testInfo(clock, axes)
	r := testRunner(d, &info, f.fakeMeasurer, clock)
	r.Measurer, r.Step, r.E2E = f, StepBoth, E2EOptions{Steps: 8, Seed: 5}
	res, err := r.Run(context.Background(), axes.Configs(), Prior{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 4 || res.Steps != 4 || res.StepsFailed != 0 || len(f.steps) != 4 {
		t.Fatalf("result %+v, %d steps run", res, len(f.steps))
	}
	d.Close()
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 4 {
		t.Fatalf("%d step records on disk", len(p.Steps))
	}
	composed := map[string]Record{}
	for _, rec := range p.Records {
		composed[rec.Key] = rec
	}
	for _, s := range p.Steps {
		c, ok := composed[s.Key[:len(s.Key)-len(" steps=8")]]
		if !ok || s.Steps != 8 || !s.Graph.OK() || !s.Eager.OK() || s.Composed.StepSeconds != c.StepSeconds ||
			s.RunTogetherSeconds != s.Graph.StepSeconds-c.StepSeconds || s.LaunchGapSeconds <= 0 {
			t.Errorf("step record %s beside composed %v: %+v", s.Key, ok, s)
		}
	}

	// A resume with e2e asks nothing again; one asking for e2e only of a composed-only run
	// runs the steps and composes nothing new.
	d, prior, err := Resume(dir)
	if err != nil {
		t.Fatal(err)
	}
	r = testRunner(d, &prior.Info, f.fakeMeasurer, clock)
	prior.Info.Sessions = append(prior.Info.Sessions, Session{Started: clock.now()})
	r.Measurer, r.Step, r.E2E = f, StepBoth, E2EOptions{Steps: 8}
	res, err = r.Run(context.Background(), axes.Configs(), prior)
	d.Close()
	if err != nil || res.Resumed != 4 || res.Records != 0 || res.Steps != 0 || len(f.steps) != 4 {
		t.Fatalf("resume: %+v (%v), %d steps run", res, err, len(f.steps))
	}
	d, prior, err = Resume(dir)
	if err != nil {
		t.Fatal(err)
	}
	r = testRunner(d, &prior.Info, f.fakeMeasurer, clock)
	prior.Info.Sessions = append(prior.Info.Sessions, Session{Started: clock.now()})
	r.Measurer, r.Step, r.E2E = f, StepE2E, E2EOptions{Steps: 16}
	res, err = r.Run(context.Background(), axes.Configs(), prior)
	if err != nil || res.Records != 0 || res.Steps != 4 || len(f.steps) != 8 {
		t.Fatalf("e2e with another step count: %+v (%v), %d steps run", res, err, len(f.steps))
	}
	d.Close()
	p, _ = Load(dir)
	for _, s := range p.Steps {
		if s.Steps == 16 && !s.Composed.OK() {
			t.Errorf("%s: an e2e-only sweep does not take the composed step the directory has: %+v", s.Key, s.Composed)
		}
	}
}

// TestRunE2EWithoutStepMeasurer: a measurer that runs no whole steps gets skipped records
// that say so, never a failure.
func TestRunE2EWithoutStepMeasurer(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1}, Contexts: []int{128}}
	clock := newClock()
	r, prior := newRun(t, t.TempDir(), newFake(clock), clock, axes)
	r.Step = StepE2E
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil || res.Records != 0 || res.Steps != 1 || res.StepsFailed != 0 {
		t.Fatalf("%+v (%v)", res, err)
	}
}

func TestParseStepMode(t *testing.T) {
	for _, s := range []string{"composed", "e2e", "both"} {
		if m, err := ParseStepMode(s); err != nil || string(m) != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	if _, err := ParseStepMode("all"); err == nil {
		t.Error("all: accepted")
	}
	if !StepMode("").Composed() || StepMode("").E2E() || StepE2E.Composed() || !StepBoth.E2E() {
		t.Error("the modes' meanings")
	}
}
