package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/bench/units"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench step`: whole decode steps on the card, each configuration's graph, eager and
// composed times side by side. It runs the sweep's machinery (probes, kernels measured alone,
// then the whole step) into a run directory, so that its records are the sweep's.

// maxSteps bounds --steps: a sample of more steps than this says nothing a shorter one does
// not, and the cache grows by a token a step.
const maxSteps = 4096

// On the emulator: one sample of each measurement, and a read probe of 1 MiB.
var emulatorTiming = timing.Config{Warmup: 0, MinSamples: 1, MinSeconds: 0, TargetSpread: 1, MaxSeconds: 10}

const emulatorProbeBytes = 1 << 20

func stepCommand() *cli.Command {
	return &cli.Command{
		Name:  "step",
		Usage: "run whole decode steps on the GPU (eager and as a CUDA graph) beside their composed time and the roofline",
		UsageText: "decodebench step (--model NAME | --model-config FILE) [--batch LIST] [--context LIST] [--steps T]\n" +
			"       [--mode graph|eager|both] [--tp N] [--dtype bf16|fp16] [--format table|md|csv|json|jsonl] [--out DIR] [--backend auto|cuda|emu]\n\n" +
			"   LIST syntax: " + axes.Syntax,
		Description: "For each configuration (batch B, context S) the model's synthetic weights are filled on the device,\n" +
			"a KV cache of S tokens per sequence, then T steps run in which each sequence's greedy token is the next\n" +
			"step's input and its position advances on the device. Three step times are reported:\n" +
			"  composed: the kernels measured alone, summed, plus the small ops bounded by bandwidth (the sweep's);\n" +
			"  eager:    the real step, every op launched in turn on one stream;\n" +
			"  graph:    the same step captured once in a CUDA graph and replayed.\n" +
			"eager - graph is what launches cost; graph - composed is what running together costs. Each sample\n" +
			"is T steps from the same start, timed by events on the stream, under the sampling rule of every\n" +
			"measurement. One line per configuration as it finishes, then a table (--format jsonl: the records).\n" +
			"With --tp N the step is one GPU's shard and the all-reduces are left out. Before any sample each\n" +
			"configuration's steps run untimed in every mode and are checked against the float64 forward pass\n" +
			"(the first layer of each kind, 2 sequences recomputed, context up to 4096, 2 steps); a step that\n" +
			"disagrees is failed with its first bad logit and never timed. Exit status: 0 all ok, 1 a\n" +
			"configuration failed (or none could be built, fit and be verified), 2 a usage error or a request\n" +
			"of which nothing fits the card (refused before any device work), 130 interrupted.",
		Flags:        stepFlags(),
		OnUsageError: onUsageError,
		Action:       stepAction,
	}
}

func stepFlags() []cli.Flag {
	flags := append(modelFlags(),
		&cli.StringFlag{Name: "dtype", Usage: "weights, activations and KV cache: bf16 or fp16, dropping any quantization (default: the model's; --weight-dtype and --kv-dtype set fp8 or int8 projections and an fp8 cache)"},
		batchFlag("1", fmt.Sprintf("batch sizes, 1..%d", cgo.MaxBatch)),
		contextFlag("1k", "cached tokens per sequence when the first step starts (k = 1024)"),
		&cli.IntFlag{Name: "steps", Value: step.DefaultSteps, Usage: "steps in one timed sample (each sample starts from the same state)"},
		&cli.StringFlag{Name: "mode", Usage: "graph, eager or both (default: both where the kernels library has graphs, else eager)"},
		&cli.BoolFlag{Name: "compare-modes",
			Usage: "first run the steps untimed in each mode and check that graph and eager give the same tokens and logits bit for bit (modes_agree)"},
		&cli.BoolFlag{Name: "plan",
			Usage: "print each configuration's step (every call with its sizes) and the device memory it needs, then exit: no device work"},
		formatFlag(format.All...),
		jsonAlias(format.JSONL),
		outFlag("keep the run directory here (run.json, results.jsonl, kernels.jsonl, steps.jsonl); default: a temporary one, removed", "o"),
		gpuFlag("auto", "the spec row of the datasheet ceiling (h200, h100-sxm, ...), auto or none"),
		oldName(&cli.StringFlag{Name: "datasheet"}, "gpu", nil),
		hiddenFlag(&cli.Uint64Flag{Name: "probe-bytes"}),
		hiddenFlag(&cli.Uint64Flag{Name: "max-rotate-bytes"}),
		hiddenFlag(seedFlag("")),
	)
	flags = append(flags, timingFlags(timingOptions{})...)
	return append(flags, backendFlags()...)
}

// stepRequest is a validated step command line.
type stepRequest struct {
	sweep   sweepRequest // the sweep it runs: axes, backend, method
	steps   int
	mode    string // "" (the library's best), graph, eager or both
	format  string
	asJSON  bool // --format is not table: stdout carries only records
	keepOut bool
	compare bool
}

// parseStep validates the whole command line without touching a device.
func parseStep(c *cli.Context) (stepRequest, error) {
	var r stepRequest
	if c.NArg() > 0 {
		return r, usageError("step takes no arguments (got %q); flags go before any argument", c.Args().First())
	}
	shape, err := resolveModel(c)
	if err != nil {
		return r, err
	}
	if d := c.String("dtype"); d != "" {
		dt, err := model.ParseDType(d)
		if err != nil || (dt != model.BF16 && dt != model.FP16) {
			return r, usageError("--dtype %q: the step runs bf16 or fp16", d)
		}
		shape.WeightDType, shape.KVDType, shape.Quant = dt, dt, nil
	}
	if f := step.Feature(shape); f != "" {
		return r, usageError("model %s: the step does not implement %s yet; `decodebench predict` models it", shape, f)
	}
	batches, contexts, err := parseBatchContextLists(c)
	if err != nil {
		return r, err
	}
	if err := checkPoints(axes.MaxPoints, "configurations", axes.Axis{Name: "--batch", Values: len(batches)}, axes.Axis{Name: "--context", Values: len(contexts)}); err != nil {
		return r, err
	}
	r.steps = c.Int("steps")
	if r.steps < 1 || r.steps > maxSteps {
		return r, usageError("--steps %d: a sample decodes 1..%d steps", r.steps, maxSteps)
	}
	for _, b := range batches {
		for _, ctx := range contexts {
			cfg := step.Config{Model: shape, Batch: b, Context: ctx, Steps: r.steps}
			if err := cfg.Validate(); err != nil {
				return r, usageError("--batch %d --context %d --steps %d: %v", b, ctx, r.steps, err)
			}
		}
	}
	r.mode = c.String("mode")
	if r.mode != "" {
		if _, err := step.ParseMode(r.mode); err != nil {
			return r, usageError("--%v", err)
		}
	}
	if r.format, err = parseFormat(c); err != nil {
		return r, err
	}
	r.asJSON = r.format != format.Table
	if r.compare = c.Bool("compare-modes"); r.compare {
		// The comparison keeps every step's logits of each mode in host memory.
		const most = 1 << 28
		for _, b := range batches {
			if n := b * shape.Vocab * r.steps; n > most {
				return r, usageError("--compare-modes at batch %d: %d sequences x %d logits x %d steps = %d values a mode, more than the %d it keeps; use a smaller --batch or --steps", b, b, shape.Vocab, r.steps, n, most)
			}
		}
	}

	req := sweepRequest{axes: sweep.Axes{Models: []model.Shape{shape}, Batches: batches, Contexts: contexts}, datasheet: c.String("gpu"),
		reserve: 0.1, progress: "none", telemetry: telemetry.DefaultInterval, peer: cgo.LinearAuto, step: sweep.StepBoth, e2eSteps: r.steps}
	if err := req.axes.Validate(); err != nil {
		return r, usageError("%v", err)
	}
	if req.datasheet != "auto" && req.datasheet != "none" {
		if _, err := roofline.LookupGPU(req.datasheet); err != nil {
			return r, usageError("--gpu: %v", err)
		}
	}
	b, err := parseBackendFlags(c)
	if err != nil {
		return r, err
	}
	req.backend, req.gpu = b.backend, fmt.Sprint(b.device)
	req.options = measure.DefaultOptions()
	if req.options.Timing, err = parseTimingFlags(c, "timing rule"); err != nil {
		return r, err
	}
	req.options.Seed, req.options.MaxRotateBytes = c.Uint64("seed"), c.Uint64("max-rotate-bytes")
	if req.probeBytes = c.Uint64("probe-bytes"); req.probeBytes%16 != 0 {
		return r, usageError("--probe-bytes %d: want a multiple of 16", req.probeBytes)
	}
	req.out = c.String("out")
	r.keepOut = req.out != ""
	if r.keepOut {
		if err := checkOutDir(req.out); err != nil {
			return r, err
		}
		for _, name := range []string{sweep.InfoFile, sweep.ResultsFile} {
			if _, err := os.Stat(filepath.Join(req.out, name)); err == nil {
				return r, usageError("--out %s already holds a run: choose another directory (or continue it with `decodebench sweep --resume %s --step both`)", req.out, req.out)
			}
		}
	}
	r.sweep = req
	return r, nil
}

// stepModes is what --mode asks of lib: "" is both where the library has graphs, else eager;
// a mode the library cannot run is a usage error.
func stepModes(mode string, lib *cgo.Library) ([]step.Mode, string, error) {
	graphs := lib.HasFunction("db_graph_begin") && lib.HasFunction("db_add_i32")
	if mode == "" {
		if graphs {
			return step.Modes, "", nil
		}
		return []step.Mode{step.Eager}, fmt.Sprintf("%s has no CUDA graphs (db_graph_begin, db_add_i32): eager mode only", lib.Path()), nil
	}
	modes, _ := step.ParseMode(mode)
	if slices.Contains(modes, step.Graph) && !graphs {
		return nil, "", usageError("--mode %s: %s cannot capture graphs (no db_graph_begin or db_add_i32); use --mode eager", mode, lib.Path())
	}
	return modes, "", nil
}

func stepAction(c *cli.Context) error {
	r, err := parseStep(c)
	if err != nil {
		return err
	}
	if c.Bool("plan") {
		return printStepPlans(c.App.Writer, r)
	}
	req := r.sweep
	// The library is opened (not the device) to know the modes it can run.
	lib, err := cgo.Open(req.backend)
	if err != nil {
		return failure("%v", err)
	}
	modes, modeNote, err := stepModes(r.mode, lib)
	if err != nil {
		return err
	}
	if m := req.axes.Models[0]; m.IsMoE() && !lib.HasFunction("db_grouped_linear") {
		return usageError("model %s: %s has no db_grouped_linear, which the experts' linears of a step need", m, lib.Path())
	}
	if m := req.axes.Models[0]; m.IsMLA() {
		for _, fn := range []string{"db_grouped_linear", "db_mla_rope_append", "db_mla_attention"} {
			if !lib.HasFunction(fn) {
				return usageError("model %s: %s has no %s, which a multi-head latent attention step needs", m, lib.Path(), fn)
			}
		}
	}
	if req.out == "" {
		dir, err := os.MkdirTemp("", "decodebench-step-")
		if err != nil {
			return failure("making a run directory: %v", err)
		}
		defer os.RemoveAll(dir)
		req.out = filepath.Join(dir, "run")
	}
	ctx, stop := signal.NotifyContext(context.Background(), interruptSignals...) // SIGPIPE too: `| head -1` finishes run.json
	defer stop()

	target, err := openSweepTarget(req)
	if err != nil {
		return err
	}
	defer target.close()
	stderr := c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	fmt.Fprintf(stderr, "step on the %s\n", describeDevice(target.lib, target.dev))
	if modeNote != "" {
		fmt.Fprintln(stderr, "decodebench: note: "+modeNote)
	}
	if target.lib.Emulated() {
		fmt.Fprintf(stderr, "*** %s ***\n", emulatedWarning)
	}
	if target.lib.Emulated() {
		// The emulator runs a tiny step in tens of milliseconds and its times are no speed:
		// one sample of everything unless the timing flags say otherwise.
		if !slices.ContainsFunc([]string{"warmup", "min-samples", "min-time", "max-time", "target-spread"}, c.IsSet) {
			req.options.Timing = emulatorTiming
			fmt.Fprintln(stderr, "decodebench: note: on the emulator every measurement takes one sample (the timing flags set another rule)")
		}
		if !c.IsSet("probe-bytes") {
			req.probeBytes = emulatorProbeBytes
		}
	}
	if ds := target.datasheet; ds.BandwidthBytesPerSec > 0 || ds.FLOPsPerSec > 0 {
		req.options.Datasheet = measure.Datasheet{BytesPerSec: ds.BandwidthBytesPerSec, FLOPsPerSec: ds.FLOPsPerSec, Source: target.dsSource}
	}
	info := target.runInfo(req, os.Args, setFlags(c))
	rows := &stepRows{w: c.App.Writer, stderr: stderr, format: r.format}
	var measurer sweep.Measurer = sweep.DeviceMeasurer{Device: target.dev, Options: req.options}
	if sweepMeasurerHook != nil {
		measurer = sweepMeasurerHook(measurer)
	}
	runner := &sweep.Runner{
		Info: &info, Measurer: measurer,
		Telemetry:       telemetry.Sampler{Source: target.telemetrySource(), Interval: req.telemetry},
		Ceilings:        sweep.Ceilings{Datasheet: target.datasheet},
		MemoryBytes:     info.Method.MemoryBytes,
		ReserveFraction: req.reserve,
		ProbeBytes:      req.probeBytes,
		Cost:            &sweep.CostModel{Timing: req.options.Timing, SetupSeconds: sweep.DefaultSetupSeconds},
		Progress:        rows,
		Step:            sweep.StepBoth,
		E2E:             sweep.E2EOptions{Steps: r.steps, Modes: modes, Seed: req.options.Seed, CompareModes: r.compare},
	}
	// The limit sweep holds a configuration to (Runner.StepFits), before any step is built:
	// a config of 1e7 layers is refused here, not by Go running out of memory.
	if err := checkAnythingFits(runner, req.axes.Configs(), target.lib.Emulated()); err != nil {
		return err
	}
	dir, err := sweep.Create(req.out, info)
	if err != nil {
		return failure("%v", err)
	}
	defer dir.Close()
	runner.Dir = dir
	res, err := runner.Run(ctx, req.axes.Configs(), sweep.Prior{})
	if err != nil {
		return failure("step stopped: %v", err)
	}
	if err := rows.finish(target.lib.Emulated()); err != nil {
		return err
	}
	if r.keepOut {
		fmt.Fprintf(stderr, "run directory: %s (%s holds the step records)\n", req.out, sweep.StepsFile)
	}
	switch {
	case res.Interrupted:
		return cli.Exit(fmt.Sprintf("interrupted: %d configuration(s) measured", res.Steps), exitInterrupted)
	case res.DeviceLost != nil:
		return failure("%v", res.DeviceLost)
	case res.StepsFailed > 0 || res.Failed > 0:
		return failure("%d whole step(s) and %d composed step(s) failed", res.StepsFailed, res.Failed)
	case res.StepsOK == 0:
		return failure("%s", noStepMeasured(rows.records))
	}
	return nil
}

// noStepMeasured says why a run has no verified, timed whole step, naming the first
// configuration's reason.
func noStepMeasured(recs []step.Record) string {
	msg := fmt.Sprintf("no whole step could be built, fit and be verified (%d configuration(s))", len(recs))
	for _, r := range recs {
		if r.Reason != "" {
			return msg + fmt.Sprintf("; the first, B=%d S=%d: %s: %s", r.Batch, r.Context, r.Status, r.Reason)
		}
	}
	return msg
}

// printStepPlans writes each configuration's program: its calls, one line per kind (the
// same op and sizes at every layer it runs), and its memory (the workspace comes on top,
// known once the device plans the calls). With --out, DIR/plan.txt has every call in launch
// order.
func printStepPlans(w io.Writer, r stepRequest) error {
	var full strings.Builder
	for _, cfg := range r.sweep.axes.Configs() {
		// No device here to fit it to; sweep's count limit still holds before a program is
		// built call by call (a config of 1e7 layers once ran Go out of memory here).
		if why := sweep.StepCallsWithin(cfg); why != "" {
			return usageError("%s batch %d context %d: %s", cfg.Model.Name, cfg.Batch, cfg.Context, why)
		}
		p, err := step.New(step.Config{Model: cfg.Model, Batch: cfg.Batch, Context: cfg.Context, Steps: r.steps, Seed: r.sweep.options.Seed})
		if err != nil {
			return usageError("%v", err)
		}
		ops := p.Ops(func(string) uint64 { return 0 })
		head := fmt.Sprintf("%s B=%d S=%d, %d steps: %d calls a step; weights %s, KV caches %s (%d tokens a sequence), all buffers %s (the workspace comes on top)\n",
			cfg.Model, cfg.Batch, cfg.Context, r.steps, len(ops), units.Bytes(float64(p.WeightBytes())), units.Bytes(float64(p.CacheBytes())),
			p.Capacity(), units.Bytes(float64(p.BufferBytes())))
		for _, n := range p.Notes {
			head += "  note: " + n + "\n"
		}
		fmt.Fprint(w, head)
		writePlan(w, ops, false)
		full.WriteString(head)
		writePlan(&full, ops, true)
	}
	if r.sweep.out == "" {
		fmt.Fprintln(w, "(each line: calls a step x where, then the call; --out DIR writes every call in launch order to DIR/"+PlanFile+")")
		return nil
	}
	if err := os.MkdirAll(r.sweep.out, 0o755); err != nil {
		return failure("%v", err)
	}
	path := filepath.Join(r.sweep.out, PlanFile)
	if err := os.WriteFile(path, []byte(full.String()), 0o644); err != nil {
		return failure("%v", err)
	}
	fmt.Fprintln(w, "every call in launch order: "+path)
	return nil
}

// stepRows prints one line per configuration as its step record is written (the JSON record
// with --format jsonl), and keeps the records for the table or the other formats at the end.
type stepRows struct {
	w, stderr io.Writer
	format    string
	records   []step.Record
}

// finish writes the records in the --format asked: the table, or every record's fields.
func (p *stepRows) finish(emulated bool) error {
	switch p.format {
	case format.Table:
		writeStepTable(p.w, p.records, emulated)
	case format.JSONL: // already written, one record as each finished
	default:
		rows, err := format.FromRecords(p.records)
		if err != nil {
			return failure("encoding the step records: %v", err)
		}
		return format.Write(p.w, p.format, rows)
	}
	return nil
}

func (p *stepRows) Start(int, float64)                  {}
func (p *stepRows) Measuring(int, int, string, float64) {}
func (p *stepRows) Recorded(sweep.Record, int, int, float64) {
}
func (p *stepRows) Note(msg string) { fmt.Fprintln(p.stderr, "decodebench: "+msg) }
func (p *stepRows) Stop()           {}

func (p *stepRows) RecordedStep(r step.Record) {
	p.records = append(p.records, r)
	if p.format != format.Table {
		if p.format != format.JSONL {
			return
		}
		line, err := json.Marshal(r)
		if err == nil {
			fmt.Fprintln(p.w, string(line))
		}
		return
	}
	fmt.Fprintln(p.w, stepLine(r))
}

// stepLine is a configuration's row as it finishes, in the manner of llama-bench's tg rows:
// the model, the test (tgT at batch and context) and the rate of each step time.
func stepLine(r step.Record) string {
	head := fmt.Sprintf("%s B=%d S=%d tg%d", r.Model, r.Batch, r.Context, r.Steps)
	if (r.WeightFormat != "" && r.WeightFormat != r.DType) || (r.KVDType != "" && r.KVDType != r.DType) {
		head += fmt.Sprintf(" [%s weights, %s KV cache]", r.WeightFormat, r.KVDType)
	}
	if r.TP > 1 {
		head += fmt.Sprintf(" tp%d (one shard, no all-reduce)", r.TP)
	}
	if r.Status == measure.StatusSkipped || (r.Status != measure.StatusOK && !r.Graph.OK() && !r.Eager.OK()) {
		return head + ": " + strings.ToUpper(r.Status) + ": " + r.Reason
	}
	parts := []string{head + ":"}
	for _, t := range []struct {
		name string
		st   step.StepTime
	}{{"graph", r.Graph}, {"eager", r.Eager}, {"composed", r.Composed}} {
		if t.st.OK() {
			parts = append(parts, fmt.Sprintf("%s %.4g ms (%.4g tok/s per request, %.4g per server)", t.name, t.st.StepSeconds*1e3, t.st.PerRequestTokensPerSec, t.st.PerServerTokensPerSec))
		} else if t.st.Status != measure.StatusNotMeasured {
			parts = append(parts, t.name+" "+t.st.Status)
		}
	}
	s := strings.Join(parts, " ")
	if v := r.Verification; v.Verified {
		s += fmt.Sprintf(" [verified: %d/%d layers, %d/%d sequences, S=%d, %d steps]", v.Layers, v.ModelLayers, v.Sequences, v.Batch, v.Context, v.Steps)
		if len(v.Unchecked) > 0 {
			s += " [not launched by the check: " + strings.Join(v.Unchecked, ", ") + "]"
		}
	}
	if r.ModesAgree != nil && !*r.ModesAgree {
		s += " [GRAPH AND EAGER DIFFER]"
	}
	if r.Throttled {
		s += " [THROTTLED]"
	}
	if r.Emulated {
		s += " (emulated)"
	}
	return s
}

// writeStepTable is the summary: per configuration the three step times, the bound, the
// rates, the roofline fractions and the two gaps. Decimal units; ms = 1e-3 s.
func writeStepTable(w io.Writer, recs []step.Record, emulated bool) {
	if len(recs) == 0 {
		return
	}
	ms := func(t step.StepTime) string {
		if !t.OK() {
			return "-"
		}
		return fmt.Sprintf("%.4g", t.StepSeconds*1e3)
	}
	pct := func(f float64) string {
		if f == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", f*100)
	}
	fmt.Fprintln(w)
	if recs[0].TP > 1 {
		fmt.Fprintf(w, "tensor parallel %d: one GPU's shard, the all-reduces left out\n", recs[0].TP)
	}
	header := []string{"model", "B", "S", "graph ms", "eager ms", "composed ms", "bound ms", "tok/s per request", "tok/s per server", "graph MBU", "launch gap ms (share)", "run-together gap ms (share)", "verified"}
	var rows [][]string
	for _, r := range recs {
		bound := "-"
		if r.BoundSecondsMeasured > 0 {
			bound = fmt.Sprintf("%.4g", r.BoundSecondsMeasured*1e3)
		}
		best, _, ok := r.Best()
		perReq, perServer := "-", "-"
		if ok {
			perReq, perServer = fmt.Sprintf("%.4g", best.PerRequestTokensPerSec), fmt.Sprintf("%.4g", best.PerServerTokensPerSec)
		}
		gap := func(sec, share float64, have bool) string {
			if !have {
				return "-"
			}
			return fmt.Sprintf("%.3g (%s)", sec*1e3, pct(share))
		}
		rows = append(rows, []string{r.Model, fmt.Sprint(r.Batch), fmt.Sprint(r.Context),
			ms(r.Graph), ms(r.Eager), ms(r.Composed), bound, perReq, perServer, pct(r.Graph.RooflineFractionMeasured),
			gap(r.LaunchGapSeconds, r.LaunchGapShare, r.Graph.OK() && r.Eager.OK()),
			gap(r.RunTogetherSeconds, r.RunTogetherShare, r.Graph.OK() && r.Composed.OK()), r.Verification.Short()})
	}
	format.Markdown(w, header, rows, nil)
	fmt.Fprintln(w, "tok/s: of the graph step, else the eager one; bound: the roofline against the measured ceiling; MBU = bound / step; launch gap = eager - graph (share of eager); run-together gap = graph - composed (share of graph)")
	fmt.Fprintln(w, "verified: before any sample, each mode's steps were run untimed and every logit and greedy token checked against the float64 forward pass, at the model's shapes with the first layer of each kind (layers checked / the model's), the batch on the device of which seq sequences recomputed, context S and the steps shown; a step that disagrees is failed and never timed")
	if emulated {
		fmt.Fprintln(w, "EMULATED: the kernels ran on the CPU emulator; these times are not a speed.")
	}
}
