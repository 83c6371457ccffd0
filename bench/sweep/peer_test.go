package sweep

import (
	"context"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// peerFake is the fake card with a peer variant 1.5x slower than ours and an empty kernel of
// 4 µs a launch.
type peerFake struct{ *fakeMeasurer }

func (p peerFake) Measure(s measure.Spec) measure.Outcome {
	o := p.fakeMeasurer.Measure(s)
	if s.Linear != nil && s.Linear.Variant == cgo.LinearCUBLAS && o.Status == measure.StatusOK {
		for i := range o.Stats.Samples {
			o.Stats.Samples[i] *= 1.5
		}
		o.Stats.Median, o.Stats.Min, o.Stats.Max, o.Stats.Q1, o.Stats.Q3 = 1.5*o.Stats.Median, 1.5*o.Stats.Min, 1.5*o.Stats.Max, 1.5*o.Stats.Q1, 1.5*o.Stats.Q3
	}
	return o
}

func (p peerFake) MeasureLaunch() Launch {
	return Launch{Status: measure.StatusOK, SecondsPerLaunch: 4e-6, LaunchesPerSample: LaunchesPerSample, Samples: LaunchSamples, Method: LaunchMethod}
}

// The peer is measured right after each linear shape of ours, once, under its own key; the
// steps are composed of ours alone (the same step times as a run without the peer); an
// interrupted run's resume measures neither ours nor the peer's again; the launch baseline is
// in run.json.
func TestRunPeer(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 4}, Contexts: []int{128, 256}}

	clock := newClock()
	plain := newFake(clock)
	r, prior := newRun(t, t.TempDir(), plain, clock, axes)
	if _, err := r.Run(context.Background(), axes.Configs(), prior); err != nil {
		t.Fatal(err)
	}
	if plain.count("cublas") != 0 || r.Info.Launch == nil || r.Info.Launch.Status != measure.StatusSkipped {
		t.Fatalf("without --peer: %d peer measurements, launch %+v (want skipped: the fake has no empty kernel)", plain.count("cublas"), r.Info.Launch)
	}
	want := map[string]float64{}
	p, _ := Load(r.Dir.Path)
	for _, rec := range p.Records {
		want[rec.Key] = rec.StepSeconds
	}

	clock = newClock()
	f := newFake(clock)
	dir := t.TempDir()
	r, prior = newRun(t, dir, f, clock, axes)
	r.Measurer, r.Peer = peerFake{f}, cgo.LinearCUBLAS
	ctx, cancel := context.WithCancel(context.Background())
	measured := 0
	f.onMeasure = func(string) {
		if measured++; measured == 9 {
			cancel()
		}
	}
	if res, err := r.Run(ctx, axes.Configs(), prior); err != nil || !res.Interrupted {
		t.Fatalf("%+v %v", res, err)
	}
	r.Dir.Close()
	d, prior, err := Resume(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f.onMeasure = nil
	info := prior.Info
	info.Sessions = append(info.Sessions, Session{Started: clock.now()})
	r2 := testRunner(d, &info, f, clock)
	r2.Measurer, r2.Peer = peerFake{f}, cgo.LinearCUBLAS
	if _, err := r2.Run(context.Background(), axes.Configs(), prior); err != nil {
		t.Fatal(err)
	}
	for key, n := range f.calls {
		if n != 1 {
			t.Errorf("%s measured %d times over the run and its resume", key, n)
		}
	}
	if ours, peers := f.count("linear")-f.count("cublas"), f.count("cublas"); ours != 8 || peers != ours {
		t.Errorf("%d linear shapes of ours, %d of the peer: want 8 and one beside each", ours, peers)
	}
	for i, key := range f.order {
		if strings.Contains(key, "variant=cublas") && (i == 0 || f.order[i-1]+" variant=cublas" != key) {
			t.Errorf("the peer %s does not follow its own shape (after %q)", key, f.order[i-1])
		}
	}
	p, _ = Load(dir)
	if len(p.Records) != len(want) {
		t.Fatalf("%d records, want %d", len(p.Records), len(want))
	}
	for _, rec := range p.Records {
		if rec.StepSeconds != want[rec.Key] {
			t.Errorf("%s: step %g s with the peer, %g s without: the step must be ours alone", rec.Key, rec.StepSeconds, want[rec.Key])
		}
		for _, k := range rec.Kernels {
			if strings.Contains(k.Key, "cublas") {
				t.Errorf("%s is composed of the peer's %s", rec.Key, k.Key)
			}
		}
	}
	if p.Info.Launch == nil || p.Info.Launch.Status != measure.StatusOK || p.Info.Launch.SecondsPerLaunch != 4e-6 {
		t.Errorf("run.json launch %+v", p.Info.Launch)
	}
	// The budget counts the peer's measurements: the plan of one step with the peer costs more.
	cost := &CostModel{Timing: r2.Cost.Timing, SetupSeconds: DefaultSetupSeconds}
	_, _, alone := Plan(axes.Configs()[:1], nil, cost, 1e9)
	cost.Peer = cgo.LinearCUBLAS
	if _, _, with := Plan(axes.Configs()[:1], nil, cost, 1e9); !(with > alone) {
		t.Errorf("a step's estimate with the peer %g s, without %g s: the peer is not counted", with, alone)
	}
}
