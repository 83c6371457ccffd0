package validate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/timing"
)

// slowStep sleeps as the step runs, so that the telemetry sampler reads during it.
func slowStep(d time.Duration, also func(Step)) func(Step) {
	return func(s Step) {
		if also != nil {
			also(s)
		}
		time.Sleep(d)
	}
}

// targets builds one target per simulated GPU, with its runner.
func targets(t *testing.T, gpus []*fakenvml.GPU, runners []Runner) ([]Target, gpuinfo.HealthFeatures) {
	t.Helper()
	lib := fakenvml.Library(gpus...)
	sys, err := gpuinfo.Query(lib)
	if err != nil {
		t.Fatal(err)
	}
	var out []Target
	for i, d := range sys.Devices {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		tg := RunnerTarget(d, dev, runners[i])
		tg.BackendDevice = i
		out = append(out, tg)
	}
	return out, gpuinfo.DetectHealthFeatures(lib)
}

func TestRunABoxWithFaults(t *testing.T) {
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1), fakenvml.H100(2), fakenvml.H100(3), fakenvml.H100(4)}
	// Card 2 is busy for a moment (the last job's teardown), card 3 for good.
	gpus[2].Set(func(s *fakenvml.State) { s.Processes = []nvml.ProcessInfo{{Pid: 111}} })
	gpus[3].Set(func(s *fakenvml.State) { s.Processes = []nvml.ProcessInfo{{Pid: 222, UsedGpuMemory: 40 << 30}} })
	go func() {
		time.Sleep(30 * time.Millisecond)
		gpus[2].Set(func(s *fakenvml.State) { s.Processes = nil })
	}()

	slow := goodH100()
	slow.readBW = 0.80 * 3.35e12 // card 1: slow memory
	hot := goodH100()            // card 4: throttles for heat while the tensor probe runs
	hot.onRun = slowStep(20*time.Millisecond, func(s Step) {
		reasons := uint64(0)
		if s.Name == StepTensor {
			reasons = nvml.ClocksThrottleReasonHwThermalSlowdown
		}
		gpus[4].Set(func(st *fakenvml.State) { st.ClocksEventReasons = reasons })
	})
	runners := []Runner{goodH100(), slow, goodH100(), goodH100(), hot}
	tg, features := targets(t, gpus, runners)

	var progressMu sync.Mutex
	progress := map[string]int{}
	cfg := Config{
		Suite: standard(t), Thresholds: BuiltinThresholds(), Features: features,
		IdleWait: 300 * time.Millisecond, PollInterval: 5 * time.Millisecond, SampleInterval: 2 * time.Millisecond,
		ExpectCount: 8,
		Progress: func(c Card, o Outcome) {
			progressMu.Lock()
			progress[c.UUID]++
			progressMu.Unlock()
		},
	}
	cards, boxChecks, err := Run(context.Background(), cfg, tg, len(gpus))
	if err != nil {
		t.Fatal(err)
	}
	r := Report{Schema: ReportSchema, Cards: cards, Checks: boxChecks}
	r.Finish()

	expect(t, find(t, boxChecks, "box.gpu_count"), Fail, "NVML sees 5 GPU(s), 8 expected", "Xid 79")
	if r.Verdict != Fail || r.ExitCode() != 1 {
		t.Errorf("box verdict %s exit %d, want FAIL 1", r.Verdict, r.ExitCode())
	}
	want := []Verdict{Pass, Fail, Pass, Fail, Fail}
	for i, c := range cards {
		if c.Verdict != want[i] {
			for _, ch := range c.Checks {
				if ch.Verdict != Pass {
					t.Logf("card %d %s %s: %s", i, ch.ID, ch.Verdict, ch.Message)
				}
			}
			t.Errorf("card %d verdict %s, want %s", i, c.Verdict, want[i])
		}
		if c.UUID != gpus[i].UUID || c.Serial != gpus[i].Serial || c.PCIBusID != gpus[i].BusID || c.SpecKey != "h100-sxm" {
			t.Errorf("card %d identity %s %s %s %s", i, c.UUID, c.Serial, c.PCIBusID, c.SpecKey)
		}
		if progress[c.UUID] != len(c.Outcomes) || len(c.Outcomes) == 0 {
			t.Errorf("card %d: %d progress calls for %d outcomes", i, progress[c.UUID], len(c.Outcomes))
		}
	}
	expect(t, find(t, cards[1].Checks, "performance.read_bandwidth"), Fail, "80.0%")
	// Four measured peers (card 3 never ran): card 1 is far below their median.
	expect(t, find(t, cards[1].Checks, "outlier.read_bandwidth"), Warn, "of the 4 h100-sxm cards in this box")
	expect(t, find(t, cards[2].Checks, "health.idle"), Pass, "went idle after")
	expect(t, find(t, cards[3].Checks, "health.idle"), Fail, "pid 222 using 40.0 GiB")
	// The busy card fails for its other process (health.idle), not for the gates it skipped.
	expect(t, find(t, cards[3].Checks, "performance.model_step"), Skip, "another process was using the card")
	for _, o := range cards[3].Outcomes {
		if o.Status != measure.StatusSkipped {
			t.Errorf("busy card ran %s", o.Step)
		}
	}
	expect(t, find(t, cards[4].Checks, "health.throttling"), Fail, "HW Thermal Slowdown")
	if cards[4].Readings.Samples < 3 || cards[0].Readings.MaxPowerWatts == 0 {
		t.Errorf("readings: hot card %+v, card 0 %+v", cards[4].Readings, cards[0].Readings)
	}
	if c := r.Counts; c.Fail == 0 || c.Pass == 0 {
		t.Errorf("counts %+v", c)
	}
}

func TestRunExpectAndBudget(t *testing.T) {
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1)}
	gpus[1].Set(func(s *fakenvml.State) { s.Name = "NVIDIA H100 PCIe"; s.MemoryBytes = 81559 << 20 })
	gpus[0].Set(func(s *fakenvml.State) { s.Name = "NVIDIA H100 Mystery Edition" })
	s := standard(t)
	s.Budget = 30 * time.Millisecond
	slow := goodH100()
	slow.onRun = slowStep(20*time.Millisecond, nil)
	tg, f := targets(t, gpus, []Runner{slow, slow})
	cfg := Config{Suite: s, Thresholds: BuiltinThresholds(), Features: f, ExpectGPU: gpuRow(t, "h100-sxm"), SampleInterval: time.Millisecond}
	cards, _, err := Run(context.Background(), cfg, tg, 2)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, find(t, cards[0].Checks, "identity.kind"), Warn, "bench/roofline does not know", "held against h100-sxm")
	if cards[0].SpecKey != "h100-sxm" {
		t.Errorf("an unknown name with --expect h100-sxm got spec %q", cards[0].SpecKey)
	}
	expect(t, find(t, cards[1].Checks, "identity.kind"), Fail, "is a h100-pcie", "not the h100-sxm expected")
	// Two 20 ms steps spend the 30 ms budget (one, on a loaded machine, where the first step's
	// overhead passes 10 ms: the budget is wall time); the rest are skipped, and so are their
	// checks: a budget overrun is no hardware FAIL.
	ran := 0
	for _, o := range cards[0].Outcomes {
		if o.Status == measure.StatusOK {
			ran++
		} else if o.Status != measure.StatusSkipped || o.Reason != "the suite's 30ms budget per card ran out" {
			t.Errorf("%s: %s %q", o.Step, o.Status, o.Reason)
		}
	}
	if ran < 1 || ran > 2 {
		t.Errorf("%d steps ran within the budget, want 2 (or 1 on a loaded machine)", ran)
	}
	expect(t, find(t, cards[0].Checks, "performance.model_step"), Skip, "budget per card ran out")
	expect(t, find(t, cards[0].Checks, "correctness."+StepAttentionLong), Skip, "budget per card ran out")
	// Card 0's only finding is its unknown name (WARN); the budget adds no failure.
	if cards[0].Verdict != Warn {
		for _, ch := range cards[0].Checks {
			t.Logf("%s %s: %s", ch.ID, ch.Verdict, ch.Message)
		}
		t.Errorf("card 0 verdict %s, want WARN: its skipped steps must not fail it", cards[0].Verdict)
	}
}

func TestRunInterrupted(t *testing.T) {
	gpus := []*fakenvml.GPU{fakenvml.H100(0)}
	ctx, cancel := context.WithCancel(context.Background())
	r := goodH100()
	r.onRun = func(Step) { cancel() }
	tg, f := targets(t, gpus, []Runner{r})
	cards, _, err := Run(ctx, Config{Suite: standard(t), Thresholds: BuiltinThresholds(), Features: f}, tg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o := cards[0].Outcomes[1]; o.Status != measure.StatusSkipped || o.Reason != "validate was interrupted" {
		t.Errorf("after the interrupt: %+v", o)
	}
}

func TestLostGPU(t *testing.T) {
	gpus := []*fakenvml.GPU{fakenvml.H100(0)}
	r := goodH100()
	r.onRun = func(s Step) {
		if s.Name == StepRead {
			gpus[0].Set(func(st *fakenvml.State) { st.Lost = true })
		}
	}
	tg, f := targets(t, gpus, []Runner{r})
	cards, _, err := Run(context.Background(), Config{Suite: standard(t), Thresholds: BuiltinThresholds(), Features: f}, tg, 1)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, find(t, cards[0].Checks, "health.nvml"), Fail, "ERROR_GPU_IS_LOST", "fallen off the bus")
}

var _ Runner = synthRunner{}
var _ = timing.Config{}

func TestRunOpenFailsAndBusyCardsAreNotOpened(t *testing.T) {
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1)}
	gpus[1].Set(func(s *fakenvml.State) { s.Processes = []nvml.ProcessInfo{{Pid: 9}} })
	tg, f := targets(t, gpus, []Runner{goodH100(), goodH100()})
	tg[0].Open = func() (Runner, error) { return nil, errors.New("out of memory") }
	tg[1].Open = func() (Runner, error) { t.Error("a busy card was opened"); return goodH100(), nil }
	cards, _, err := Run(context.Background(), Config{Suite: standard(t), Thresholds: BuiltinThresholds(), Features: f, IdleWait: time.Millisecond}, tg, 2)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, find(t, cards[0].Checks, "correctness."+StepRead), Fail, "opening the card in the kernels library: out of memory")
	expect(t, find(t, cards[0].Checks, "performance.read_bandwidth"), Fail, "out of memory")
	expect(t, find(t, cards[1].Checks, "health.idle"), Fail, "pid 9")
}

// A card reporting half its memory is still its kind and fails for the shortfall; with --expect
// the kind check passes instead of calling the name unknown.
func TestCardMemoryShortfall(t *testing.T) {
	expect, _ := roofline.LookupGPU("h100-sxm")
	for _, tc := range []struct {
		memory uint64
		fail   bool
	}{{81559 << 20, false}, {40 << 30, true}, {77 << 30, false}, {75 << 30, true}} {
		d := gpuinfo.Device{Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-x", MemoryTotalBytes: tc.memory}
		card, kind, checks := cardIdentity(Config{ExpectGPU: &expect}, Target{Info: d})
		var memory, kindCheck *Check
		for i := range checks {
			switch checks[i].ID {
			case "identity.memory":
				memory = &checks[i]
			case "identity.kind":
				kindCheck = &checks[i]
			}
		}
		if card.SpecKey != "h100-sxm" || kind.Spec == nil || kindCheck == nil || kindCheck.Verdict != Pass {
			t.Errorf("%d bytes: spec %q, kind check %+v", tc.memory, card.SpecKey, kindCheck)
		}
		if tc.fail != (memory != nil) || (memory != nil && (memory.Verdict != Fail || !strings.Contains(memory.Message, "short of the 80 GiB of a h100-sxm"))) {
			t.Errorf("%d bytes: memory check %+v, want a FAIL: %v", tc.memory, memory, tc.fail)
		}
	}
}
