package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench bench`: every measurement verifies the kernel against bench/ref, then times it
// with bench/measure (device events, operands rotated past L2, the sampling rule of
// timing.Default), prints a table row and appends a JSON Lines record as soon as it is done.
// This file holds the command, the shared flags and the session (device, records, printing);
// bench_linear.go, bench_attention.go and bench_probe.go hold the subcommands.

const emulatedWarning = "EMULATED: these times come from the CPU emulator (--backend emu) and are NOT GPU performance; use them only to check that the command runs"

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "verify, then time kernels on the GPU: decode linear layers, attention, bandwidth and compute probes",
		Description: "Each measurement checks the kernel's output against the float64 reference first (a wrong or\n" +
			"NaN result is recorded as failed, never timed), then times it with CUDA events after warm-up,\n" +
			"rotating weights and KV caches through enough copies that they come from HBM, not L2. Each\n" +
			"sample times enough back-to-back calls to span 200 µs. Units are decimal (1 GB/s = 1e9 B/s,\n" +
			"1 TFLOP/s = 1e12 FLOP/s). Exit status 1 when any measurement failed, 2 for bad input.",
		Subcommands:  []*cli.Command{benchLinearCommand(), benchAttentionCommand(), benchProbeCommand()},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("bench: unknown kernel %q (want linear, attention or probe)", c.Args().First())
			}
			return usageError("bench needs a kernel, linear, attention or probe: e.g. `decodebench bench linear --model llama3-8b --batch 1,16`")
		},
	}
}

// ---- flags and options shared by every bench command ----------------------------------------

func benchFlags() []cli.Flag {
	flags := []cli.Flag{
		outFlag("append one JSON Lines record per measurement to this file, each written as soon as it is measured"),
		formatFlag(format.All...),
		jsonAlias(format.JSONL),
		seedFlag(""),
		&cli.Float64Flag{Name: "rotate-factor", Value: measure.DefaultRotateFactor,
			Usage: "rotate weights and KV caches through copies of at least this many times the L2 size"},
	}
	flags = append(flags, timingFlags(timingOptions{tuning: true, oldSeconds: true})...)
	return append(flags, backendFlags()...)
}

// shapeFlags are the extra flags of the linear and attention commands.
func shapeFlags(batchDefault string) []cli.Flag {
	return append(modelFlags(),
		batchFlag(batchDefault, "batch sizes, LIST syntax: "+axes.Syntax),
		&cli.StringFlag{Name: "dtype",
			Usage: "bf16 or fp16 (default: the model's, else bf16)"},
		&cli.Float64Flag{Name: "read-ceiling-gbps",
			Usage: "the read ceiling in GB/s to compare with; 0 measures it with the read probe first"},
		&cli.Float64Flag{Name: "max-gb",
			Usage: "skip shapes whose buffers (one copy) exceed this many GB; 0 = whatever fits on the device"})
}

// benchSettings are the validated shared flags.
type benchSettings struct {
	backend  backendChoice
	opts     measure.Options
	outPath  string
	format   string  // --format; every format but table keeps the table's prose off stdout
	asJSON   bool    // --format is not table: stdout carries only the records
	ceiling  float64 // read ceiling in bytes/s, 0 = measure it
	maxBytes float64 // 0 = no limit
}

func parseBenchSettings(c *cli.Context, shapeCmd bool) (benchSettings, error) {
	s := benchSettings{outPath: c.String("out")}
	var err error
	if s.format, err = parseFormat(c); err != nil {
		return s, err
	}
	s.asJSON = s.format != format.Table
	if s.backend, err = parseBackendFlags(c); err != nil {
		return s, err
	}
	s.opts = measure.DefaultOptions()
	s.opts.Seed = c.Uint64("seed")
	s.opts.RotateFactor = c.Float64("rotate-factor")
	if s.opts.Timing, err = parseTimingFlags(c, "timing flags"); err != nil {
		return s, err
	}
	if f := s.opts.RotateFactor; !(f > 0) || math.IsInf(f, 0) {
		return s, usageError("--rotate-factor %g: want a number > 0", f)
	}
	if shapeCmd {
		ceiling, maxGB := c.Float64("read-ceiling-gbps"), c.Float64("max-gb")
		if !(ceiling >= 0) || math.IsInf(ceiling, 0) || !(maxGB >= 0) || math.IsInf(maxGB, 0) {
			return s, usageError("--read-ceiling-gbps %g and --max-gb %g: want 0 or a positive number", ceiling, maxGB)
		}
		s.ceiling, s.maxBytes = ceiling*1e9, maxGB*1e9
	}
	return s, nil
}

// parseBatches reads --batch within 1..most.
func parseBatches(c *cli.Context, most int, why string) ([]int, error) {
	batches, err := axes.ParseIntList(c.String("batch"))
	if err != nil {
		return nil, usageError("--batch: %v", err)
	}
	if last := batches[len(batches)-1]; last > most {
		return nil, usageError("--batch %d: %s take a batch of at most %d", last, why, most)
	}
	return batches, nil
}

// parseKernelDType reads --dtype, defaulting to the model's type when it is one the kernels run.
func parseKernelDType(c *cli.Context, modelType model.DType) (cgo.DType, error) {
	name := c.String("dtype")
	if name == "" {
		name = "bf16"
		if modelType == model.BF16 || modelType == model.FP16 {
			name = string(modelType)
		}
	}
	switch name {
	case "bf16", "bfloat16":
		return cgo.DTypeBF16, nil
	case "fp16", "float16", "half":
		return cgo.DTypeFP16, nil
	}
	return 0, usageError("--dtype %q: the kernels run bf16 or fp16", name)
}

// ---- the session: device, output, records ----------------------------------------------------

type benchSession struct {
	settings benchSettings
	lib      *cgo.Library
	dev      *cgo.Device
	device   string
	stdout   io.Writer
	stderr   io.Writer
	jsonl    *os.File
	failed   []string
	records  []benchRecord     // emitted, for the headline
	labels   []string          // each record's label
	ceiling  float64           // read ceiling in bytes/s
	sampler  telemetry.Sampler // NVML readings around each measurement (none on the emulator)
	nvml     *telemetry.NVML   // closed with the session
}

// openBench opens the output file (a bad path is a usage error, before any device work),
// then the device, and warns loudly under the emulator. check (nil: none) runs on the opened
// device before anything is printed or measured: a request the device cannot serve (forcing
// a variant it lacks) is then one line and exit 2.
func openBench(c *cli.Context, settings benchSettings, what string, check func(*cgo.Device) error) (*benchSession, error) {
	s := &benchSession{settings: settings, stdout: c.App.Writer, stderr: c.App.ErrWriter}
	if s.stderr == nil {
		s.stderr = os.Stderr
	}
	if settings.outPath != "" {
		if fi, err := os.Stat(settings.outPath); err == nil && fi.IsDir() {
			return nil, usageError("--out %s is a directory: bench appends JSON Lines to a file, e.g. --out %s", settings.outPath, filepath.Join(settings.outPath, "bench.jsonl"))
		}
		if err := os.MkdirAll(filepath.Dir(settings.outPath), 0o755); err != nil {
			return nil, usageError("--out %s: %v", settings.outPath, err)
		}
		f, err := os.OpenFile(settings.outPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, usageError("--out: %v", err)
		}
		s.jsonl = f
	}
	lib, dev, err := settings.backend.open()
	if err != nil {
		s.close()
		return nil, err
	}
	s.lib, s.dev, s.device = lib, dev, "?"
	if check != nil {
		if err := check(dev); err != nil {
			s.close()
			return nil, err
		}
	}
	fmt.Fprintf(s.stderr, "bench %s on the %s\n", what, describeDevice(lib, dev))
	if props, err := dev.Props(); err == nil {
		s.device = props.Name
		s.openTelemetry(props)
	}
	if lib.Emulated() {
		fmt.Fprintf(s.stderr, "*** %s ***\n", emulatedWarning)
		if !settings.asJSON {
			fmt.Fprintf(s.stdout, "*** %s ***\n", emulatedWarning)
		}
	}
	return s, nil
}

// openTelemetry finds the device in NVML and samples its clocks, temperature, power and
// throttle reasons around each measurement. Without NVML (or on the emulator) records carry
// no telemetry, and stderr says why.
func (s *benchSession) openTelemetry(props cgo.DeviceProps) {
	if s.lib.Emulated() {
		return
	}
	match, err := matchCUDADevice(s.lib, s.dev.Index())
	if err == nil && match.dev == nil {
		err = errors.New(match.why)
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "no telemetry (clocks, power, throttling) in the records: %v\n", err)
		return
	}
	src, err := telemetry.OpenNVML(nvmlLibrary(), match.dev.UUID)
	if err != nil {
		fmt.Fprintf(s.stderr, "no telemetry (clocks, power, throttling) in the records: %v\n", err)
		return
	}
	s.nvml, s.sampler = src, telemetry.Sampler{Source: src}
}

// measure runs one measurement inside a telemetry window.
func (s *benchSession) measure(run func() measure.Outcome) (measure.Outcome, telemetry.Summary) {
	w := s.sampler.Start()
	o := run()
	return o, w.Stop()
}

func (s *benchSession) close() {
	if s.nvml != nil {
		s.nvml.Close()
	}
	if s.dev != nil {
		s.dev.Close()
	}
	if s.jsonl != nil {
		s.jsonl.Close()
	}
}

// finish is the command's exit: 1 when any measurement failed. It prints the headline first
// (on stderr in every --format but table, so that stdout holds only the records).
func (s *benchSession) finish() error {
	w := s.stdout
	if s.settings.asJSON {
		w = s.stderr
	}
	if s.settings.asJSON && s.settings.format != format.JSONL {
		rows, err := format.FromRecords(s.records)
		if err != nil {
			return failure("encoding the records: %v", err)
		}
		if err := format.Write(s.stdout, s.settings.format, rows); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	for _, line := range benchHeadline(s.device, s.lib.Emulated(), s.records, s.labels) {
		fmt.Fprintln(w, "  "+line)
	}
	if len(s.failed) > 0 {
		return failure("%d measurement(s) failed: %s", len(s.failed), strings.Join(s.failed, "; "))
	}
	return nil
}

// benchRecord is one JSON Lines record; its names are the documented output.
type benchRecord struct {
	Kind      string  `json:"kind"` // linear, attention, probe, launch
	Kernel    string  `json:"kernel"`
	Model     string  `json:"model,omitempty"`
	TP        int     `json:"tp,omitempty"`
	Batch     int     `json:"batch,omitempty"`
	StepBatch int     `json:"step_batch,omitempty"` // a mixture of experts: the decode batch whose expert call this is
	N         int     `json:"n,omitempty"`
	K         int     `json:"k,omitempty"`
	Groups    int     `json:"groups,omitempty"` // a grouped linear (MLA's q_absorb, v_absorb): its products of [batch x k] . [n x k]^T
	QHeads    int     `json:"q_heads,omitempty"`
	KVHeads   int     `json:"kv_heads,omitempty"`
	HeadDim   int     `json:"head_dim,omitempty"`
	Context   int     `json:"context,omitempty"`
	PageSize  int     `json:"page_size,omitempty"`
	Splits    int     `json:"splits,omitempty"`
	KVBytes   float64 `json:"kv_bytes,omitempty"`
	DType     string  `json:"dtype,omitempty"`
	// WeightFormat and GroupSize: a linear's quantized weights (DType is then the activations').
	WeightFormat string `json:"weight_format,omitempty"`
	GroupSize    int    `json:"group_size,omitempty"`
	Variant      string `json:"variant,omitempty"`
	SplitK       int    `json:"split_k,omitempty"`

	Probe               string  `json:"probe,omitempty"`
	BufferBytes         uint64  `json:"buffer_bytes,omitempty"`
	Iterations          int     `json:"iterations,omitempty"`
	DatasheetGBps       float64 `json:"datasheet_gbps,omitempty"`
	DatasheetTFLOPs     float64 `json:"datasheet_tflops,omitempty"`
	FractionOfDatasheet float64 `json:"fraction_of_datasheet,omitempty"`
	DatasheetSource     string  `json:"datasheet_source,omitempty"`

	// The times and rates of a measurement that did not run are left out, never written as 0.
	Status          string        `json:"status"`
	Reason          string        `json:"reason,omitempty"`
	MedianSeconds   float64       `json:"median_seconds,omitzero"`
	MinSeconds      float64       `json:"min_seconds,omitzero"`
	Q1Seconds       float64       `json:"q1_seconds,omitzero"`
	Q3Seconds       float64       `json:"q3_seconds,omitzero"`
	MaxSeconds      float64       `json:"max_seconds,omitzero"`
	Spread          float64       `json:"spread"`
	Samples         int           `json:"samples"`
	Converged       bool          `json:"converged"`
	RepsPerSample   int           `json:"reps_per_sample"`
	SamplesSeconds  []float64     `json:"samples_seconds,omitempty"`
	Bytes           float64       `json:"bytes"`
	FLOPs           float64       `json:"flops"`
	AchievedGBps    float64       `json:"achieved_gbps"`
	AchievedTFLOPs  float64       `json:"achieved_tflops"`
	ReadCeilingGBps float64       `json:"read_ceiling_gbps,omitempty"`
	FractionOfRead  float64       `json:"fraction_of_read_ceiling,omitempty"`
	Rotation        string        `json:"rotation"`
	RotationCopies  int           `json:"rotation_copies"`
	WorkingSetBytes float64       `json:"working_set_bytes"`
	Verified        bool          `json:"verified"`
	RelError        *jsonFloat    `json:"rel_error"` // null when an output was NaN or infinite
	NonFinite       int           `json:"non_finite,omitempty"`
	Tolerance       float64       `json:"tolerance"`
	VerifyChecked   int           `json:"verify_checked"`
	VerifyNote      string        `json:"verify_note,omitempty"`
	Plan            *measure.Plan `json:"plan,omitempty"`
	// With --peer: the peer's measurement of the same shape (cuBLAS), and PeerRatio = its median
	// / ours (> 1: ours is faster); PeerNote says why there is no ratio.
	Peer      *benchRecord `json:"peer,omitempty"`
	PeerRatio float64      `json:"peer_ratio,omitempty"`
	PeerNote  string       `json:"peer_note,omitempty"`
	// The launch baseline (kind launch): what one launch costs on this card.
	Launch *sweep.Launch `json:"launch,omitempty"`
	// NVML readings taken while the measurement ran (absent without NVML): a throttled
	// result may be slower than the card can do.
	Telemetry *telemetry.Summary `json:"telemetry,omitempty"`
	Throttled bool               `json:"throttled"`
	Emulated  bool               `json:"emulated"`
	Backend   string             `json:"backend"`
	Device    string             `json:"device"`
	Seed      uint64             `json:"seed"`
	Timing    string             `json:"timing"`
	Version   string             `json:"decodebench_version"`
	Time      string             `json:"time"`
}

// record fills the fields every kind shares from an Outcome.
func (s *benchSession) record(kind, kernel string, o measure.Outcome, tel telemetry.Summary) benchRecord {
	st, t := o.Stats, s.settings.opts.Timing
	r := benchRecord{
		Kind: kind, Kernel: kernel, Status: o.Status, Reason: o.Reason,
		MedianSeconds: st.Median, MinSeconds: st.Min, Q1Seconds: st.Q1, Q3Seconds: st.Q3, MaxSeconds: st.Max,
		Spread: st.Spread, Samples: len(st.Samples), Converged: st.Converged, RepsPerSample: o.RepsPerSample,
		SamplesSeconds: st.Samples, Bytes: o.Bytes, FLOPs: o.FLOPs,
		AchievedGBps: o.AchievedBytesPerSec / 1e9, AchievedTFLOPs: o.AchievedFLOPsPerSec / 1e12,
		Rotation: o.Rotation.Method, RotationCopies: o.Rotation.Copies, WorkingSetBytes: o.Rotation.WorkingSetBytes,
		Verified: o.Verification.Passed, RelError: relErrorOf(o.Verification), NonFinite: o.Verification.NonFinite, Tolerance: o.Verification.Tolerance,
		VerifyChecked: o.Verification.Checked, VerifyNote: o.Verification.Reason, Plan: planOf(o),
		Emulated: o.Emulated, Backend: s.lib.Name(), Device: s.device, Seed: s.settings.opts.Seed,
		Timing: fmt.Sprintf("warm-up %d; >= %d samples and %gs, then until spread < %g or %gs",
			t.Warmup, t.MinSamples, t.MinSeconds, t.TargetSpread, t.MaxSeconds),
		Version: version, Time: time.Now().UTC().Format(time.RFC3339),
	}
	if tel.Readings > 0 {
		r.Telemetry, r.Throttled = &tel, tel.Throttled
	}
	if s.ceiling > 0 && o.Status == measure.StatusOK && o.Bytes > 0 {
		r.ReadCeilingGBps, r.FractionOfRead = s.ceiling/1e9, o.AchievedBytesPerSec/s.ceiling
	}
	return r
}

// emit writes a record to --out (and to stdout at once with --format jsonl) and counts failures.
func (s *benchSession) emit(r benchRecord, label string) error {
	line, err := json.Marshal(r)
	if err != nil {
		return failure("encoding a record: %v", err)
	}
	line = append(line, '\n')
	if s.jsonl != nil {
		if _, err := s.jsonl.Write(line); err != nil {
			return failure("writing %s: %v", s.settings.outPath, err)
		}
	}
	if s.settings.format == format.JSONL { // each record as soon as it is measured
		if _, err := s.stdout.Write(line); err != nil {
			return err
		}
	}
	if r.Status == measure.StatusFailed {
		s.failed = append(s.failed, label+": "+r.Reason)
	}
	s.records, s.labels = append(s.records, r), append(s.labels, label)
	return nil
}

// progress says on stderr what was just measured.
func (s *benchSession) progress(i, n int, label string, o measure.Outcome) {
	what := o.Status
	if o.Status == measure.StatusOK {
		what = fmt.Sprintf("median %s, %.0f GB/s", micros(o.Stats.Median), o.AchievedBytesPerSec/1e9)
		if o.Bytes == 0 {
			what = fmt.Sprintf("median %s, %.2f TFLOP/s", micros(o.Stats.Median), o.AchievedFLOPsPerSec/1e12)
		}
		if o.Emulated {
			what += " (emulated: not performance)"
		}
	} else {
		what += ": " + o.Reason
	}
	fmt.Fprintf(s.stderr, "[%d/%d] %s: %s\n", i, n, label, what)
}

func micros(seconds float64) string { return fmt.Sprintf("%.1f µs", seconds*1e6) }

// note is the last column of a table row: why a measurement is not ok, or that it did not
// converge.
func note(o measure.Outcome, tel telemetry.Summary) string {
	var n string
	switch {
	case o.Status != measure.StatusOK:
		n = strings.ToUpper(o.Status) + ": " + o.Reason
	case !o.Stats.Converged:
		n = fmt.Sprintf("spread did not fall under the target in %.1fs", o.Stats.WallSeconds)
	}
	if tel.Throttled {
		n = strings.TrimSuffix("THROTTLED ("+strings.Join(tel.ThrottleText, ", ")+"); "+n, "; ")
	}
	return n
}

// begin says, for a --model run, how many measurements of what come, then takes the read
// ceiling and the launch baseline that every kernel table is set against.
func (s *benchSession) begin(modelName string, tp, n int, what string) error {
	if modelName != "" {
		s.say("model %s (tp %d): %d %s measurements\n", modelName, tp, n, what)
	}
	if err := s.measureCeiling(); err != nil {
		return err
	}
	return s.launchBaseline()
}

// missingKernel is the outcome of a job whose kernel the library lacks: skipped before any
// device work.
func missingKernel(kernel, missing string) measure.Outcome {
	return measure.Outcome{Kernel: kernel, Status: measure.StatusSkipped,
		Reason: "the kernel library has no kernel yet for " + missing + "; decodebench predict models it"}
}

// aboveMaxBytes is the outcome of a job that needs more device memory than --max-gb allows;
// skip is false where it fits (or no limit was given).
func (b benchSettings) aboveMaxBytes(kernel string, need float64) (o measure.Outcome, skip bool) {
	if b.maxBytes <= 0 || need <= b.maxBytes {
		return measure.Outcome{}, false
	}
	return measure.Outcome{Kernel: kernel, Status: measure.StatusSkipped,
		Reason: fmt.Sprintf("needs %s, above --max-gb %g", units.Bytes(need), b.maxBytes/1e9)}, true
}

// measureCeiling runs the read probe (unless --read-ceiling-gbps gave the ceiling), records it
// and says so.
func (s *benchSession) measureCeiling() error {
	if s.settings.ceiling > 0 {
		s.ceiling = s.settings.ceiling
		s.say("read ceiling: %.0f GB/s (given by --read-ceiling-gbps)\n", s.ceiling/1e9)
		return nil
	}
	fmt.Fprintln(s.stderr, "measuring the read ceiling with the read probe first")
	o, tel := s.measure(func() measure.Outcome {
		return measure.Probe(s.dev, measure.ProbeSpec{Kind: cgo.ProbeRead}, s.settings.opts)
	})
	if err := s.emit(s.probeRecord(o, tel, cgo.ProbeRead, datasheet{}), "probe read"); err != nil {
		return err
	}
	if o.Status != measure.StatusOK {
		s.say("read ceiling: unknown (the read probe %s: %s)\n", o.Status, o.Reason)
		return nil
	}
	s.ceiling = o.AchievedBytesPerSec
	if s.lib.Emulated() {
		// The emulator's probe reads host memory on the CPU, some hundreds of MB/s: no GPU's
		// ceiling, and "0 GB/s" at the precision of a GPU's.
		s.say("read ceiling: none on the emulator (its read probe ran at %s/s on the CPU; %% READ is of that, not of a GPU)\n",
			units.Bytes(s.ceiling))
		return nil
	}
	s.say("read ceiling: %.0f GB/s (read probe over %s, median of %d samples, measured now)\n",
		s.ceiling/1e9, units.Bytes(o.Bytes), len(o.Stats.Samples))
	return nil
}

// launchBaseline measures what one launch costs on this card (an empty kernel's
// launch-to-launch time, sweep.MeasureLaunch), once per process, prints it and writes it as a
// record of kind launch. A library without the empty kernel says so; nothing fails for that.
func (s *benchSession) launchBaseline() error {
	l := sweep.MeasureLaunch(s.dev)
	s.say("launch baseline: %s\n", l.Text())
	r := benchRecord{Kind: "launch", Kernel: "empty_kernel", Status: l.Status, Reason: l.Reason,
		MedianSeconds: l.SecondsPerLaunch, Samples: l.Samples, SamplesSeconds: l.SampleSecondsPerLaunch, Launch: &l,
		Emulated: l.Emulated, Backend: s.lib.Name(), Device: s.device, Version: version, Time: time.Now().UTC().Format(time.RFC3339)}
	if l.Status == measure.StatusOK && len(l.SampleSecondsPerLaunch) > 0 {
		r.MinSeconds, r.MaxSeconds = slices.Min(l.SampleSecondsPerLaunch), slices.Max(l.SampleSecondsPerLaunch)
		r.Converged = true
	}
	return s.emit(r, "launch baseline")
}

// parsePeer reads --peer: empty or none (no peer), or cublas (LinearCUBLAS).
func parsePeer(name string) (cgo.LinearVariant, error) {
	switch name {
	case "", "none":
		return cgo.LinearAuto, nil
	case "cublas":
		return cgo.LinearCUBLAS, nil
	}
	return 0, usageError("--peer %q: want cublas (cuBLASLt, measured beside our kernels the same way) or none", name)
}

// say prints a line of the table's preamble (not with --json).
func (s *benchSession) say(format string, a ...any) {
	if !s.settings.asJSON {
		fmt.Fprintf(s.stdout, format, a...)
	}
}

// percent is a fraction as a table cell, "-" when unknown (0).
func percent(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// planOf is the outcome's plan, nil when nothing was planned.
func planOf(o measure.Outcome) *measure.Plan {
	if o.Plan == (measure.Plan{}) {
		return nil
	}
	return &o.Plan
}
