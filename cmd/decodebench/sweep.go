package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/report"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// Test seams, nil outside tests: wrap the measurer (to inject a failure) and replace the
// telemetry source (to script a throttled card).
var (
	sweepMeasurerHook  func(sweep.Measurer) sweep.Measurer
	sweepTelemetryHook func() telemetry.Source
	// sweepPhaseHook hears the phases the fault-injection tests signal in: "run.json" (the
	// directory locked, run.json not yet written), "probe" and "kernel" (before each
	// measurement of a probe or of a configuration's kernel) and "report".
	sweepPhaseHook func(phase string)
)

// phaseProgress tells sweepPhaseHook of each measurement.
type phaseProgress struct{ sweep.Progress }

func (p phaseProgress) Measuring(done, total int, what string, eta float64) {
	if total == 0 {
		sweepPhaseHook("probe")
	} else {
		sweepPhaseHook("kernel")
	}
	p.Progress.Measuring(done, total, what, eta)
}

func sweepCommand() *cli.Command {
	return &cli.Command{
		Name:  "sweep",
		Usage: "measure decode tokens/s over batch, context and model axes on a GPU, into a resumable run directory with a report",
		UsageText: "decodebench sweep (--model NAME | --model-config FILE | --hidden LIST --ffn LIST --heads LIST --layers LIST --vocab LIST ...)\n" +
			"       [--batch LIST] [--context LIST] [--dtype bf16|fp16] [--weight-dtype LIST [--group-size G]] [--kv-dtype bf16|fp16|fp8] [--tp N] [--gpu INDEX|UUID] [--backend auto|cuda|emu]\n" +
			"       [--out DIR | --resume DIR] [--budget DURATION] [--step composed|e2e|both]\n\n" +
			"   LIST syntax: " + axes.Syntax,
		Description: "For each configuration (model, batch B, context S) every distinct kernel of one decode step is\n" +
			"verified against a float64 reference, then timed with device events after warm-up, its operands\n" +
			"rotated past L2; a kernel shape that several configurations share is measured once. The step time is\n" +
			"the sum of each kernel's calls x median time plus the small per-token ops, bounded by the measured\n" +
			"read bandwidth. Bandwidth and compute probes run first and give the measured ceiling. With --step e2e\n" +
			"or both (both is the CUDA backend's default) each configuration's whole step also runs, eager and as\n" +
			"a CUDA graph (see `decodebench step`), into steps.jsonl.\n\n" +
			"The run directory gets run.json, results.jsonl and kernels.jsonl (appended as measured), results.csv,\n" +
			"report.md, report.html and plots/. Ctrl-C (or SIGTERM, SIGHUP) stops after the measurement in flight, writes the report\n" +
			"and exits 130; --resume DIR continues without repeating a measurement. Exit status: 0 all ok,\n" +
			"1 a configuration failed or the device was lost, 2 a usage error, 130 interrupted.",
		Flags:        sweepFlags(),
		OnUsageError: onUsageError,
		Action:       sweepAction,
	}
}

func sweepFlags() []cli.Flag {
	list := func(name, usage string) cli.Flag {
		return listFlag(&cli.StringFlag{Name: name, Category: "model dimensions (lists)", Usage: usage})
	}
	backend := backendFlags()[0] // --backend; the device is --device here too, by index or UUID
	flags := append(modelFlagsIn("model", true),
		&cli.StringFlag{Name: "dtype", Category: "model",
			Usage: "weights, activations and KV cache: bf16 or fp16 (default: the model's); the dimension flags below override the model's"},
		list("hidden", "model width, e.g. 4096 or 2048,4096"),
		list("ffn", "MLP width"),
		list("heads", "query heads"),
		list("kv-heads", "KV heads (default: --heads)"),
		list("head-dim", "head size: "+headDimsText()+" (default: hidden / heads)"),
		list("layers", "decoder layers"),
		list("vocab", "vocabulary size (rows of the LM head)"),
		inCategory(batchFlag(defaultBatches, fmt.Sprintf("batch sizes, 1..%d", cgo.MaxBatch)), "axes"),
		inCategory(contextFlag(defaultContexts, "context lengths in tokens (k = 1024)"), "axes"),
		backend,
		&cli.StringFlag{Name: "device", Value: "0", Category: "device",
			Usage: "the GPU: an index (as nvidia-smi numbers them) or a UUID (GPU-...)"},
		inCategory(gpuFlag("auto", "the spec row of the datasheet ceiling (h200, h100-sxm, ...), auto (the row NVML's name matches) or none; an index or UUID here is taken as --device, its old name"), "device"),
		oldName(&cli.StringFlag{Name: "datasheet"}, "gpu", nil),
		formatFlag(format.All...),
		inCategory(reserveFlag(), "device"),
		inCategory(outFlag("the new run directory (default: out/sweep-<date>-<time>)", "o"), "output"),
		&cli.StringFlag{Name: "resume", Category: "output",
			Usage: "continue the run directory DIR: skip what it has, measure the rest"},
		&cli.BoolFlag{Name: "retry-failed", Category: "output",
			Usage: "with --resume, measure failed configurations again"},
		inCategory(durationFlag("budget", 0, "trim the sweep to fit this time (e.g. 5m), the finest grid points first; run.json lists what was dropped"), "output"),
		&cli.StringFlag{Name: "peer", Category: "output",
			Usage: "cublas: also measure cuBLASLt on every linear shape, the same way (kernels.jsonl; the report gives cuBLAS time / ours); the steps stay ours"},
		&cli.StringFlag{Name: "step", Category: "output",
			Usage: "which step times to record: composed (kernels measured alone, summed), e2e (the real step, eager and as a CUDA graph: steps.jsonl) or both (default: both on the CUDA backend, composed on the emulator, where whole steps are slow)"},
		hiddenFlag(&cli.IntFlag{Name: "e2e-steps", Value: step.DefaultSteps}),
		&cli.StringFlag{Name: "progress", Value: "auto", Category: "output",
			Usage: "auto (a bar when stderr is a terminal, lines otherwise), bar, lines or none"},
		// The method: measure's and timing's defaults, adjustable for tests and experts, recorded in run.json.
		hiddenFlag(&cli.Float64Flag{Name: "rotate-factor", Value: measure.DefaultRotateFactor}),
		hiddenFlag(&cli.Uint64Flag{Name: "max-rotate-bytes"}),
		hiddenFlag(&cli.Uint64Flag{Name: "probe-bytes"}),
		hiddenFlag(seedFlag("")),
		hiddenFlag(durationFlag("telemetry-interval", telemetry.DefaultInterval, "")),
		hiddenFlag(&cli.Float64Flag{Name: "memory-bytes"}),
	)
	return append(flags, timingFlags(timingOptions{maxSamples: true, category: "timing"})...)
}

// sweepRequest is a validated sweep command line.
type sweepRequest struct {
	axes        sweep.Axes
	backend     string
	gpu         string // index or UUID
	datasheet   string // "auto", "none" or a spec row key
	format      string // --format of the summary on stdout
	reserve     float64
	out         string
	resume      bool
	retryFailed bool
	budget      time.Duration
	progress    string
	options     measure.Options
	probeBytes  uint64
	telemetry   time.Duration
	memoryBytes float64
	peer        cgo.LinearVariant // LinearAuto: none
	step        sweep.StepMode    // "": the backend's default (both on cuda, composed on the emulator)
	e2eSteps    int
}

// parseSweep validates the whole command line without touching a device: every error is a
// usage error (exit 2) that names the value.
func parseSweep(c *cli.Context) (sweepRequest, error) {
	var r sweepRequest
	if c.NArg() > 0 {
		return r, usageError("sweep takes no arguments (got %q); flags go before any argument", c.Args().First())
	}
	models, err := sweepModels(c)
	if dir := c.String("resume"); err != nil && dir != "" {
		if _, statErr := os.Stat(filepath.Join(dir, sweep.InfoFile)); statErr != nil {
			return r, usageError("--resume %s holds no run yet (no %s, no results), so there is no model to continue: give the model flags to start one there (%v)", dir, sweep.InfoFile, err)
		}
	}
	if err != nil {
		return r, err
	}
	batches, contexts, err := parseBatchContextLists(c)
	if err != nil {
		return r, err
	}
	if err := checkPoints(axes.MaxPoints, "configurations", axes.Axis{Name: "models", Values: len(models)}, axes.Axis{Name: "--batch", Values: len(batches)}, axes.Axis{Name: "--context", Values: len(contexts)}); err != nil {
		return r, err
	}
	r.axes = sweep.Axes{Models: models, Batches: batches, Contexts: contexts}
	if err := r.axes.Validate(); err != nil {
		return r, usageError("%v", err)
	}

	r.backend = c.String("backend")
	if !slices.Contains(cgo.Backends, r.backend) {
		return r, usageError("--backend %q: want one of %s", r.backend, strings.Join(cgo.Backends, ", "))
	}
	r.gpu = strings.TrimSpace(c.String("device"))
	r.datasheet = strings.TrimSpace(c.String("gpu"))
	if n, err := parseIndex(r.datasheet); isUUID(r.datasheet) || (err == nil && n >= 0) {
		// --gpu named the device before it named the spec row; no spec row is a number or a UUID.
		if c.IsSet("device") {
			return r, usageError("--gpu %s and --device %s: --gpu is a spec row (h200, ...); give the device once, with --device", r.datasheet, r.gpu)
		}
		fmt.Fprintf(errWriter(c), "decodebench: --gpu %s names a device: that is --device now (--gpu is the spec row); taken as --device %s\n", r.datasheet, r.datasheet)
		r.gpu, r.datasheet = r.datasheet, "auto"
	}
	if !isUUID(r.gpu) {
		if n, err := parseIndex(r.gpu); err != nil || n < 0 {
			return r, usageError("--device %q: give an index (0, 1, ...) or a UUID (GPU-...)", r.gpu)
		}
	}
	if r.datasheet != "auto" && r.datasheet != "none" {
		if _, err := roofline.LookupGPU(r.datasheet); err != nil {
			return r, usageError("--gpu: %v", err)
		}
	}
	if r.format, err = parseFormat(c); err != nil {
		return r, err
	}
	if r.reserve, err = parseReserve(c); err != nil {
		return r, err
	}

	r.out, r.retryFailed, r.budget = c.String("out"), c.Bool("retry-failed"), c.Duration("budget")
	if dir := c.String("resume"); dir != "" {
		if r.out != "" && filepath.Clean(r.out) != filepath.Clean(dir) {
			return r, usageError("give --out DIR for a new run or --resume DIR to continue one, not both (got --out %q and --resume %q)", r.out, dir)
		}
		r.out, r.resume = dir, true
	} else if r.retryFailed {
		return r, usageError("--retry-failed goes with --resume DIR")
	}
	if r.out == "" {
		r.out = filepath.Join("out", "sweep-"+time.Now().Format("20060102-150405"))
	}
	if err := checkOutDir(r.out); err != nil {
		return r, err
	}
	if err := sweep.Holder(r.out); err != nil {
		return r, usageError("%v", err)
	}
	if !r.resume {
		for _, name := range []string{sweep.InfoFile, sweep.ResultsFile} {
			if _, err := os.Stat(filepath.Join(r.out, name)); err == nil {
				return r, usageError("--out %s already holds a run: continue it with --resume %s, or choose another directory", r.out, r.out)
			}
		}
	}
	if r.budget < 0 {
		return r, usageError("--budget %v: give a positive duration such as 5m", r.budget)
	}
	if r.peer, err = parsePeer(c.String("peer")); err != nil {
		return r, err
	}
	if v := c.String("step"); v != "" {
		if r.step, err = sweep.ParseStepMode(v); err != nil {
			return r, usageError("--%v", err)
		}
	}
	if r.e2eSteps = c.Int("e2e-steps"); r.e2eSteps < 1 {
		return r, usageError("--e2e-steps %d: a sample decodes at least one step", r.e2eSteps)
	}
	r.progress = c.String("progress")
	if !slices.Contains([]string{"auto", "bar", "lines", "none"}, r.progress) {
		return r, usageError("--progress %q: want auto, bar, lines or none", r.progress)
	}

	r.options = measure.DefaultOptions()
	if r.options.Timing, err = parseTimingFlags(c, "timing rule"); err != nil {
		return r, err
	}
	if r.options.RotateFactor = c.Float64("rotate-factor"); !(r.options.RotateFactor > 0) {
		return r, usageError("--rotate-factor %g: want a number > 0", r.options.RotateFactor)
	}
	r.options.MaxRotateBytes, r.options.Seed = c.Uint64("max-rotate-bytes"), c.Uint64("seed")
	if r.probeBytes = c.Uint64("probe-bytes"); r.probeBytes%16 != 0 {
		return r, usageError("--probe-bytes %d: want a multiple of 16", r.probeBytes)
	}
	if r.telemetry = c.Duration("telemetry-interval"); r.telemetry <= 0 {
		return r, usageError("--telemetry-interval %v: want a positive duration", r.telemetry)
	}
	if r.memoryBytes = c.Float64("memory-bytes"); r.memoryBytes < 0 {
		return r, usageError("--memory-bytes %g: want 0 (the card's) or a size in bytes", r.memoryBytes)
	}
	return r, nil
}

func sweepAction(c *cli.Context) error {
	if err := resumeFlags(c); err != nil {
		return err
	}
	req, err := parseSweep(c)
	if err != nil {
		return err
	}
	// Ctrl-C, SIGTERM, SIGHUP or a closed standard output: stop after the measurement in flight;
	// a second stop signal ends at once (interruptSweep).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs, unnotify := notifyInterrupts()
	defer unnotify()

	// The lock comes first and is held to the end (the report included): a second writer is
	// refused before it touches the device.
	_, statErr := os.Stat(req.out)
	madeDir := errors.Is(statErr, os.ErrNotExist)
	lock, err := sweep.Lock(req.out)
	if err != nil {
		var locked *sweep.LockedError
		if errors.As(err, &locked) {
			return usageError("%v", err)
		}
		return failure("%v", err)
	}
	var dir *sweep.RunDir
	defer func() {
		if dir == nil {
			lock.Release()
			if madeDir { // refused before run.json: leave no empty directory behind
				os.Remove(filepath.Join(req.out, sweep.LockFile))
				os.Remove(req.out)
			}
		}
	}()
	if lock.StalePID != 0 {
		fmt.Fprintf(os.Stderr, "decodebench: %s was locked by pid %d, which ended without closing it; taken over\n", req.out, lock.StalePID)
	}

	target, err := openSweepTarget(req)
	if err != nil {
		return err
	}
	defer target.close()

	info := target.runInfo(req, os.Args, setFlags(c))
	var prior sweep.Prior
	if req.resume {
		d, p, err := lock.Resume()
		if err != nil {
			return usageError("--resume %s: %v", req.out, err)
		}
		dir, prior = d, p
		if prior.Empty {
			fmt.Fprintf(os.Stderr, "decodebench: %s holds no run yet (no %s, no results): starting one there\n", req.out, sweep.InfoFile)
		} else {
			if err := sweep.CheckResume(req.out, prior.Info, info); err != nil {
				return usageError("%v", err)
			}
			info = resumedInfo(prior.Info, info)
			for _, name := range prior.Repaired {
				fmt.Fprintf(os.Stderr, "decodebench: %s/%s had a torn last line (a crash mid-write); it was cut off and that measurement is repeated\n", req.out, name)
			}
			if prior.BadLines > 0 {
				fmt.Fprintf(os.Stderr, "decodebench: %s: %d line(s) in the middle of its files could not be read and were passed over (the rest is kept)\n", req.out, prior.BadLines)
			}
			for _, why := range prior.Implausible {
				fmt.Fprintf(os.Stderr, "decodebench: %s: held as failed, not a speed: %s\n", req.out, why)
			}
		}
	}
	defer func() {
		if dir != nil {
			dir.Close()
		}
	}()

	if ds := target.datasheet; ds.BandwidthBytesPerSec > 0 || ds.FLOPsPerSec > 0 {
		req.options.Datasheet = measure.Datasheet{BytesPerSec: ds.BandwidthBytesPerSec, FLOPsPerSec: ds.FLOPsPerSec, Source: target.dsSource}
	}
	var measurer sweep.Measurer = sweep.DeviceMeasurer{Device: target.dev, Options: req.options}
	if sweepMeasurerHook != nil {
		measurer = sweepMeasurerHook(measurer)
	}
	progress := newProgress(req.progress, os.Stderr, target.lib.Emulated())
	if sweepPhaseHook != nil {
		progress = phaseProgress{progress}
	}
	finished := make(chan struct{})
	defer close(finished) // before cancel(): the goroutine below then says nothing
	go interruptSweep(sigs, cancel, finished, progress)
	runner := &sweep.Runner{
		Info: &info, Measurer: measurer,
		Telemetry:       telemetry.Sampler{Source: target.telemetrySource(), Interval: req.telemetry},
		Ceilings:        sweep.Ceilings{Datasheet: target.datasheet},
		MemoryBytes:     info.Method.MemoryBytes,
		ReserveFraction: req.reserve,
		ProbeBytes:      req.probeBytes,
		BudgetSeconds:   req.budget.Seconds(),
		Cost:            &sweep.CostModel{Timing: req.options.Timing, SetupSeconds: sweep.DefaultSetupSeconds},
		Progress:        progress,
		RetryFailed:     req.retryFailed,
		Peer:            req.peer,
		Step:            req.step,
		E2E:             sweep.E2EOptions{Steps: req.e2eSteps, Seed: req.options.Seed},
	}
	if runner.Step == "" {
		runner.Step = sweep.StepBoth
		if target.lib.Emulated() {
			runner.Step = sweep.StepComposed
		}
	}
	if req.peer != cgo.LinearAuto {
		info.Peer = req.peer.String()
	}
	if target.lib.Emulated() {
		runner.Cost.SetupSeconds = 0.01 // tiny emulated shapes: the first measurements correct it
	}
	if err := runner.CheckBudget(req.axes.Configs(), prior); err != nil {
		return usageError("%v", err)
	}
	if err := checkAnythingFits(runner, pendingConfigs(req.axes.Configs(), prior, req.retryFailed), target.lib.Emulated()); err != nil {
		return err
	}
	if dir == nil {
		if sweepPhaseHook != nil {
			sweepPhaseHook("run.json")
		}
		if dir, err = lock.Create(info); err != nil {
			if errors.Is(err, sweep.ErrHoldsRun) {
				return usageError("%v", err)
			}
			return failure("%v", err)
		}
	} else if err := dir.WriteInfo(info); err != nil {
		return failure("%v", err)
	}
	runner.Dir = dir
	res, runErr := runner.Run(ctx, req.axes.Configs(), prior)
	if runErr != nil {
		return failure("sweep stopped: %v (the run directory %s is resumable)", runErr, req.out)
	}

	if sweepPhaseHook != nil {
		sweepPhaseHook("report")
	}
	written, reportErr := report.Write(req.out)
	summary := sweepSummary(res, req.out)
	if req.format != format.Table {
		// A row per configuration on stdout for programs; the prose goes to stderr.
		fmt.Fprintln(c.App.ErrWriter, summary)
		if err := writeSweepSummary(c.App.Writer, c.App.ErrWriter, req.format, req.out); err != nil {
			return failure("%v", err)
		}
	} else {
		fmt.Fprintln(c.App.Writer, summary)
		printHeadlines(c.App.Writer, req.out)
	}
	for _, n := range written.Notes {
		fmt.Fprintln(os.Stderr, "decodebench: note: "+n)
	}
	if reportErr != nil {
		return failure("writing the report of %s: %v", req.out, reportErr)
	}
	prose := c.App.Writer
	if req.format != format.Table {
		prose = c.App.ErrWriter
	}
	fmt.Fprintf(prose, "report: %s\n", filepath.Join(req.out, report.HTMLFile))
	if target.lib.Emulated() {
		fmt.Fprintln(prose, "EMULATED: the kernels ran on the CPU emulator; these times are not a speed.")
	}
	switch {
	case res.BudgetExhausted:
		return usageError("--budget %v: once the probes had run, every configuration was estimated to take longer than what was left; give a longer --budget (the probes' results are kept: --resume %s)", req.budget, req.out)
	case res.Interrupted:
		return cli.Exit(fmt.Sprintf("interrupted: %d configuration(s) measured; continue with `decodebench sweep --resume %s`", res.Records, req.out), exitInterrupted)
	case res.DeviceLost != nil:
		return failure("%v; the run directory %s is resumable on a healthy card", res.DeviceLost, req.out)
	case ctx.Err() != nil:
		return cli.Exit(fmt.Sprintf("interrupted while the report was written: the sweep had finished (%d configuration(s) recorded) and the report was completed; `decodebench report %s` redraws it", res.Records, req.out), exitInterrupted)
	case res.Failed > 0:
		return failure("%d configuration(s) failed (see %s)", res.Failed, filepath.Join(req.out, report.HTMLFile))
	case res.StepsFailed > 0:
		return failure("%d end-to-end step(s) failed (see %s)", res.StepsFailed, filepath.Join(req.out, sweep.StepsFile))
	case res.Steps > 0 && res.StepsOK == 0:
		return failure("none of the %d end-to-end step(s) could be built, fit and be verified (see %s)", res.Steps, filepath.Join(req.out, sweep.StepsFile))
	}
	return nil
}

// interruptSweep cancels the sweep at the first interrupt signal and says so; at a second stop
// signal it clears the progress bar, so that no frozen bar is left on the terminal, and ends
// the process at once, as the signal would have.
func interruptSweep(sigs <-chan os.Signal, cancel func(), finished <-chan struct{}, progress sweep.Progress) {
	var sig os.Signal
	select {
	case <-finished:
		return
	case sig = <-sigs:
	}
	cancel()
	select {
	case <-finished:
		return
	default:
	}
	progress.Note(fmt.Sprintf("interrupted (%s): stopping after the measurement in flight (Ctrl-C again to quit at once)", signalName(sig)))
	for {
		select {
		case <-finished:
			return
		case sig = <-sigs:
		}
		if forcesExit(sig) {
			progress.Stop()
			fmt.Fprintf(os.Stderr, "decodebench: %s again: stopping now (--resume continues the run)\n", signalName(sig))
			exitProcess(signalExitCode(sig))
			return
		}
	}
}

func sweepSummary(res sweep.Result, dir string) string {
	s := fmt.Sprintf("sweep %s: %d configuration(s) recorded (%d ok, %d failed, %d skipped)", dir, res.Records, res.OK, res.Failed, res.Skipped)
	if res.Resumed > 0 {
		s += fmt.Sprintf(", %d already done", res.Resumed)
	}
	if len(res.Dropped) > 0 {
		s += fmt.Sprintf(", %d dropped to fit --budget", len(res.Dropped))
	}
	if res.Steps > 0 {
		s += fmt.Sprintf("; %d end-to-end step record(s) (%d verified and timed, %d failed)", res.Steps, res.StepsOK, res.StepsFailed)
	}
	return s
}

// setFlags lists every flag that has a value from the command line or a DECODEBENCH_*
// variable, as --name=value: with the version, what it takes to run the sweep again.
func setFlags(c *cli.Context) []string {
	var out []string
	for _, f := range c.Command.Flags {
		names := f.Names()
		if len(names) == 0 || !c.IsSet(names[0]) {
			continue
		}
		out = append(out, fmt.Sprintf("--%s=%v", names[0], c.Value(names[0])))
	}
	return out
}
