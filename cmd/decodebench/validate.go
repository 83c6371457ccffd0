package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/validate"
	"github.com/decodebench/decodebench/cgo"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "give this box a production verdict: every card's health, correctness and speed (PASS, WARN or FAIL)",
		UsageText: "decodebench validate [--device all|LIST] [--gpu ROW] [--thresholds FILE] [--expect-count N]\n" +
			"                     [--out FILE] [--format table|md|csv|json|jsonl] [--idle-wait 30s] [--backend auto|cuda|emu] [--hostname NAME] [--all-checks]",
		Description: "Runs, on every selected card at once (one worker per card), a fixed suite that takes under\n" +
			"2 minutes per box: health from NVML (ECC, uncorrectable and corrected errors, retired pages,\n" +
			"row remapping, PCIe link, throttling, memory clock, temperature, power, other processes,\n" +
			"memory size against the card's kind), every kernel\n" +
			"verified against the float64 reference, and performance gates: read bandwidth and the\n" +
			"tensor-core rate against the card's datasheet row, batch-1 decode linear and long-context\n" +
			"attention against the card's measured read bandwidth, and a Llama-3-8B decode step against\n" +
			"its roofline bound. A card more than 5% below the median of its identical peers on a gate is\n" +
			"flagged (WARN). Thresholds: docs/thresholds.example.json; report schema:\n" +
			"docs/validate-schema.md.\n\n" +
			"SIGINT, SIGTERM (scancel, a pod's deletion) or SIGHUP stops it after the measurements in flight: the\n" +
			"report's verdict is then INTERRUPTED (no verdict on the hardware) and it exits 130; a second\n" +
			"signal stops it at once. A card NVML lost before the run fails by name; the others run.\n\n" +
			"A check that could not run (the suite's budget ran out before its step, or the backend cannot\n" +
			"measure it: the emulator has no speed) is SKIP, never FAIL: it says nothing about the card.\n" +
			"With --backend emu the suite is sized for the emulator (about 15 s for two cards on 2 cores).\n\n" +
			"Exit status: 0 when every check passes (warnings and skips allowed), 1 when any fails or the\n" +
			"box cannot be validated (no driver, no GPU), 130 when interrupted, 2 for a bad flag or value.",
		Flags: []cli.Flag{
			listFlag(&cli.StringFlag{Name: "device", Value: "all",
				Usage: "cards to validate: all, or a comma-separated list of NVML indices and UUIDs (given twice, the lists join)"}),
			oldName(listFlag(&cli.StringFlag{Name: "gpus"}), "device", nil),
			&cli.StringFlag{Name: "gpu", // not gpuFlag: no default, the check is off
				Usage: "the spec row every card must be (h100-sxm, h200, ...); a card of another kind fails"},
			oldName(&cli.StringFlag{Name: "expect"}, "gpu", nil),
			&cli.IntFlag{Name: "expect-count",
				Usage: "the number of GPUs the box must have: fewer fails (a card fell off the bus); 0 skips the check"},
			&cli.StringFlag{Name: "thresholds",
				Usage: "a JSON thresholds file that overrides any built-in threshold (docs/thresholds.example.json)"},
			outFlag("write the report as JSON to this file (- for standard output, the table then goes to standard error)"),
			oldName(&cli.StringFlag{Name: "json"}, "out", nil),
			formatFlag(format.All...),
			timingFlags(timingOptions{suiteRule: true})[0],
			timingFlags(timingOptions{suiteRule: true})[1],
			durationFlag("idle-wait", 30*time.Second, "how long to wait for other processes to leave a card before calling it busy"),
			backendFlags()[0], // --backend; its cards are --device, a list here
			&cli.StringFlag{Name: "hostname",
				Usage: "the box's name in the report (default: the host name; in Kubernetes pass the node name, a pod's host name is its own)"},
			&cli.BoolFlag{Name: "all-checks",
				Usage: "print every check, not only the warnings and failures"},
			// For tests and for trying the Slurm and Kubernetes recipes on machines without GPUs.
			&cli.StringFlag{Name: "suite", Value: validate.SuiteStandard, Hidden: true,
				Usage: "standard (the default on the GPU), emu (the default with --backend emu: the standard kernels at sizes the emulator runs in seconds) or tiny (smaller still)"},
			&cli.IntFlag{Name: "simulate-gpus", Hidden: true,
				Usage: "read health from N simulated healthy H100s instead of NVML (testing only)"},
		},
		OnUsageError: onUsageError,
		Action:       validateAction,
	}
}

// validateRequest is a checked command line.
type validateRequest struct {
	format       string // --format of stdout
	selection    string
	expect       *roofline.GPU
	expectCount  int
	thresholds   validate.ThresholdSet
	jsonPath     string
	idleWait     time.Duration
	backend      string
	allChecks    bool
	suite        validate.Suite
	simulateGPUs int
}

// checkGPUSelection checks the form of --device before NVML is opened, so that a typo is a usage
// error on any machine; whether the cards exist is validate.SelectGPUs's question.
func checkGPUSelection(spec string) error {
	if spec = strings.TrimSpace(spec); spec == "" || spec == "all" {
		return nil
	}
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if n, err := strconv.Atoi(entry); err == nil {
			if n < 0 {
				return fmt.Errorf("%d is not an index", n)
			}
			continue
		}
		hex := strings.TrimPrefix(strings.TrimPrefix(entry, "GPU-"), "MIG-")
		if entry == "" || hex == "" || strings.Trim(strings.ToLower(hex), "0123456789abcdef-") != "" {
			return fmt.Errorf("%q is neither an index nor a UUID", entry)
		}
	}
	return nil
}

func parseValidateRequest(c *cli.Context) (validateRequest, error) {
	r := validateRequest{selection: c.String("device"), expectCount: c.Int("expect-count"), jsonPath: c.String("out"),
		idleWait: c.Duration("idle-wait"), backend: c.String("backend"), allChecks: c.Bool("all-checks"),
		simulateGPUs: c.Int("simulate-gpus"), thresholds: validate.BuiltinThresholds()}
	if c.NArg() > 0 {
		return r, usageError("validate takes no arguments (got %q); choose cards with --device", c.Args().First())
	}
	if err := checkGPUSelection(r.selection); err != nil {
		return r, usageError("--device %q: %v; want all, or a comma-separated list of indices (0, 1, ...) and UUIDs (GPU-...)", r.selection, err)
	}
	if name := c.String("gpu"); name != "" {
		g, err := roofline.LookupGPU(name)
		if err != nil {
			return r, usageError("--gpu: %v", err)
		}
		r.expect = &g
	}
	if r.expectCount < 0 {
		return r, usageError("--expect-count %d: want 0 (no check) or the number of GPUs", r.expectCount)
	}
	if path := c.String("thresholds"); path != "" {
		set, err := validate.LoadThresholds(path)
		if err != nil {
			return r, usageError("--thresholds: %v", err)
		}
		r.thresholds = set
	}
	if r.idleWait < 0 {
		return r, usageError("--idle-wait %s: want 0 or more", r.idleWait)
	}
	if !slices.Contains(cgo.Backends, r.backend) {
		return r, usageError("--backend %q: want one of %s", r.backend, strings.Join(cgo.Backends, ", "))
	}
	suiteName := c.String("suite")
	if r.backend == cgo.BackendEmu && !c.IsSet("suite") {
		suiteName = validate.SuiteEmu // the standard suite's sizes take minutes on the emulator
	}
	suite, err := validate.SuiteByName(suiteName)
	if err != nil {
		return r, usageError("--suite: %v", err)
	}
	// --min-time and --max-time change the suite's timing rule, as in bench and sweep.
	if c.IsSet("min-time") {
		suite.Timing.MinSeconds = c.Duration("min-time").Seconds()
	}
	if c.IsSet("max-time") {
		suite.Timing.MaxSeconds = c.Duration("max-time").Seconds()
	}
	if err := suite.Timing.Validate(); err != nil {
		return r, usageError("timing flags: %v", err)
	}
	r.suite = suite
	if r.format, err = parseFormat(c); err != nil {
		return r, err
	}
	if r.format != format.Table && r.jsonPath == "-" {
		return r, usageError("--out - and --format %s: both print on standard output; give --out a file", r.format)
	}
	if r.simulateGPUs < 0 || r.simulateGPUs > 64 {
		return r, usageError("--simulate-gpus %d: want 0..64", r.simulateGPUs)
	}
	if r.jsonPath != "" && r.jsonPath != "-" {
		// Where the report goes is checked before minutes of suite, by creating (and removing)
		// the temporary file the report will be written through.
		if err := os.MkdirAll(filepath.Dir(r.jsonPath), 0o755); err != nil {
			return r, usageError("--out %s: %v", r.jsonPath, err)
		}
		f, err := atomicfile.Create(r.jsonPath)
		if err != nil {
			return r, usageError("--out: %v", err)
		}
		f.Abort()
	}
	return r, nil
}

func validateAction(c *cli.Context) error {
	req, err := parseValidateRequest(c)
	if err != nil {
		return err
	}
	out, errOut := c.App.Writer, c.App.ErrWriter
	if errOut == nil {
		errOut = os.Stderr
	}
	table := out
	if req.jsonPath == "-" || req.format != format.Table {
		table = errOut // stdout holds the JSON report or the --format rows
	}
	host := c.String("hostname")
	if host == "" {
		host, _ = os.Hostname()
	}
	report := validate.Report{
		Schema: validate.ReportSchema, Version: version, Hostname: host, CommandLine: os.Args,
		StartedAt: time.Now().UTC(), Suite: req.suite.Name, Thresholds: req.thresholds.Source,
	}
	if req.expect != nil {
		report.ExpectedGPU = req.expect.Key
	}
	ctx, signalled, stop := interruptContext(errOut)
	defer stop()

	runErr := runValidate(ctx, req, &report, errOut)
	// An interrupt before the verdict leaves the box without one; once the verdict stands, a
	// signal only waits for the report to be written.
	if sig := signalled(); sig != "" {
		report.Interrupted = sig + " before the verdict"
	}
	report.FinishedAt = time.Now().UTC()
	report.Seconds = report.FinishedAt.Sub(report.StartedAt).Seconds()
	var usage cli.ExitCoder
	if errors.As(runErr, &usage) && usage.ExitCode() == exitUsage {
		return runErr
	}
	if runErr != nil {
		report.Error = runErr.Error()
	}
	report.Finish()
	if runErr == nil || report.Interrupted != "" {
		printReport(table, report, req.allChecks)
	}
	if req.jsonPath != "" {
		if err := writeReport(out, req.jsonPath, report); err != nil {
			return failure("writing the report: %v", err)
		}
	}
	if req.format != format.Table && (runErr == nil || report.Interrupted != "") {
		if err := writeValidateRows(out, req.format, report); err != nil {
			return failure("writing the report: %v", err)
		}
	}
	switch {
	case report.Verdict == validate.Interrupted:
		return cli.Exit(fmt.Sprintf("validate was interrupted (%s): no verdict; run it again", report.Interrupted), exitInterrupted)
	case runErr != nil:
		return failure("cannot validate: %v", runErr)
	case report.Verdict == validate.Fail:
		return cli.Exit("", exitFailure) // the table said why
	}
	return nil
}

// reportWriteHook, when set, is called with the temporary file's name once the report is in it
// and before it is committed (tests interrupt and kill validate there).
var reportWriteHook func(tmp string)

func writeReport(stdout io.Writer, path string, r validate.Report) error {
	if path == "-" {
		return writeJSON(stdout, r)
	}
	data, err := validate.EncodeReport(r)
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	if reportWriteHook != nil {
		reportWriteHook(f.TempPath())
	}
	return f.Commit()
}

// runValidate opens NVML and the kernels library, validates the selected cards and fills the
// report. An error means the box could not be validated at all; a usage error (exit 2) is
// returned as such.
func runValidate(ctx context.Context, req validateRequest, report *validate.Report, log io.Writer) error {
	lib, sys, err := openValidateNVML(req)
	if err != nil {
		return fmt.Errorf("%w. validate reads every card's health through NVML, which needs the NVIDIA driver and a GPU; "+
			"to check the kernels on a machine without one, run `decodebench verify ... --backend emu`", err)
	}
	defer lib.Shutdown()
	report.Driver, report.CUDADriverVersion = sys.Driver, sys.CUDADriverVersion

	selected, err := validate.SelectGPUs(sys.Devices, req.selection)
	if err != nil {
		return usageError("--device: %v", err)
	}
	if req.backend != cgo.BackendEmu {
		// CUDA must number devices by PCI bus id, as the device map assumes.
		os.Setenv("CUDA_DEVICE_ORDER", gpuinfo.CUDADeviceOrder)
	}
	kernels, err := cgo.Open(req.backend)
	if err != nil {
		return err
	}
	report.Backend, report.Library, report.Emulated = kernels.Name(), kernels.File(), kernels.Emulated()
	var dmap gpuinfo.DeviceMap
	if !kernels.Emulated() {
		dmap, err = cudaDeviceMap(sys, kernels)
		if usage := migUsage(err); usage != nil {
			return usage
		}
		if err != nil {
			return err
		}
		if env := gpuinfo.CUDAEnvironment(); env.VisibleSet && isAll(req.selection) {
			// Under Slurm or Kubernetes NVML may see more cards than the job was given: "all"
			// is the job's cards.
			selected = nil
			for _, d := range dmap.Visible() {
				selected = append(selected, d.Index)
			}
			slices.Sort(selected)
		}
	}
	targets, closeDevices, err := openTargets(lib, sys, selected, kernels, dmap)
	if err != nil {
		return err
	}
	defer closeDevices()
	if kernels.Emulated() {
		fmt.Fprintf(log, "*** %s ***\n", emulatedWarning)
	}
	fmt.Fprintf(log, "validate: %d card(s) on %s, %s backend, %s suite (at most %s per card)\n",
		len(targets), report.Hostname, kernels.Name(), req.suite.Name, req.suite.Budget)

	var logMu sync.Mutex
	cfg := validate.Config{
		Suite: req.suite, Thresholds: req.thresholds, Features: gpuinfo.DetectHealthFeatures(lib),
		ExpectGPU: req.expect, ExpectCount: req.expectCount, IdleWait: req.idleWait,
		Progress: func(card validate.Card, o validate.Outcome) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(log, "  GPU %d %-22s %s\n", card.Index, o.Step, outcomeNote(o))
		},
	}
	cards, boxChecks, err := validate.Run(ctx, cfg, targets, len(sys.Devices))
	if err != nil {
		return err
	}
	report.Cards, report.Checks = cards, boxChecks
	return nil
}

// openValidateNVML starts NVML and keeps it started (the caller shuts it down): the simulated
// GPUs of --simulate-gpus, the test hook, or the driver's library.
func openValidateNVML(req validateRequest) (nvml.Interface, gpuinfo.System, error) {
	var lib nvml.Interface
	var sys gpuinfo.System
	var err error
	switch {
	case req.simulateGPUs > 0:
		gpus := make([]*fakenvml.GPU, req.simulateGPUs)
		for i := range gpus {
			gpus[i] = fakenvml.H100(i)
		}
		lib = fakenvml.Library(gpus...)
		sys, err = gpuinfo.Query(lib)
	case nvmlHook != nil:
		lib = nvmlHook()
		sys, err = gpuinfo.Query(lib)
	default:
		sys, err = gpuinfo.Open() // says why the driver is missing
		lib = nvml.New()
	}
	if err != nil {
		return nil, sys, err
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, sys, fmt.Errorf("NVML init: %v", ret)
	}
	return lib, sys, nil
}

// openTargets maps every selected card to a kernels device through dmap, opened when
// validate.Run asks (after the card is idle). The emulator has one device and runs one kernel
// at a time: every card shares it, taking turns. A card NVML lost is a target with nothing to
// open (validate.Run fails it by name). The returned function closes whatever was opened.
func openTargets(lib nvml.Interface, sys gpuinfo.System, selected []int, kernels *cgo.Library, dmap gpuinfo.DeviceMap) ([]validate.Target, func(), error) {
	var mu sync.Mutex
	var opened []*cgo.Device
	open := func(index int) (*cgo.Device, error) {
		dev, err := kernels.OpenDevice(index)
		if err == nil {
			mu.Lock()
			opened = append(opened, dev)
			mu.Unlock()
		}
		return dev, err
	}
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range opened {
			d.Close()
		}
	}
	if _, err := kernels.DeviceCount(); err != nil {
		return nil, closeAll, fmt.Errorf("%s found no usable device: %w", kernels.Path(), err)
	}
	var shared struct {
		once sync.Once
		dev  *cgo.Device
		err  error
		lock sync.Mutex
	}
	var targets []validate.Target
	for _, i := range selected {
		d := sys.Devices[i]
		if d.Lost != "" {
			targets = append(targets, validate.Target{Info: d, BackendDevice: -1})
			continue
		}
		handle, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, closeAll, fmt.Errorf("GPU %d: NVML handle: %v", i, ret)
		}
		t := validate.Target{Info: d, NVML: handle}
		if kernels.Emulated() {
			t.Open = func() (validate.Runner, error) {
				shared.once.Do(func() { shared.dev, shared.err = open(0) })
				return validate.DeviceRunner{Device: shared.dev, Options: measure.DefaultOptions(), Lock: &shared.lock}, shared.err
			}
		} else {
			cudaIndex, ok := dmap.CUDA(i)
			if !ok {
				return nil, closeAll, usageError("--device: GPU %d (%s) is not visible to CUDA (CUDA_VISIBLE_DEVICES=%q)", i, d.UUID, os.Getenv("CUDA_VISIBLE_DEVICES"))
			}
			t.BackendDevice = cudaIndex
			t.Open = func() (validate.Runner, error) {
				dev, err := open(cudaIndex)
				if err != nil {
					return nil, err
				}
				if props, err := dev.Props(); err == nil {
					if err := dmap.CheckName(cudaIndex, props.Name); err != nil {
						return nil, err
					}
				}
				return validate.DeviceRunner{Device: dev, Options: measure.DefaultOptions()}, nil
			}
		}
		if validateRunnerHook != nil {
			open := t.Open
			t.Open = func() (validate.Runner, error) {
				r, err := open()
				if err != nil {
					return r, err
				}
				return validateRunnerHook(r), nil
			}
		}
		targets = append(targets, t)
	}
	return targets, closeAll, nil
}

// validateRunnerHook, when set, wraps every card's Runner (tests hold a step there).
var validateRunnerHook func(validate.Runner) validate.Runner

func isAll(selection string) bool {
	selection = strings.TrimSpace(selection)
	return selection == "" || selection == "all"
}

// writeValidateRows prints the report in a --format other than the table: json is the whole
// report (what --out writes); md, csv and jsonl are its checks, one a row, the box's first.
func writeValidateRows(w io.Writer, name string, r validate.Report) error {
	if name == format.JSON {
		return writeJSON(w, r)
	}
	rows := format.Rows{Columns: []string{"card", "uuid", "id", "category", "verdict", "value", "threshold", "compare", "unit", "message"}}
	add := func(card, uuid any, ch validate.Check) {
		var value, threshold any
		if ch.Value != nil {
			value = *ch.Value
		}
		if ch.Threshold != nil {
			threshold = *ch.Threshold
		}
		rows.Add(card, uuid, ch.ID, ch.Category, string(ch.Verdict), value, threshold, ch.Compare, ch.Unit, ch.Message)
	}
	for _, ch := range r.Checks {
		add("box", nil, ch)
	}
	for _, card := range r.Cards {
		for _, ch := range card.Checks {
			add(card.Index, card.UUID, ch)
		}
	}
	return format.Write(w, name, rows)
}
