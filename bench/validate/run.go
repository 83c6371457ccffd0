package validate

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/timing"
)

// Runner measures steps on one card: a kernel verified against bench/ref, then timed by the
// rule cfg. It never panics for a kernel's failure; it returns a measure.Outcome that says why.
type Runner interface {
	Run(step Step, cfg timing.Config) measure.Outcome
}

// Target is one card to validate.
type Target struct {
	Info gpuinfo.Device // identity, from gpuinfo.Query
	NVML nvml.Device    // for health and telemetry
	// Open gives the card's Runner. It is called once the card is idle and its health read:
	// opening a CUDA device makes this process one of the card's users, and inside a container
	// NVML reports it under a host PID that os.Getpid() cannot recognize. An error fails every
	// step of the card with its message.
	Open          func() (Runner, error)
	BackendDevice int // the index the kernels library knows it by
}

// RunnerTarget is a Target whose Runner needs no opening.
func RunnerTarget(info gpuinfo.Device, dev nvml.Device, r Runner) Target {
	return Target{Info: info, NVML: dev, Open: func() (Runner, error) { return r, nil }}
}

// Config is how validate runs.
type Config struct {
	Suite      Suite
	Thresholds ThresholdSet
	Features   gpuinfo.HealthFeatures // of the NVML library the targets' devices come from
	// ExpectGPU is --expect: every card must be this kind, and a card whose NVML name matches
	// no spec row is held against it.
	ExpectGPU *roofline.GPU
	// ExpectCount, when above 0, is how many GPUs NVML must see on the box.
	ExpectCount int
	// IdleWait bounds the wait for other processes to leave a card; PollInterval is how often
	// it looks, SampleInterval how often telemetry is read during the suite.
	IdleWait, PollInterval, SampleInterval time.Duration
	// OwnPID is left out of the processes that make a card busy (os.Getpid() when 0).
	OwnPID int
	// Progress, when set, hears each step as it ends (from several goroutines at once).
	Progress func(card Card, o Outcome)
}

func (c Config) withDefaults() Config {
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.SampleInterval <= 0 {
		c.SampleInterval = 250 * time.Millisecond
	}
	if c.OwnPID == 0 {
		c.OwnPID = os.Getpid()
	}
	return c
}

// Run validates every target at once, one goroutine per card, and returns the cards (in target
// order, with their checks, including the box outliers) and the box's own checks.
// visibleGPUs is how many GPUs NVML sees on the box, for Config.ExpectCount.
func Run(ctx context.Context, cfg Config, targets []Target, visibleGPUs int) ([]Card, []Check, error) {
	cfg = cfg.withDefaults()
	plan, err := cfg.Suite.Plan()
	if err != nil {
		return nil, nil, err
	}
	cards := make([]Card, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cards[i] = validateCard(ctx, cfg, plan, t)
		}()
	}
	wg.Wait()
	AddBoxOutliers(cards, cfg.Thresholds)
	var box []Check
	if cfg.ExpectCount > 0 {
		box = append(box, gpuCountCheck(visibleGPUs, cfg.ExpectCount))
	}
	return cards, box, nil
}

func gpuCountCheck(seen, want int) Check {
	c := Check{ID: "box.gpu_count", Category: CategoryBox, Value: num(float64(seen)), Threshold: num(float64(want)), Compare: ">=", Unit: "GPUs"}
	switch {
	case seen < want:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("NVML sees %d GPU(s), %d expected: a card may have fallen off the bus (look for Xid 79 in `dmesg`) or not be seated; reseat it or power-cycle the node.", seen, want)
	case seen > want:
		c.Verdict = Warn
		c.Message = fmt.Sprintf("NVML sees %d GPUs, more than the %d expected: check the node's inventory.", seen, want)
	default:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("NVML sees the %d GPUs expected.", want)
	}
	return c
}

// cardIdentity fills the identity fields and finds the spec row.
func cardIdentity(cfg Config, t Target) (Card, CardKind, []Check) {
	d := t.Info
	card := Card{Index: d.Index, UUID: d.UUID, Serial: d.Serial, PCIBusID: d.PCIBusID, Name: d.Name,
		MemoryBytes: d.MemoryTotalBytes, BackendDevice: t.BackendDevice}
	kind := CardKind{NVMLBandwidthBytesPerSec: d.DatasheetBandwidthBytesPerSec}
	var checks []Check
	spec, matched := roofline.MatchNVML(d.Name, d.MemoryTotalBytes)
	if !matched {
		// A card short of memory is still its kind (and fails for the shortfall below); the
		// name alone (with the size it spells, "80GB") finds its row.
		spec, matched = roofline.MatchNVML(d.Name, 0)
	}
	switch {
	case matched:
		kind.Spec = &spec
	case cfg.ExpectGPU != nil:
		kind.Spec = cfg.ExpectGPU
	}
	if kind.Spec != nil {
		card.SpecKey = kind.Spec.Key
	}
	if e := cfg.ExpectGPU; e != nil {
		c := Check{ID: "identity.kind", Category: CategoryIdentity, ValueText: d.Name, ThresholdText: e.Key}
		switch {
		case !matched:
			c.Verdict = Warn
			c.Message = fmt.Sprintf("NVML calls this card %q, which bench/roofline does not know; it is held against %s as --expect says.", d.Name, e.Key)
		case spec.Key != e.Key:
			c.Verdict = Fail
			c.Message = fmt.Sprintf("This card is a %s (%q), not the %s expected: check the node's inventory (or --expect).", spec.Key, d.Name, e.Key)
		default:
			c.Verdict = Pass
			c.Message = fmt.Sprintf("This card is the %s expected.", e.Key)
		}
		checks = append(checks, c)
	}
	if kind.Spec != nil && kind.Spec.MemoryBytes > 0 {
		if excess := float64(d.MemoryTotalBytes)/kind.Spec.MemoryBytes - 1; excess > memoryExcessWarn {
			c := Check{ID: "identity.memory", Category: CategoryIdentity, Verdict: Warn,
				Value: num(float64(d.MemoryTotalBytes)), Threshold: num((1 + memoryExcessWarn) * kind.Spec.MemoryBytes), Compare: "<=", Unit: "bytes"}
			c.Message = fmt.Sprintf("NVML reports %.1f GiB of memory on this card, %.0f%% more than the %.0f GiB a %s has: suspicious; the card may not be what its name says (a modified or mis-flashed VBIOS, a relabelled card) or bench/roofline's row is wrong; check the board's part number and serial with the vendor.",
				float64(d.MemoryTotalBytes)/(1<<30), 100*excess, kind.Spec.MemoryBytes/(1<<30), kind.Spec.Key)
			checks = append(checks, c)
		}
		if short := 1 - float64(d.MemoryTotalBytes)/kind.Spec.MemoryBytes; short > memoryShortfallFail {
			c := Check{ID: "identity.memory", Category: CategoryIdentity, Verdict: Fail,
				Value: num(float64(d.MemoryTotalBytes)), Threshold: num((1 - memoryShortfallFail) * kind.Spec.MemoryBytes), Compare: ">=", Unit: "bytes"}
			c.Message = fmt.Sprintf("NVML reports %.1f GiB of memory on this card, %.0f%% short of the %.0f GiB of a %s: memory is disabled or the card is not what its name says; reset the GPU, and return the card (RMA) if it stays short.",
				float64(d.MemoryTotalBytes)/(1<<30), 100*short, kind.Spec.MemoryBytes/(1<<30), kind.Spec.Key)
			checks = append(checks, c)
		}
	}
	return card, kind, checks
}

// memoryShortfallFail is how far below its spec row's capacity a card's memory may be: NVML
// reports a little less than the marketed size (79.6 GiB on an 80 GB H100, 2026-11), never 5%
// less on a healthy card.
const memoryShortfallFail = 0.05

// memoryExcessWarn is how far above its spec row's capacity a card's memory may be: NVML never
// reports more than the marketed size on a genuine card (79.6 of 80 GiB on an H100, 140.4 of
// 141 on an H200, 80.0 of 80 on an A100), so 1% is rounding room, not a tolerance.
const memoryExcessWarn = 0.01

// CategoryIdentity is for checks of what a card is.
const CategoryIdentity = "identity"

func validateCard(ctx context.Context, cfg Config, plan Plan, t Target) Card {
	if t.Info.Lost != "" {
		return lostCard(t)
	}
	card, kind, checks := cardIdentity(cfg, t)
	th := cfg.Thresholds.For(card.SpecKey)

	obs := HealthObservation{IdleWaitLimit: cfg.IdleWait.Seconds(), MaxMemClockMHz: t.Info.MaxMemClockMHz}
	obs.Busy, obs.WasBusy, obs.WaitedSeconds = waitIdle(ctx, cfg, t.NVML)
	// An interrupt during the wait leaves a busy card busy: not a finding about the card.
	cutShort := len(obs.Busy) > 0 && ctx.Err() != nil
	before, err := gpuinfo.ReadHealth(t.NVML, cfg.Features)
	obs.Before = before
	lost := err != nil
	if lost {
		checks = append(checks, lostCheck(err))
	}

	var outcomes []Outcome
	var runner Runner
	skip, fail := "", ""
	if len(obs.Busy) > 0 {
		skip = "another process was using the card"
	} else if r, err := t.Open(); err != nil {
		fail = fmt.Sprintf("opening the card in the kernels library: %v", err)
	} else {
		runner = r
	}
	sampler := startSampler(cfg, t.NVML)
	deadline := time.Now().Add(cfg.Suite.Budget)
	for _, step := range plan.Steps {
		var m measure.Outcome
		switch {
		case skip != "":
			m = measure.Outcome{Status: measure.StatusSkipped, Reason: skip}
		case fail != "":
			m = measure.Outcome{Status: measure.StatusFailed, Reason: fail}
		case ctx.Err() != nil:
			m = measure.Outcome{Status: measure.StatusSkipped, Reason: "validate was interrupted"}
			cutShort = true
		case cfg.Suite.Budget > 0 && time.Now().After(deadline):
			m = measure.Outcome{Status: measure.StatusSkipped, Reason: fmt.Sprintf("the suite's %s budget per card ran out", cfg.Suite.Budget)}
		default:
			m = runner.Run(step, cfg.Suite.Timing)
		}
		o := newOutcome(step, m)
		outcomes = append(outcomes, o)
		obs.UnderLoad = obs.UnderLoad || (o.Status == measure.StatusOK && !o.Emulated)
		if cfg.Progress != nil {
			cfg.Progress(card, o)
		}
	}
	obs.During = sampler.stop()
	after, err := gpuinfo.ReadHealth(t.NVML, cfg.Features)
	obs.After = after
	if err != nil && !lost {
		checks = append(checks, lostCheck(err))
	}

	checks = append(checks, HealthChecks(obs, th.Health)...)
	checks = append(checks, CorrectnessChecks(outcomes)...)
	byStep := map[string]Outcome{}
	for _, o := range outcomes {
		byStep[o.Step] = o
	}
	perf, gates := PerformanceChecks(kind, cfg.Suite, plan, byStep, th)
	card.Checks = append(checks, perf...)
	card.Gates = gates
	card.Outcomes = outcomes
	card.Health = &obs.After
	card.Readings = summarize(obs.During)
	card.Verdict = verdictOf(card.Checks)
	if cutShort {
		card.CutShort, card.Verdict = true, Interrupted
	}
	return card
}

// lostCard is the verdict on a card NVML could not read before the run: FAIL, named by index,
// UUID and bus id as far as NVML still gives them, so a technician finds the right slot.
func lostCard(t Target) Card {
	d := t.Info
	card := Card{Index: d.Index, UUID: d.UUID, Serial: d.Serial, PCIBusID: d.PCIBusID, Name: d.Name,
		BackendDevice: -1, Gates: []GateValue{}}
	card.Checks = []Check{newCheck("health.nvml", CategoryHealth, Fail,
		"GPU %d (%s) fell off the bus or cannot be opened: NVML says %s. Look for Xid 79 in `dmesg`, reseat the card or power-cycle the node; it was not validated.",
		d.Index, cardPlace(d), d.Lost)}
	card.Verdict = Fail
	return card
}

// cardPlace names a card by UUID and PCI bus id, saying which NVML could not give.
func cardPlace(d gpuinfo.Device) string {
	uuid, bus := d.UUID, d.PCIBusID
	if uuid == "" {
		uuid = "UUID unreadable"
	}
	if bus == "" {
		bus = "PCI bus id unreadable"
	} else {
		bus = "PCI bus id " + bus
	}
	return uuid + ", " + bus
}

func lostCheck(err error) Check {
	return newCheck("health.nvml", CategoryHealth, Fail,
		"NVML failed to read the card (%v): it may have fallen off the bus; look for Xid errors in `dmesg`, reset the GPU or power-cycle the node.", err)
}

// waitIdle waits up to cfg.IdleWait for every other process to leave the card. It returns the
// ones still there (empty when idle; nil when the processes could not be read), whether there
// were any at first, and how long it waited.
func waitIdle(ctx context.Context, cfg Config, dev nvml.Device) (busy []gpuinfo.Process, wasBusy bool, waitedSeconds float64) {
	start := time.Now()
	for {
		procs, ok, err := gpuinfo.ReadComputeProcesses(dev, cfg.Features)
		if !ok || err != nil {
			return nil, wasBusy, time.Since(start).Seconds()
		}
		procs = slices.DeleteFunc(procs, func(p gpuinfo.Process) bool { return int(p.PID) == cfg.OwnPID })
		wasBusy = wasBusy || len(procs) > 0
		waited := time.Since(start)
		if len(procs) == 0 || waited >= cfg.IdleWait || ctx.Err() != nil {
			return procs, wasBusy, waited.Seconds()
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(cfg.PollInterval, cfg.IdleWait-waited)):
		}
	}
}

// sampler reads telemetry and the PCIe link in the background while the suite runs.
type sampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	samples []Sample
}

func startSampler(cfg Config, dev nvml.Device) *sampler {
	s := &sampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(cfg.SampleInterval)
		defer tick.Stop()
		for {
			s.read(cfg, dev)
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) read(cfg Config, dev nvml.Device) {
	tel, err := gpuinfo.ReadTelemetry(dev, cfg.Features.TelemetryEntryPoints)
	if err != nil {
		return // a lost card shows in the health read after the suite
	}
	sample := Sample{Telemetry: tel}
	if link, ok, err := gpuinfo.ReadPCIeLink(dev, cfg.Features); ok && err == nil {
		sample.PCIe = &link
	}
	s.samples = append(s.samples, sample)
}

// stop ends the sampling, after one last reading, and returns the samples.
func (s *sampler) stop() []Sample {
	close(s.done)
	s.wg.Wait()
	return s.samples
}

func summarize(samples []Sample) ReadingSummary {
	var r ReadingSummary
	var mask uint64
	for i, s := range samples {
		r.Samples++
		r.MaxTemperatureC = max(r.MaxTemperatureC, s.TemperatureC)
		r.MaxPowerWatts = max(r.MaxPowerWatts, s.PowerWatts)
		r.MaxSMClockMHz = max(r.MaxSMClockMHz, s.SMClockMHz)
		if i == 0 || s.SMClockMHz < r.MinSMClockMHz {
			r.MinSMClockMHz = s.SMClockMHz
		}
		if i == 0 || s.MemClockMHz < r.MinMemClockMHz {
			r.MinMemClockMHz = s.MemClockMHz
		}
		mask |= s.ThrottleReasons
	}
	r.ThrottleReasons, _ = gpuinfo.DecodeClockEventReasons(mask)
	return r
}
