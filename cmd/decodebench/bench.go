package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench bench`: every measurement verifies the kernel against bench/ref, then times it
// with bench/measure (device events, operands rotated past L2, the sampling rule of
// design.md), prints a table row and appends a JSON Lines record as soon as it is done.

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
	d := timing.Default
	return append([]cli.Flag{
		&cli.StringFlag{Name: "out", EnvVars: []string{"DECODEBENCH_BENCH_OUT"}, TakesFile: true,
			Usage: "append one JSON Lines record per measurement to this file, each written as soon as it is measured"},
		&cli.BoolFlag{Name: "json", EnvVars: []string{"DECODEBENCH_JSON"}, Usage: "print the JSON Lines records instead of a table"},
		&cli.Uint64Flag{Name: "seed", Value: 1, EnvVars: []string{"DECODEBENCH_SEED"}, Usage: "seed of the input hash"},
		&cli.IntFlag{Name: "warmup", Value: d.Warmup, EnvVars: []string{"DECODEBENCH_WARMUP"}, Usage: "untimed samples before sampling"},
		&cli.IntFlag{Name: "min-samples", Value: d.MinSamples, EnvVars: []string{"DECODEBENCH_MIN_SAMPLES"}, Usage: "take at least this many samples"},
		&cli.Float64Flag{Name: "min-seconds", Value: d.MinSeconds, EnvVars: []string{"DECODEBENCH_MIN_SECONDS"}, Usage: "and sample for at least this long"},
		&cli.Float64Flag{Name: "target-spread", Value: d.TargetSpread, EnvVars: []string{"DECODEBENCH_TARGET_SPREAD"},
			Usage: "then stop once (Q3 - Q1) / median falls under this"},
		&cli.Float64Flag{Name: "max-seconds", Value: d.MaxSeconds, EnvVars: []string{"DECODEBENCH_MAX_SECONDS"},
			Usage: "or once this long has passed (the record says it did not converge)"},
		&cli.Float64Flag{Name: "rotate-factor", Value: measure.DefaultRotateFactor, EnvVars: []string{"DECODEBENCH_ROTATE_FACTOR"},
			Usage: "rotate weights and KV caches through copies of at least this many times the L2 size"},
	}, backendFlags()...)
}

// shapeFlags are the extra flags of the linear and attention commands.
func shapeFlags(batchDefault string) []cli.Flag {
	return append(modelFlags(),
		&cli.StringFlag{Name: "batch", Value: batchDefault, EnvVars: []string{"DECODEBENCH_BATCH"},
			Usage: "batch sizes, LIST syntax: " + axes.Syntax},
		&cli.StringFlag{Name: "dtype", EnvVars: []string{"DECODEBENCH_DTYPE"},
			Usage: "bf16 or fp16 (default: the model's, else bf16)"},
		&cli.Float64Flag{Name: "read-ceiling-gbps", EnvVars: []string{"DECODEBENCH_READ_CEILING_GBPS"},
			Usage: "the read ceiling in GB/s to compare with; 0 measures it with the read probe first"},
		&cli.Float64Flag{Name: "max-gb", EnvVars: []string{"DECODEBENCH_MAX_GB"},
			Usage: "skip shapes whose buffers (one copy) exceed this many GB; 0 = whatever fits on the device"})
}

// benchSettings are the validated shared flags.
type benchSettings struct {
	backend  backendChoice
	opts     measure.Options
	outPath  string
	asJSON   bool
	ceiling  float64 // read ceiling in bytes/s, 0 = measure it
	maxBytes float64 // 0 = no limit
}

func parseBenchSettings(c *cli.Context, shapeCmd bool) (benchSettings, error) {
	s := benchSettings{outPath: c.String("out"), asJSON: c.Bool("json")}
	var err error
	if s.backend, err = parseBackendFlags(c); err != nil {
		return s, err
	}
	s.opts = measure.DefaultOptions()
	s.opts.Seed = c.Uint64("seed")
	s.opts.RotateFactor = c.Float64("rotate-factor")
	s.opts.Timing = timing.Config{Warmup: c.Int("warmup"), MinSamples: c.Int("min-samples"), MinSeconds: c.Float64("min-seconds"),
		TargetSpread: c.Float64("target-spread"), MaxSeconds: c.Float64("max-seconds")}
	if err := s.opts.Timing.Validate(); err != nil {
		return s, usageError("timing flags: %v", err)
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
	ceiling  float64           // read ceiling in bytes/s
	sampler  telemetry.Sampler // NVML readings around each measurement (none on the emulator)
	nvml     *telemetry.NVML   // closed with the session
}

// openBench opens the output file (a bad path is a usage error, before any device work),
// then the device, and warns loudly under the emulator.
func openBench(c *cli.Context, settings benchSettings, what string) (*benchSession, error) {
	s := &benchSession{settings: settings, stdout: c.App.Writer, stderr: c.App.ErrWriter}
	if s.stderr == nil {
		s.stderr = os.Stderr
	}
	if settings.outPath != "" {
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
	sys, err := gpuinfo.Open()
	if err != nil {
		fmt.Fprintf(s.stderr, "no telemetry (clocks, power, throttling) in the records: %v\n", err)
		return
	}
	uuid, why := nvmlDeviceFor(sys.Devices, props, s.dev.Index())
	if uuid == "" {
		fmt.Fprintf(s.stderr, "no telemetry (clocks, power, throttling) in the records: %s\n", why)
		return
	}
	src, err := telemetry.OpenNVML(nvml.New(), uuid)
	if err != nil {
		fmt.Fprintf(s.stderr, "no telemetry (clocks, power, throttling) in the records: %v\n", err)
		return
	}
	s.nvml, s.sampler = src, telemetry.Sampler{Source: src}
}

// nvmlDeviceFor picks the NVML device that is the backend's device index: the only one with
// its name and memory size, else the one at the same index if its name matches (CUDA may
// number devices fastest first, NVML by PCI bus).
func nvmlDeviceFor(devs []gpuinfo.Device, props cgo.DeviceProps, index int) (uuid, why string) {
	var same []gpuinfo.Device
	for _, d := range devs {
		if d.Name == props.Name && math.Abs(float64(d.MemoryTotalBytes)-float64(props.MemTotalBytes)) <= 0.02*float64(props.MemTotalBytes) {
			same = append(same, d)
		}
	}
	switch {
	case len(same) == 1:
		return same[0].UUID, ""
	case len(same) > 1 && index < len(devs) && devs[index].Name == props.Name:
		return devs[index].UUID, ""
	}
	return "", fmt.Sprintf("cannot tell which of NVML's %d GPU(s) is %q (device %d)", len(devs), props.Name, index)
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

// finish is the command's exit: 1 when any measurement failed.
func (s *benchSession) finish() error {
	if len(s.failed) > 0 {
		return failure("%d measurement(s) failed: %s", len(s.failed), strings.Join(s.failed, "; "))
	}
	return nil
}

// benchRecord is one JSON Lines record; its names are the documented output.
type benchRecord struct {
	Kind      string  `json:"kind"` // linear, attention, probe
	Kernel    string  `json:"kernel"`
	Model     string  `json:"model,omitempty"`
	TP        int     `json:"tp,omitempty"`
	Batch     int     `json:"batch,omitempty"`
	StepBatch int     `json:"step_batch,omitempty"` // a mixture of experts: the decode batch whose expert call this is
	N         int     `json:"n,omitempty"`
	K         int     `json:"k,omitempty"`
	QHeads    int     `json:"q_heads,omitempty"`
	KVHeads   int     `json:"kv_heads,omitempty"`
	HeadDim   int     `json:"head_dim,omitempty"`
	Context   int     `json:"context,omitempty"`
	PageSize  int     `json:"page_size,omitempty"`
	Splits    int     `json:"splits,omitempty"`
	KVBytes   float64 `json:"kv_bytes,omitempty"`
	DType     string  `json:"dtype,omitempty"`
	Variant   string  `json:"variant,omitempty"`
	SplitK    int     `json:"split_k,omitempty"`

	Probe               string  `json:"probe,omitempty"`
	BufferBytes         uint64  `json:"buffer_bytes,omitempty"`
	Iterations          int     `json:"iterations,omitempty"`
	DatasheetGBps       float64 `json:"datasheet_gbps,omitempty"`
	DatasheetTFLOPs     float64 `json:"datasheet_tflops,omitempty"`
	FractionOfDatasheet float64 `json:"fraction_of_datasheet,omitempty"`
	DatasheetSource     string  `json:"datasheet_source,omitempty"`

	Status          string         `json:"status"`
	Reason          string         `json:"reason,omitempty"`
	MedianSeconds   float64        `json:"median_seconds"`
	MinSeconds      float64        `json:"min_seconds"`
	Q1Seconds       float64        `json:"q1_seconds"`
	Q3Seconds       float64        `json:"q3_seconds"`
	MaxSeconds      float64        `json:"max_seconds"`
	Spread          float64        `json:"spread"`
	Samples         int            `json:"samples"`
	Converged       bool           `json:"converged"`
	RepsPerSample   int            `json:"reps_per_sample"`
	SamplesSeconds  []float64      `json:"samples_seconds,omitempty"`
	Bytes           float64        `json:"bytes"`
	FLOPs           float64        `json:"flops"`
	AchievedGBps    float64        `json:"achieved_gbps"`
	AchievedTFLOPs  float64        `json:"achieved_tflops"`
	ReadCeilingGBps float64        `json:"read_ceiling_gbps,omitempty"`
	FractionOfRead  float64        `json:"fraction_of_read_ceiling,omitempty"`
	Rotation        string         `json:"rotation"`
	RotationCopies  int            `json:"rotation_copies"`
	WorkingSetBytes float64        `json:"working_set_bytes"`
	Verified        bool           `json:"verified"`
	RelError        jsonFloat      `json:"rel_error"`
	Tolerance       float64        `json:"tolerance"`
	VerifyChecked   int            `json:"verify_checked"`
	VerifyNote      string         `json:"verify_note,omitempty"`
	Plan            map[string]any `json:"plan,omitempty"`
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
		Verified: o.Verification.Passed, RelError: jsonFloat(o.Verification.RelError), Tolerance: o.Verification.Tolerance,
		VerifyChecked: o.Verification.Checked, VerifyNote: o.Verification.Reason, Plan: o.Plan,
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

// emit writes a record to --out (and to stdout with --json) and counts failures.
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
	if s.settings.asJSON {
		if _, err := s.stdout.Write(line); err != nil {
			return err
		}
	}
	if r.Status == measure.StatusFailed {
		s.failed = append(s.failed, label+": "+r.Reason)
	}
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
	s.say("read ceiling: %.0f GB/s (read probe over %s, median of %d samples, measured now)\n",
		s.ceiling/1e9, humanBytes(o.Bytes), len(o.Stats.Samples))
	return nil
}

// say prints a line of the table's preamble (not with --json).
func (s *benchSession) say(format string, a ...any) {
	if !s.settings.asJSON {
		fmt.Fprintf(s.stdout, format, a...)
	}
}

// ---- linear ------------------------------------------------------------------------------------

func benchLinearCommand() *cli.Command {
	return &cli.Command{
		Name:  "linear",
		Usage: "time the decode linear layers of a model (or one N x K shape) at each batch size",
		UsageText: "decodebench bench linear (--model NAME [--tp N] | --n N --k K) [--batch LIST] [--dtype bf16|fp16] " +
			"[--variant auto|gemv|mma] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]\n\n   LIST syntax: " + axes.Syntax,
		Description: "With --model, every distinct linear shape of one decode step (fused QKV, O, fused gate/up,\n" +
			"down, LM head; routers and experts for a mixture of experts) at each batch size. The read\n" +
			"probe runs first: % READ is the achieved bandwidth over that measured ceiling.",
		Flags: append(append(shapeFlags("1-256*2"),
			&cli.IntFlag{Name: "n", EnvVars: []string{"DECODEBENCH_N"}, Usage: "output features (rows of W), instead of --model"},
			&cli.IntFlag{Name: "k", EnvVars: []string{"DECODEBENCH_K"}, Usage: "input features, a positive multiple of 8, instead of --model"},
			&cli.StringFlag{Name: "variant", Value: "auto", EnvVars: []string{"DECODEBENCH_VARIANT"}, Usage: "kernel: gemv, mma or auto"},
			&cli.IntFlag{Name: "split-k", EnvVars: []string{"DECODEBENCH_SPLIT_K"}, Usage: "K splits of the gemv variant; 0 lets the kernel choose"},
		), benchFlags()...),
		OnUsageError: onUsageError,
		Action:       benchLinearAction,
	}
}

// linearJob is one linear measurement of a command line.
type linearJob struct {
	name      string // qkv_proj, ..., or "linear" for --n/--k
	spec      measure.LinearSpec
	stepBatch int
}

func parseBenchLinear(c *cli.Context) (jobs []linearJob, modelName string, tp int, err error) {
	if c.NArg() > 0 {
		return nil, "", 0, usageError("bench linear takes no arguments (got %q)", c.Args().First())
	}
	batches, err := parseBatches(c, 256, "the linear kernels")
	if err != nil {
		return nil, "", 0, err
	}
	variant, err := cgo.ParseLinearVariant(c.String("variant"))
	if err != nil {
		return nil, "", 0, usageError("--variant: %v", err)
	}
	splitK := c.Int("split-k")
	switch {
	case splitK < 0:
		return nil, "", 0, usageError("--split-k %d: want 0 (the kernel chooses) or a count of splits >= 1", splitK)
	case variant == cgo.LinearMMA && splitK > 1:
		return nil, "", 0, usageError("--split-k %d: only the gemv variant splits K", splitK)
	}
	explicit := c.IsSet("n") || c.IsSet("k")
	haveModel := c.String("model") != "" || c.String("model-config") != ""
	switch {
	case explicit && haveModel:
		return nil, "", 0, usageError("give either --model (or --model-config) or --n and --k, not both")
	case explicit:
		n, k := c.Int("n"), c.Int("k")
		if n < 1 || n > math.MaxInt32 {
			return nil, "", 0, usageError("--n %d: want 1..%d output features", n, math.MaxInt32)
		}
		if k < 8 || k%8 != 0 || k > math.MaxInt32 {
			return nil, "", 0, usageError("--k %d: want a positive multiple of 8 (rows are read as 16-byte vectors)", k)
		}
		dtype, err := parseKernelDType(c, "")
		if err != nil {
			return nil, "", 0, err
		}
		for _, b := range batches {
			jobs = append(jobs, linearJob{name: "linear", stepBatch: b,
				spec: measure.LinearSpec{Batch: b, N: n, K: k, DType: dtype, Variant: variant, SplitK: splitK}})
		}
		return jobs, "", 0, nil
	case !haveModel:
		return nil, "", 0, usageError("bench linear needs --model NAME (or --model-config FILE), or --n N --k K")
	}
	shape, err := resolveModel(c)
	if err != nil {
		return nil, "", 0, err
	}
	dtype, err := parseKernelDType(c, shape.WeightDType)
	if err != nil {
		return nil, "", 0, err
	}
	// Kernel-major: each distinct shape at every batch, in launch order; shapes that coincide
	// within a step (same M, N, K) are measured once under both names.
	var order []string
	byName := map[string][]linearJob{}
	for _, b := range batches {
		seen := map[[3]int]int{}
		var step []linearJob
		for _, k := range shape.Kernels(b, 1) {
			if k.Kind != model.KindLinear {
				continue
			}
			key := [3]int{k.M, k.N, k.K}
			if i, dup := seen[key]; dup {
				step[i].name += "+" + k.Name
				continue
			}
			seen[key] = len(step)
			step = append(step, linearJob{name: k.Name, stepBatch: b,
				spec: measure.LinearSpec{Batch: k.M, N: k.N, K: k.K, DType: dtype, Variant: variant, SplitK: splitK}})
		}
		for _, j := range step {
			if _, ok := byName[j.name]; !ok {
				order = append(order, j.name)
			}
			byName[j.name] = append(byName[j.name], j)
		}
	}
	for _, name := range order {
		jobs = append(jobs, byName[name]...)
	}
	return jobs, shape.Name, shape.TP, nil
}

func benchLinearAction(c *cli.Context) error {
	jobs, modelName, tp, err := parseBenchLinear(c)
	if err != nil {
		return err
	}
	settings, err := parseBenchSettings(c, true)
	if err != nil {
		return err
	}
	s, err := openBench(c, settings, "linear")
	if err != nil {
		return err
	}
	defer s.close()
	if modelName != "" {
		s.say("model %s (tp %d): %d linear measurements\n", modelName, tp, len(jobs))
	}
	if err := s.measureCeiling(); err != nil {
		return err
	}
	s.say("%-16s %-26s %-12s %11s %7s %9s %7s %9s  %s\n", "KERNEL", "SHAPE", "VARIANT", "MEDIAN", "SPREAD", "GB/s", "% READ", "TFLOP/s", "NOTE")
	for i, j := range jobs {
		shape := fmt.Sprintf("B=%d N=%d K=%d", j.spec.Batch, j.spec.N, j.spec.K)
		label := j.name + " " + shape
		o, tel := s.measure(func() measure.Outcome {
			if need := float64(j.spec.MinDeviceBytes()); settings.maxBytes > 0 && need > settings.maxBytes {
				return measure.Outcome{Kernel: "linear", Status: measure.StatusSkipped,
					Reason: fmt.Sprintf("needs %s, above --max-gb %g", humanBytes(need), settings.maxBytes/1e9)}
			}
			return measure.Linear(s.dev, j.spec, settings.opts)
		})
		s.progress(i+1, len(jobs), label, o)
		r := s.record("linear", j.name, o, tel)
		r.Model, r.TP, r.Batch, r.N, r.K = modelName, tp, j.spec.Batch, j.spec.N, j.spec.K
		r.DType = j.spec.DType.String()
		if j.stepBatch != j.spec.Batch {
			r.StepBatch = j.stepBatch
		}
		r.Variant, r.SplitK = j.spec.Variant.String(), j.spec.SplitK
		if v, ok := o.Plan["variant"].(string); ok {
			r.Variant = v
		}
		if k, ok := o.Plan["split_k"].(int); ok {
			r.SplitK = k
		}
		if err := s.emit(r, label); err != nil {
			return err
		}
		variant := r.Variant
		if r.SplitK > 1 {
			variant += fmt.Sprintf(" /%d", r.SplitK)
		}
		s.say("%-16s %-26s %-12s %11s %6.2f%% %9.0f %7s %9.2f  %s\n", j.name, shape, variant, micros(o.Stats.Median),
			100*o.Stats.Spread, o.AchievedBytesPerSec/1e9, percent(r.FractionOfRead), o.AchievedFLOPsPerSec/1e12, note(o, tel))
	}
	return s.finish()
}

func percent(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// ---- attention ---------------------------------------------------------------------------------

func benchAttentionCommand() *cli.Command {
	return &cli.Command{
		Name:  "attention",
		Usage: "time decode attention for a model's head layout (or given heads) at each batch size and context",
		UsageText: "decodebench bench attention (--model NAME [--tp N] | --q-heads H --kv-heads G --head-dim D) [--batch LIST] " +
			"[--context LIST] [--page-size P] [--splits N] [--dtype bf16|fp16] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]\n\n" +
			"   LIST syntax: " + axes.Syntax,
		Description: "One layer's decode attention: one query token per sequence against a KV cache of --context\n" +
			"tokens for every sequence, contiguous or paged. % READ is the achieved bandwidth (KV cache,\n" +
			"Q and output) over the read ceiling the read probe measures first.",
		Flags: append(append(shapeFlags("1-256*2"),
			&cli.IntFlag{Name: "q-heads", EnvVars: []string{"DECODEBENCH_Q_HEADS"}, Usage: "query heads, instead of --model"},
			&cli.IntFlag{Name: "kv-heads", EnvVars: []string{"DECODEBENCH_KV_HEADS"}, Usage: "KV heads (divides --q-heads), instead of --model"},
			&cli.IntFlag{Name: "head-dim", EnvVars: []string{"DECODEBENCH_HEAD_DIM"}, Usage: "head dimension: 64, 80, 96, 128 or 256"},
			&cli.StringFlag{Name: "context", Value: "1k-128k*2", EnvVars: []string{"DECODEBENCH_CONTEXT"},
				Usage: "context lengths in tokens (k = 1024), every sequence the same, LIST syntax"},
			&cli.IntFlag{Name: "page-size", EnvVars: []string{"DECODEBENCH_PAGE_SIZE"}, Usage: "tokens per page of a paged cache (16..256, a power of two); 0 = contiguous"},
			&cli.IntFlag{Name: "splits", EnvVars: []string{"DECODEBENCH_SPLITS"}, Usage: "KV splits per sequence; 0 lets the kernel choose"},
		), benchFlags()...),
		OnUsageError: onUsageError,
		Action:       benchAttentionAction,
	}
}

type attentionJob struct {
	spec    measure.AttentionSpec
	context int
}

func parseBenchAttention(c *cli.Context) (jobs []attentionJob, modelName string, tp int, err error) {
	if c.NArg() > 0 {
		return nil, "", 0, usageError("bench attention takes no arguments (got %q)", c.Args().First())
	}
	batches, err := parseBatches(c, 65536, "the attention kernels")
	if err != nil {
		return nil, "", 0, err
	}
	contexts, err := axes.ParseIntList(c.String("context"))
	if err != nil {
		return nil, "", 0, usageError("--context: %v", err)
	}
	pageSize, splits := c.Int("page-size"), c.Int("splits")
	if pageSize != 0 && (pageSize < 16 || pageSize > 256 || pageSize&(pageSize-1) != 0) {
		return nil, "", 0, usageError("--page-size %d: want a power of two from 16 to 256, or 0 for a contiguous cache", pageSize)
	}
	if splits < 0 || splits > 1024 {
		return nil, "", 0, usageError("--splits %d: want 0 (the kernel chooses) or 1..1024", splits)
	}
	explicit := c.IsSet("q-heads") || c.IsSet("kv-heads") || c.IsSet("head-dim")
	haveModel := c.String("model") != "" || c.String("model-config") != ""
	var qHeads, kvHeads, headDim int
	var kvType model.DType
	switch {
	case explicit && haveModel:
		return nil, "", 0, usageError("give either --model (or --model-config) or --q-heads, --kv-heads and --head-dim, not both")
	case explicit:
		for _, name := range []string{"q-heads", "kv-heads", "head-dim"} {
			if !c.IsSet(name) {
				return nil, "", 0, usageError("bench attention needs --%s with the other head flags", name)
			}
		}
		qHeads, kvHeads, headDim = c.Int("q-heads"), c.Int("kv-heads"), c.Int("head-dim")
	case !haveModel:
		return nil, "", 0, usageError("bench attention needs --model NAME (or --model-config FILE), or --q-heads, --kv-heads and --head-dim")
	default:
		shape, err := resolveModel(c)
		if err != nil {
			return nil, "", 0, err
		}
		qHeads, kvHeads, headDim, kvType = shape.QHeads, shape.KVHeads, shape.HeadDim, shape.KVDType
		modelName, tp = shape.Name, shape.TP
	}
	switch {
	case qHeads < 1 || kvHeads < 1 || qHeads%kvHeads != 0:
		return nil, "", 0, usageError("--q-heads %d and --kv-heads %d: want positive head counts, the KV heads dividing the query heads", qHeads, kvHeads)
	case headDim != 64 && headDim != 80 && headDim != 96 && headDim != 128 && headDim != 256:
		return nil, "", 0, usageError("--head-dim %d: the attention kernels take 64, 80, 96, 128 or 256", headDim)
	}
	dtype, err := parseKernelDType(c, kvType)
	if err != nil {
		return nil, "", 0, err
	}
	for _, b := range batches {
		for _, ctx := range contexts {
			jobs = append(jobs, attentionJob{context: ctx, spec: measure.AttentionSpec{Batch: b, QHeads: qHeads, KVHeads: kvHeads,
				HeadDim: headDim, Contexts: []int{ctx}, PageSize: pageSize, Splits: splits, DType: dtype}})
		}
	}
	return jobs, modelName, tp, nil
}

func benchAttentionAction(c *cli.Context) error {
	jobs, modelName, tp, err := parseBenchAttention(c)
	if err != nil {
		return err
	}
	settings, err := parseBenchSettings(c, true)
	if err != nil {
		return err
	}
	s, err := openBench(c, settings, "attention")
	if err != nil {
		return err
	}
	defer s.close()
	if modelName != "" {
		s.say("model %s (tp %d): %d attention measurements\n", modelName, tp, len(jobs))
	}
	if err := s.measureCeiling(); err != nil {
		return err
	}
	s.say("%-38s %-14s %10s %11s %7s %9s %7s  %s\n", "SHAPE", "LAYOUT", "KV", "MEDIAN", "SPREAD", "GB/s", "% READ", "NOTE")
	for i, j := range jobs {
		a := j.spec
		shape := fmt.Sprintf("B=%d Hq=%d Hkv=%d D=%d S=%d", a.Batch, a.QHeads, a.KVHeads, a.HeadDim, j.context)
		o, tel := s.measure(func() measure.Outcome {
			if need := float64(a.MinDeviceBytes()); settings.maxBytes > 0 && need > settings.maxBytes {
				return measure.Outcome{Kernel: "attention", Status: measure.StatusSkipped,
					Reason: fmt.Sprintf("needs %s, above --max-gb %g", humanBytes(need), settings.maxBytes/1e9)}
			}
			return measure.Attention(s.dev, a, settings.opts)
		})
		s.progress(i+1, len(jobs), "attention "+shape, o)
		r := s.record("attention", "attention", o, tel)
		r.Model, r.TP, r.Batch, r.QHeads, r.KVHeads, r.HeadDim, r.Context = modelName, tp, a.Batch, a.QHeads, a.KVHeads, a.HeadDim, j.context
		r.PageSize, r.DType, r.KVBytes = a.PageSize, a.DType.String(), a.KVBytes()
		r.Splits = a.Splits
		if n, ok := o.Plan["splits"].(int); ok {
			r.Splits = n
		}
		if err := s.emit(r, "attention "+shape); err != nil {
			return err
		}
		layout := "contiguous"
		if a.PageSize > 0 {
			layout = fmt.Sprintf("paged %d", a.PageSize)
		}
		if r.Splits > 1 {
			layout += fmt.Sprintf(" /%d", r.Splits)
		}
		s.say("%-38s %-14s %10s %11s %6.2f%% %9.0f %7s  %s\n", shape, layout, humanBytes(a.KVBytes()), micros(o.Stats.Median),
			100*o.Stats.Spread, o.AchievedBytesPerSec/1e9, percent(r.FractionOfRead), note(o, tel))
	}
	return s.finish()
}

// ---- probes ------------------------------------------------------------------------------------

func benchProbeCommand() *cli.Command {
	var names []string
	var subs []*cli.Command
	for _, kind := range cgo.ProbeKinds {
		names = append(names, kind.String())
		subs = append(subs, benchProbeKindCommand(kind.String(), []cgo.ProbeKind{kind}))
	}
	subs = append(subs, benchProbeKindCommand("all", cgo.ProbeKinds))
	all := benchProbeKindCommand("probe", cgo.ProbeKinds)
	all.Usage = "measure the ceilings: read, write, copy and triad bandwidth (GB/s), fma and mma rates (TFLOP/s); all by default"
	all.UsageText = "decodebench bench probe [" + strings.Join(names, "|") + "|all] [--bytes B] [--iterations N] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]"
	all.Subcommands = subs
	return all
}

func benchProbeKindCommand(name string, kinds []cgo.ProbeKind) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: "verify, then time the " + name + " probe",
		Flags: append([]cli.Flag{
			&cli.Uint64Flag{Name: "bytes", EnvVars: []string{"DECODEBENCH_BYTES"},
				Usage: "bytes of each buffer of the memory probes, a multiple of 16; 0 = max(32x L2, 1 GiB) within half the free memory"},
			&cli.IntFlag{Name: "iterations", EnvVars: []string{"DECODEBENCH_ITERATIONS"},
				Usage: fmt.Sprintf("loop trips of the compute probes; 0 = %d", measure.DefaultComputeIterations)},
		}, benchFlags()...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("bench probe: unknown probe %q (want read, write, copy, triad, fma, mma or all)", c.Args().First())
			}
			return benchProbeAction(c, kinds)
		},
	}
}

// datasheet is the card's published ceilings, where something knows them.
type datasheet struct {
	bandwidth, tensorFLOPs, fp32FLOPs float64
	source                            string
}

// lookupDatasheet finds the card's datasheet numbers: the spec table by the device's name and
// memory, else NVML's memory clock x bus width x 2 for the bandwidth. Nothing for the emulator.
func lookupDatasheet(lib *cgo.Library, props cgo.DeviceProps) datasheet {
	if lib.Emulated() {
		return datasheet{}
	}
	if g, ok := roofline.MatchNVML(props.Name, props.MemTotalBytes); ok {
		return datasheet{g.BandwidthBytesPerSec, g.TensorBF16FLOPs, g.FP32FLOPs, "spec table: " + g.Name + " (" + g.Source + ")"}
	}
	if sys, err := gpuinfo.Open(); err == nil {
		for _, d := range sys.Devices {
			if d.Name == props.Name && d.DatasheetBandwidthBytesPerSec > 0 {
				return datasheet{bandwidth: d.DatasheetBandwidthBytesPerSec, source: "NVML: max memory clock x bus width x 2"}
			}
		}
	}
	return datasheet{}
}

// probeRecord fills a probe's record, with its fraction of the datasheet where known.
func (s *benchSession) probeRecord(o measure.Outcome, tel telemetry.Summary, kind cgo.ProbeKind, ds datasheet) benchRecord {
	r := s.record("probe", o.Kernel, o, tel)
	r.Probe = kind.String()
	r.ReadCeilingGBps, r.FractionOfRead = 0, 0
	if b, ok := o.Plan["buffer_bytes"].(uint64); ok {
		r.BufferBytes = b
	}
	if n, ok := o.Plan["iterations"].(int); ok {
		r.Iterations = n
	}
	switch {
	case kind.Memory() && ds.bandwidth > 0:
		r.DatasheetGBps, r.DatasheetSource = ds.bandwidth/1e9, ds.source
		if o.Status == measure.StatusOK {
			r.FractionOfDatasheet = o.AchievedBytesPerSec / ds.bandwidth
		}
	case kind == cgo.ProbeFMAF32 && ds.fp32FLOPs > 0, kind == cgo.ProbeMMABF16 && ds.tensorFLOPs > 0:
		peak := ds.fp32FLOPs
		if kind == cgo.ProbeMMABF16 {
			peak = ds.tensorFLOPs
		}
		r.DatasheetTFLOPs, r.DatasheetSource = peak/1e12, ds.source
		if o.Status == measure.StatusOK {
			r.FractionOfDatasheet = o.AchievedFLOPsPerSec / peak
		}
	}
	return r
}

func benchProbeAction(c *cli.Context, kinds []cgo.ProbeKind) error {
	bytes, iterations := c.Uint64("bytes"), c.Int("iterations")
	if bytes%16 != 0 || bytes > 1<<44 {
		return usageError("--bytes %d: want a multiple of 16 (the probes move 16-byte vectors), or 0 for auto", bytes)
	}
	if iterations < 0 {
		return usageError("--iterations %d: want 0 (auto) or a count of loop trips", iterations)
	}
	settings, err := parseBenchSettings(c, false)
	if err != nil {
		return err
	}
	s, err := openBench(c, settings, "probe")
	if err != nil {
		return err
	}
	defer s.close()
	var ds datasheet
	if props, err := s.dev.Props(); err == nil {
		ds = lookupDatasheet(s.lib, props)
	}
	if ds.source != "" {
		s.say("datasheet: %s\n", ds.source)
	} else {
		s.say("datasheet: unknown for this device (no spec row or NVML reading)\n")
	}
	s.say("%-6s %10s %11s %7s %14s %11s  %s\n", "PROBE", "SIZE", "MEDIAN", "SPREAD", "RATE", "% DATASHEET", "NOTE")
	for i, kind := range kinds {
		o, tel := s.measure(func() measure.Outcome {
			return measure.Probe(s.dev, measure.ProbeSpec{Kind: kind, Bytes: bytes, Iterations: iterations}, settings.opts)
		})
		s.progress(i+1, len(kinds), "probe "+kind.String(), o)
		r := s.probeRecord(o, tel, kind, ds)
		if err := s.emit(r, "probe "+kind.String()); err != nil {
			return err
		}
		size, rate := fmt.Sprintf("%d iter", r.Iterations), fmt.Sprintf("%.2f TFLOP/s", o.AchievedFLOPsPerSec/1e12)
		if kind.Memory() {
			size, rate = humanBytes(float64(r.BufferBytes)), fmt.Sprintf("%.0f GB/s", o.AchievedBytesPerSec/1e9)
		}
		s.say("%-6s %10s %11s %6.2f%% %14s %11s  %s\n", kind, size, micros(o.Stats.Median), 100*o.Stats.Spread, rate,
			percent(r.FractionOfDatasheet), note(o, tel))
	}
	return s.finish()
}
