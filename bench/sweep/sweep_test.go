package sweep

import (
	"context"
	"errors"
	"github.com/decodebench/decodebench/bench/measure"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/telemetry"
)

func TestAxesValidate(t *testing.T) {
	fp32 := tinyModel()
	fp32.WeightDType = model.FP32
	odd := tinyModel()
	odd.Hidden = 100 // K of qkv_proj is not a multiple of 8
	head := tinyModel()
	head.HeadDim = 48
	tests := []struct {
		desc string
		axes Axes
		want string // "" = valid
	}{
		{"valid", Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 256}, Contexts: []int{1, 1 << 20}}, ""},
		{"batch too large", Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2048}, Contexts: []int{64}}, "batch 2048"},
		{"no batches", Axes{Models: []model.Shape{tinyModel()}, Contexts: []int{64}}, "no batch"},
		{"fp32 weights", Axes{Models: []model.Shape{fp32}, Batches: []int{1}, Contexts: []int{64}}, "weight dtype fp32"},
		{"K not a multiple of 8", Axes{Models: []model.Shape{odd}, Batches: []int{1}, Contexts: []int{64}}, "K = 100"},
		{"head dim", Axes{Models: []model.Shape{head}, Batches: []int{1}, Contexts: []int{64}}, "head dim 48"},
		{"duplicate model", Axes{Models: []model.Shape{tinyModel(), tinyModel()}, Batches: []int{1}, Contexts: []int{64}}, "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.axes.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestConfigsCoarseToFine(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2, 4, 8, 16}, Contexts: []int{128, 256, 512}}
	cfgs := axes.Configs()
	if len(cfgs) != 15 {
		t.Fatalf("%d configs, want 15", len(cfgs))
	}
	seen := map[string]bool{}
	for _, c := range cfgs {
		if seen[c.Key()] {
			t.Fatalf("%s twice", c.Key())
		}
		seen[c.Key()] = true
	}
	// The four corners come first, so a sweep cut short still spans both axes.
	var corners []string
	for _, c := range cfgs[:4] {
		corners = append(corners, c.Key())
	}
	for _, want := range []Config{{tinyModel(), 1, 128}, {tinyModel(), 16, 128}, {tinyModel(), 1, 512}, {tinyModel(), 16, 512}} {
		if !slices.Contains(corners, want.Key()) {
			t.Errorf("corner %s not among the first four: %v", want.Key(), corners)
		}
	}
	if got := bisectionLevels(5); !slices.Equal(got, []int{0, 2, 1, 2, 0}) {
		t.Errorf("bisectionLevels(5) = %v", got)
	}
}

func TestComposeStep(t *testing.T) {
	s := tinyModel()
	cfg := Config{Model: s, Batch: 4, Context: 256}
	f := newFake(nil)
	measured := map[string]Measurement{}
	for _, k := range s.Kernels(cfg.Batch, cfg.Context) {
		spec := SpecOf(k, s)
		measured[spec.Key()] = Measurement{Key: spec.Key(), Outcome: f.Measure(spec)}
	}
	ceil := Ceilings{Datasheet: datasheetH200(), Measured: roofline.Ceiling{Name: "measured", BandwidthBytesPerSec: 4e12, FLOPsPerSec: 700e12}}
	r := Compose(cfg, measured, ceil)
	if r.Status != measure.StatusOK {
		t.Fatalf("status %s: %s", r.Status, r.Reason)
	}
	var kernels float64
	for _, k := range r.Kernels {
		kernels += k.Repeat * k.MedianSeconds
	}
	var ops float64
	for _, op := range r.SmallOps {
		ops += op.Bytes * op.Repeat / 4e12
	}
	if !near(r.KernelSeconds, kernels) || !near(r.SmallOpsSeconds, ops) || !near(r.StepSeconds, kernels+ops) {
		t.Errorf("step %g = kernels %g + small ops %g; want %g + %g", r.StepSeconds, r.KernelSeconds, r.SmallOpsSeconds, kernels, ops)
	}
	if r.PerServerTokensPerSec != float64(cfg.Batch)*r.PerRequestTokensPerSec || r.PerRequestTokensPerSec != 1/r.StepSeconds {
		t.Errorf("per-server %g, per-request %g, step %g", r.PerServerTokensPerSec, r.PerRequestTokensPerSec, r.StepSeconds)
	}
	bound := roofline.StepBound(s, ceil.Measured, cfg.Batch, cfg.Context)
	if !near(r.RooflineFraction, bound.StepSeconds/r.StepSeconds) || r.RooflineFraction != r.RooflineFractionMeasured {
		t.Errorf("roofline fraction %g, want %g", r.RooflineFraction, bound.StepSeconds/r.StepSeconds)
	}
	if !(r.RooflineFractionDatasheet > 0 && r.RooflineFractionDatasheet < r.RooflineFractionMeasured) {
		t.Errorf("datasheet fraction %g should be positive and below the measured %g (the datasheet roof is higher)",
			r.RooflineFractionDatasheet, r.RooflineFractionMeasured)
	}
	if !strings.Contains(r.SmallOpsMethod, "bounded, not measured") || r.SmallOpsGBps != 4000 {
		t.Errorf("small ops method %q at %g GB/s", r.SmallOpsMethod, r.SmallOpsGBps)
	}

	// A failed kernel fails the step and keeps its reason; nothing is a speed.
	attn := SpecOf(s.Kernels(cfg.Batch, cfg.Context)[1], s).Key()
	bad := measured[attn]
	bad.Status, bad.Reason = measure.StatusFailed, "verification failed: NaN at 3"
	measured[attn] = bad
	r = Compose(cfg, measured, ceil)
	if r.Status != measure.StatusFailed || !strings.Contains(r.Reason, "attention") || !strings.Contains(r.Reason, "NaN at 3") {
		t.Errorf("failed record: %s %q", r.Status, r.Reason)
	}
	if r.StepSeconds != 0 || r.PerServerTokensPerSec != 0 || r.RooflineFraction != 0 {
		t.Errorf("a failed record carries numbers: %+v", r)
	}
}

func TestSmallOps(t *testing.T) {
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	ops := SmallOps(s, 8)
	byName := map[string]SmallOp{}
	for _, op := range ops {
		byName[op.Name] = op
	}
	if byName["rmsnorm"].Repeat != 65 || byName["residual_add"].Repeat != 64 || byName["kv_append"].Repeat != 32 {
		t.Errorf("repeats: %+v", ops)
	}
	// Sampling reads the batch's logits: 8 x 128256 bf16 values plus the token ids.
	if got := byName["sampling"].Bytes; got != 8*128256*2+8*4 {
		t.Errorf("sampling bytes %g", got)
	}
	seconds, bytes := boundSmallOps(ops, 4e12)
	if !near(seconds, bytes/4e12) {
		t.Errorf("bounded %g s for %g bytes", seconds, bytes)
	}
	// They are small beside the weights (16 GB): well under 1%.
	if bytes > 0.01*s.WeightBytesPerStep(8) {
		t.Errorf("small ops move %g bytes, more than 1%% of the weights", bytes)
	}
}

func TestRunDedupProbesAndRecords(t *testing.T) {
	clock := newClock()
	f := newFake(clock)
	dir := t.TempDir()
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2, 4}, Contexts: []int{128, 256}}
	r, prior := newRun(t, dir, f, clock, axes)
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 6 || res.Records != 6 || res.Interrupted {
		t.Fatalf("result %+v", res)
	}
	// Probes first, each kernel shape once: the 5 linears of a batch serve every context.
	if !strings.HasPrefix(f.order[0], "probe read") || !strings.HasPrefix(f.order[1], "probe mma") {
		t.Errorf("probes not first: %v", f.order[:2])
	}
	for key, n := range f.calls {
		if n != 1 {
			t.Errorf("%s measured %d times", key, n)
		}
	}
	// The tiny model's LM head (512 x 128) has the shape of its gate/up projection: one
	// measurement serves both, so a batch has 4 distinct linears.
	if got := f.count("linear"); got != 4*3 {
		t.Errorf("%d linear measurements, want 12 (4 distinct shapes x 3 batches)", got)
	}
	if got := f.count("attention"); got != 6 {
		t.Errorf("%d attention measurements, want 6", got)
	}
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Info.State != StateComplete || p.Info.Measured.BandwidthBytesPerSec != 2e12 || p.Info.Measured.FLOPsPerSec != 500e12 {
		t.Errorf("run.json state %q, measured ceiling %+v", p.Info.State, p.Info.Measured)
	}
	if len(p.Records) != 6 || len(p.Kernels) != 2+12+6 {
		t.Errorf("%d records, %d kernel measurements", len(p.Records), len(p.Kernels))
	}
	for _, rec := range p.Records {
		if rec.PerServerTokensPerSec != float64(rec.Batch)*rec.PerRequestTokensPerSec {
			t.Errorf("%s: per-server %g != batch x per-request %g", rec.Key, rec.PerServerTokensPerSec, rec.PerRequestTokensPerSec)
		}
		if rec.RooflineFractionMeasured <= 0 || rec.RooflineFractionMeasured > 1 || rec.Throttled {
			t.Errorf("%s: fraction %g throttled %v", rec.Key, rec.RooflineFractionMeasured, rec.Throttled)
		}
	}
}

func TestRunFailureSkipAndDeviceLost(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2}, Contexts: []int{128, 256}}

	t.Run("injected failure and a kernel that does not fit", func(t *testing.T) {
		clock := newClock()
		f := newFake(clock)
		f.fail = "attention bf16 b=2 q=2 kv=1 d=64 ctx=256"
		f.noFit = "attention bf16 b=1 q=2 kv=1 d=64 ctx=256"
		r, prior := newRun(t, t.TempDir(), f, clock, axes)
		res, err := r.Run(context.Background(), axes.Configs(), prior)
		if err != nil {
			t.Fatal(err)
		}
		if res.OK != 2 || res.Failed != 1 || res.Skipped != 1 || res.DeviceLost != nil {
			t.Fatalf("result %+v", res)
		}
		p, _ := Load(r.Dir.Path)
		for _, rec := range p.Records {
			switch rec.Key {
			case Config{tinyModel(), 2, 256}.Key():
				if rec.Status != measure.StatusFailed || !strings.Contains(rec.Reason, "verification failed") {
					t.Errorf("failed record %s %q", rec.Status, rec.Reason)
				}
			case Config{tinyModel(), 1, 256}.Key():
				if rec.Status != measure.StatusSkipped || !strings.Contains(rec.Reason, "does not fit") {
					t.Errorf("skipped record %s %q", rec.Status, rec.Reason)
				}
			}
		}
	})

	t.Run("step that does not fit in memory is skipped before any measurement", func(t *testing.T) {
		clock := newClock()
		f := newFake(clock)
		r, prior := newRun(t, t.TempDir(), f, clock, axes)
		s := tinyModel()
		// Room for the weights and a bit over one sequence of 256 tokens.
		r.MemoryBytes = s.WeightBytesTotal() + 1.5*s.KVBytesPerSequence(256)
		res, err := r.Run(context.Background(), axes.Configs(), prior)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped != 1 || res.OK != 3 {
			t.Fatalf("result %+v", res)
		}
		if f.count("ctx=256") != 1 {
			t.Errorf("attention at 256 measured %d times, want only batch 1", f.count("ctx=256"))
		}
		p, _ := Load(r.Dir.Path)
		for _, rec := range p.Records {
			if rec.Status == measure.StatusSkipped && (!strings.Contains(rec.Reason, "does not fit in memory") || !strings.Contains(rec.Reason, "at most batch 1")) {
				t.Errorf("reason %q", rec.Reason)
			}
		}
	})

	t.Run("lost device stops the sweep", func(t *testing.T) {
		clock := newClock()
		f := newFake(clock)
		f.fail, f.lose = "attention bf16 b=1 q=2 kv=1 d=64 ctx=128", true
		r, prior := newRun(t, t.TempDir(), f, clock, axes)
		res, err := r.Run(context.Background(), axes.Configs(), prior)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res.DeviceLost, ErrDeviceLost) || res.Records != 1 || res.Failed != 1 {
			t.Fatalf("result %+v", res)
		}
		p, _ := Load(r.Dir.Path)
		if p.Info.State != StateDeviceLost || !strings.Contains(p.Info.StateDetail, "illegal memory access") {
			t.Errorf("run.json state %q: %q", p.Info.State, p.Info.StateDetail)
		}
	})
}

func TestRunInterruptAndResume(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2, 4}, Contexts: []int{128, 256, 512}}
	clock := newClock()
	f := newFake(clock)
	dir := t.TempDir()
	r, prior := newRun(t, dir, f, clock, axes)
	ctx, cancel := context.WithCancel(context.Background())
	measured := 0
	f.onMeasure = func(string) {
		if measured++; measured == 12 { // mid-way through a step
			cancel()
		}
	}
	res, err := r.Run(ctx, axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Records == 0 || res.Records >= 9 {
		t.Fatalf("result %+v", res)
	}
	r.Dir.Close()
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Info.State != StateInterrupted || len(p.Kernels) != 12 {
		t.Fatalf("state %q, %d kernels on disk, want 12", p.Info.State, len(p.Kernels))
	}

	// A crash mid-write leaves a torn last line; the resume cuts it and carries on.
	results := filepath.Join(dir, ResultsFile)
	fh, _ := os.OpenFile(results, os.O_WRONLY|os.O_APPEND, 0)
	fh.WriteString(`{"key":"model=tiny batch=`)
	fh.Close()

	d, prior, err := Resume(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !slices.Contains(prior.Repaired, ResultsFile) || len(prior.Records) != res.Records {
		t.Fatalf("repaired %v, %d records", prior.Repaired, len(prior.Records))
	}
	f.onMeasure = nil
	info := prior.Info
	info.Sessions = append(info.Sessions, Session{Started: clock.now()})
	r2 := testRunner(d, &info, f, clock)
	res2, err := r2.Run(context.Background(), axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Resumed != res.Records || res.Records+res2.Records != 9 || res2.Interrupted {
		t.Fatalf("resume result %+v after %+v", res2, res)
	}
	for key, n := range f.calls {
		if n != 1 {
			t.Errorf("%s measured %d times over the run and its resume", key, n)
		}
	}
	p, _ = Load(dir)
	if len(p.Records) != 9 || p.Info.State != StateComplete || len(p.Info.Sessions) != 2 || p.BadLines != 0 {
		t.Errorf("%d records, state %s, %d sessions, %d bad lines", len(p.Records), p.Info.State, len(p.Info.Sessions), p.BadLines)
	}
}

func TestRunBudget(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2, 4, 8, 16}, Contexts: []int{128, 256, 512, 1024}}
	clock := newClock()
	f := newFake(clock)
	f.wallSeconds = 1 // each measurement: one second of the budget
	r, prior := newRun(t, t.TempDir(), f, clock, axes)
	r.BudgetSeconds = 30
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) == 0 || res.OK == 0 {
		t.Fatalf("result %+v", res)
	}
	if used := clock.now().Sub(newClock().now()).Seconds(); used > 30 {
		t.Errorf("took %g s of a 30 s budget", used)
	}
	p, _ := Load(r.Dir.Path)
	if p.Info.Budget == nil || len(p.Info.Budget.Dropped) != len(res.Dropped) {
		t.Fatalf("budget in run.json: %+v", p.Info.Budget)
	}
	// The corners were kept: the plots still span both axes.
	kept := map[string]bool{}
	for _, rec := range p.Records {
		kept[rec.Key] = true
	}
	for _, c := range []Config{{tinyModel(), 1, 128}, {tinyModel(), 16, 1024}} {
		if !kept[c.Key()] {
			t.Errorf("corner %s dropped", c.Key())
		}
	}
}

func TestRunThrottleFlag(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1}, Contexts: []int{128, 256}}
	clock := newClock()
	f := newFake(clock)
	var mu sync.Mutex
	throttled := false
	f.onMeasure = func(key string) {
		mu.Lock()
		throttled = strings.Contains(key, "ctx=256")
		mu.Unlock()
	}
	r, prior := newRun(t, t.TempDir(), f, clock, axes)
	r.Telemetry = telemetry.Sampler{Source: throttleDuring(&throttled, &mu)}
	if _, err := r.Run(context.Background(), axes.Configs(), prior); err != nil {
		t.Fatal(err)
	}
	p, _ := Load(r.Dir.Path)
	for _, rec := range p.Records {
		want := rec.Context == 256
		if rec.Throttled != want {
			t.Errorf("%s: throttled %v, want %v", rec.Key, rec.Throttled, want)
		}
		if want && (!slices.Contains(rec.ThrottleReasons, "SW Power Cap") || rec.Telemetry.SMClockMHzMin != 1500) {
			t.Errorf("%s: reasons %v, telemetry %+v", rec.Key, rec.ThrottleReasons, rec.Telemetry)
		}
		if rec.Telemetry.Readings == 0 {
			t.Errorf("%s: no telemetry readings", rec.Key)
		}
	}
}

func TestCheckResume(t *testing.T) {
	clock := newClock()
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1}, Contexts: []int{128}}
	old := testInfo(clock, axes)
	other := tinyModel()
	other.Layers = 4
	tests := []struct {
		desc   string
		change func(*RunInfo)
		want   string
	}{
		{"same card, more batches", func(i *RunInfo) { i.Axes.Batches = []int{1, 2, 4} }, ""},
		{"other card", func(i *RunInfo) { i.Card.UUID = "GPU-other" }, "measured on NVIDIA H200 (GPU-h200)"},
		{"other backend", func(i *RunInfo) { i.Backend.Name = "emu" }, "cuda backend"},
		{"other model", func(i *RunInfo) { i.Axes.Models = []model.Shape{other} }, "model axis"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			cur := testInfo(clock, axes)
			tc.change(&cur)
			err := CheckResume("runs/a", old, cur)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestResumeRetryFailed(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2}, Contexts: []int{128}}
	clock := newClock()
	f := newFake(clock)
	f.fail = "attention bf16 b=2"
	dir := t.TempDir()
	r, prior := newRun(t, dir, f, clock, axes)
	if res, err := r.Run(context.Background(), axes.Configs(), prior); err != nil || res.Failed != 1 {
		t.Fatalf("first run: %+v %v", res, err)
	}
	r.Dir.Close()
	for _, retry := range []bool{false, true} {
		d, prior, err := Resume(dir)
		if err != nil {
			t.Fatal(err)
		}
		f.fail = "" // the fault is gone
		info := prior.Info
		info.Sessions = append(info.Sessions, Session{Started: clock.now()})
		r := testRunner(d, &info, f, clock)
		r.RetryFailed = retry
		res, err := r.Run(context.Background(), axes.Configs(), prior)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if retry {
			want = 1
		}
		if res.Records != want || res.OK != want {
			t.Errorf("retry %v: %+v, want %d new ok record(s)", retry, res, want)
		}
	}
	p, _ := Load(dir)
	for _, rec := range p.Records {
		if rec.Status != measure.StatusOK {
			t.Errorf("%s: %s after the retry (the newest record of a configuration holds)", rec.Key, rec.Status)
		}
	}
}

// A budget that nothing fits: CheckBudget says so before any measurement, naming what the
// cheapest configuration needs; one that the probes use up leaves Run with BudgetExhausted
// and no record.
func TestBudgetThatKeepsNothing(t *testing.T) {
	axes := Axes{Models: []model.Shape{tinyModel()}, Batches: []int{1, 2}, Contexts: []int{128}}
	clock := newClock()
	f := newFake(clock)
	r, prior := newRun(t, t.TempDir(), f, clock, axes)
	r.BudgetSeconds = 1e-9
	if err := r.CheckBudget(axes.Configs(), prior); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "the cheapest needs about") {
		t.Fatalf("CheckBudget: %v", err)
	}
	if len(f.order) != 0 {
		t.Errorf("CheckBudget measured %v", f.order)
	}
	r.BudgetSeconds = 10
	if err := r.CheckBudget(axes.Configs(), prior); err != nil {
		t.Fatalf("a budget that fits: %v", err)
	}
	f.wallSeconds = 20 // the probes alone outlast the budget
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil || !res.BudgetExhausted || res.Records != 0 || len(res.Dropped) != 2 {
		t.Fatalf("result %+v, %v", res, err)
	}
}
