package main

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// verify runs a kernel once on hashed inputs and checks what it wrote against bench/ref: the
// check that comes before any timing. It reports no speed (on the emulator there is none).

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "run a kernel once and check its output against the float64 reference (no timing)",
		Description: "Inputs are generated on the device by the hash of kernels/dbhash.h, which bench/ref\n" +
			"reproduces bit for bit, and outputs are poisoned with NaN first. Exit status 0 when the\n" +
			"kernel passes, 1 when it fails or cannot run, 2 for a bad flag or value.\n" +
			"Use --backend emu to check correctness on a machine without a GPU.",
		Subcommands:  []*cli.Command{verifyLinearCommand(), verifyProbeCommand(), verifyAttentionCommand(), verifySmallOpCommand()},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("verify: unknown kernel %q (want linear, probe or attention)", c.Args().First())
			}
			return usageError("verify needs a kernel, linear, probe or attention: e.g. `decodebench verify linear --batch 1 --n 4096 --k 4096 --backend emu`")
		},
	}
}

// ---- linear ----------------------------------------------------------------------------------

func verifyLinearCommand() *cli.Command {
	return &cli.Command{
		Name:      "linear",
		Usage:     "check Y = X·Wᵀ (the decode linear layer) for one shape",
		UsageText: "decodebench verify linear --batch B --n N --k K [--dtype bf16|fp16] [--weight-dtype bf16|fp16|fp8|fp8-tensor|fp8-block|int8|int4|int4-zp|mxfp4 [--group-size G]] [--variant auto|gemv|mma|tiled] [--split-k S] [--backend auto|cuda|emu] [--seed S] [--json]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "batch", Usage: fmt.Sprintf("sequences in the batch (rows of X and Y), 1..%d", cgo.MaxBatch)},
			&cli.IntFlag{Name: "n", Usage: "output features (rows of W), >= 1"},
			&cli.IntFlag{Name: "k", Usage: "input features, a positive multiple of 8"},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "element type of X, W and Y: bf16 or fp16"},
			&cli.StringFlag{Name: "variant", Value: "auto", Usage: "kernel: gemv (CUDA cores), mma (skinny tensor-core), tiled (tensor cores, shared-memory tiles) or auto"},
			&cli.IntFlag{Name: "split-k", Usage: fmt.Sprintf("K splits of the gemv or tiled variant, 1..%d; 0 lets the kernel choose", cgo.MaxSplitK)},
			seedFlag("X and W get distinct seeds derived from it"),
			jsonFlag(),
		}, append([]cli.Flag{matrixWeightDTypeFlag(), groupSizeFlag()}, backendFlags()...)...),
		OnUsageError: onUsageError,
		Action:       verifyLinearAction,
	}
}

// linearRequest is a validated `verify linear` command line.
type linearRequest struct {
	in      ref.LinearInputs
	weights weightChoice
	variant cgo.LinearVariant
	splitK  int
	seed    uint64
	backend backendChoice
}

func parseLinearRequest(c *cli.Context) (linearRequest, error) {
	var r linearRequest
	if c.NArg() > 0 {
		return r, usageError("verify linear takes no arguments (got %q)", c.Args().First())
	}
	for _, name := range []string{"batch", "n", "k"} {
		if !c.IsSet(name) {
			return r, usageError("verify linear needs --%s (usage: --batch B --n N --k K)", name)
		}
	}
	batch, n, k := c.Int("batch"), c.Int("n"), c.Int("k")
	switch {
	case batch < 1 || batch > cgo.MaxBatch:
		return r, usageError("--batch %d: the linear kernels take a batch of 1..%d", batch, cgo.MaxBatch)
	case n < 1 || n > math.MaxInt32:
		return r, usageError("--n %d: want 1..%d output features", n, math.MaxInt32)
	case k < cgo.LinearKMultiple || k%cgo.LinearKMultiple != 0 || k > math.MaxInt32:
		return r, usageError("--k %d: want a positive multiple of %d (rows are read as 16-byte vectors)", k, cgo.LinearKMultiple)
	}
	dtype, err := ref.ParseDType(c.String("dtype"))
	if err != nil || (dtype != ref.BF16 && dtype != ref.FP16) {
		return r, usageError("--dtype %q: the linear kernels take bf16 or fp16", c.String("dtype"))
	}
	if r.weights, err = parseWeightDType(c, c.String("weight-dtype"), cgo.DType(dtype)); err != nil {
		return r, err
	}
	if err := r.weights.checkShape(n, k); err != nil {
		return r, err
	}
	if r.variant, err = cgo.ParseLinearVariant(c.String("variant")); err != nil {
		return r, usageError("--variant: %v", err)
	}
	if r.splitK = c.Int("split-k"); r.splitK < 0 || r.splitK > cgo.MaxSplitK {
		return r, usageError("--split-k %d: want 0 (the kernel chooses) or a count of splits in 1..%d", r.splitK, cgo.MaxSplitK)
	}
	if r.variant == cgo.LinearMMA && r.splitK > 1 {
		return r, usageError("--split-k %d: only the gemv and tiled variants split K (mma splits it inside a block)", r.splitK)
	}
	if r.backend, err = parseBackendFlags(c); err != nil {
		return r, err
	}
	r.seed = c.Uint64("seed")
	r.in = ref.LinearInputs{
		DType: dtype, Batch: batch, N: n, K: k,
		SeedX: ref.Hash64(r.seed, 0), SeedW: ref.Hash64(r.seed, 1),
		// Unit X and W scaled by 1/sqrt(k) keep every output near 1/3 in size whatever k is:
		// far from fp16's overflow and from its subnormals.
		ScaleX: 1, ScaleW: float32(1 / math.Sqrt(float64(k))),
	}
	return r, nil
}

// ranOn names where a verification ran; the linear and attention reports embed it, so its
// fields sit at the top level of their JSON.
type ranOn struct {
	Backend    string `json:"backend"`
	Library    string `json:"library"`
	Device     int    `json:"device"`
	DeviceName string `json:"device_name"`
	// UUID and PCIBusID name the card, through the one CUDA-to-NVML device map; left out on
	// the emulator and where NVML cannot tell.
	UUID     string `json:"uuid,omitempty"`
	PCIBusID string `json:"pci_bus_id,omitempty"`
}

func newRanOn(lib *cgo.Library, dev *cgo.Device) ranOn {
	r := ranOn{Backend: lib.Name(), Library: lib.Path(), Device: dev.Index()}
	if props, err := dev.Props(); err == nil {
		r.DeviceName = props.Name
	}
	if m, err := matchCUDADevice(lib, dev.Index()); err == nil && m.dev != nil {
		r.UUID, r.PCIBusID = m.dev.UUID, m.dev.PCIBusID
	}
	return r
}

// finishVerify prints a verification's report, as JSON or through printText, and turns a
// failed one into exit status 1.
func finishVerify(out io.Writer, asJSON bool, kernel string, rep any, passed bool, reason string, printText func()) error {
	if asJSON {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else {
		printText()
	}
	if !passed {
		return failure("verify %s failed: %s", kernel, reason)
	}
	return nil
}

// linearReport is the verdict of one `verify linear` run; it is also the --json output.
type linearReport struct {
	Passed         bool          `json:"passed"`
	Reason         string        `json:"reason,omitempty"`
	RelError       *jsonFloat    `json:"rel_error"` // null when an output is NaN or infinite
	Tolerance      float64       `json:"tolerance"`
	Worst          elementJSON   `json:"worst"`
	NonFinite      int           `json:"non_finite"`
	OutOfBound     int           `json:"out_of_bound"`
	Mismatches     []elementJSON `json:"mismatches,omitempty"`
	Kernel         string        `json:"kernel"`
	WeightFormat   string        `json:"weight_format,omitempty"` // quantized W only (--weight-dtype)
	GroupSize      int           `json:"group_size,omitempty"`
	Variant        string        `json:"variant"`
	SplitK         int           `json:"split_k"`
	WorkspaceBytes uint64        `json:"workspace_bytes"`
	Batch          int           `json:"batch"`
	N              int           `json:"n"`
	K              int           `json:"k"`
	DType          string        `json:"dtype"`
	ranOn
	Seed   uint64  `json:"seed"`
	SeedX  uint64  `json:"seed_x"`
	SeedW  uint64  `json:"seed_w"`
	ScaleW float32 `json:"scale_w"`
}

// elementJSON is one output element of Y[batch x n] next to its reference.
type elementJSON struct {
	Index  int       `json:"index"`
	Row    int       `json:"row"` // sequence b
	Col    int       `json:"col"` // output feature j
	Got    jsonFloat `json:"got"`
	Want   float64   `json:"want"`
	AbsErr jsonFloat `json:"abs_err"`
	Bound  float64   `json:"bound"`
}

func toElementJSON(e ref.Element, n int) elementJSON {
	return elementJSON{Index: e.Index, Row: e.Index / n, Col: e.Index % n, Got: jsonFloat(e.Got),
		Want: e.Want, AbsErr: jsonFloat(e.AbsErr), Bound: e.Bound}
}

func verifyLinearAction(c *cli.Context) error {
	req, err := parseLinearRequest(c)
	if err != nil {
		return err
	}
	lib, dev, err := req.backend.open()
	if err != nil {
		return err
	}
	defer dev.Close()
	if req.variant == cgo.LinearCUBLAS && lib.Emulated() {
		// The library's plan says "unsupported shape" here, which blames the shape for what is
		// the machine's: the emulator has no GPU for cuBLASLt to run on.
		return usageError("--variant cublas runs NVIDIA's cuBLASLt, which needs a GPU, and the emu backend has none: " +
			"run it with --backend cuda on a GPU machine, or verify our own kernels here with --variant auto, gemv, mma or tiled")
	}
	out, asJSON := c.App.Writer, c.Bool("json")
	if !asJSON {
		in := req.in
		weights := ""
		if req.weights.format != cgo.WeightDense {
			weights = ", weights " + req.weights.String()
		}
		fmt.Fprintf(out, "verify linear: batch %d, n %d, k %d, %v%s, seed %d on the %s\n",
			in.Batch, in.N, in.K, in.DType, weights, req.seed, describeDevice(lib, dev))
	}
	rep, err := runLinear(dev, req, out, asJSON)
	if err != nil {
		return err
	}
	rep.ranOn = newRanOn(lib, dev)
	return finishVerify(out, asJSON, "linear", rep, rep.Passed, rep.Reason, func() { printLinearReport(out, rep) })
}

// runLinear is measure.Verify of the requested call; it only turns the Check into the report.
func runLinear(dev *cgo.Device, req linearRequest, out io.Writer, quiet bool) (linearReport, error) {
	in := req.in
	spec := measure.LinearSpec{Batch: in.Batch, N: in.N, K: in.K, DType: cgo.DType(in.DType), Variant: req.variant, SplitK: req.splitK,
		WeightFormat: req.weights.format, GroupSize: req.weights.group}
	c := measure.Verify(dev, spec.Spec(), verifyOptions(req.seed))
	if err := checkRan(c, "the linear kernels refuse this shape"); err != nil {
		return linearReport{}, err
	}
	if !quiet {
		fmt.Fprintf(out, "plan: variant %s, split-k %d, workspace %d bytes\n", c.Plan.Variant, c.Plan.SplitK, c.Plan.WorkspaceBytes)
	}
	rep := linearReport{
		Passed: c.Passed, Reason: c.Reason, RelError: relErrorOf(c.Verification), Tolerance: c.Tolerance,
		Worst: toElementJSON(c.Worst, in.N), NonFinite: c.NonFinite, OutOfBound: c.OutOfBound,
		Kernel: "linear", Variant: c.Plan.Variant, GroupSize: req.weights.group, SplitK: max(c.Plan.SplitK, 1), WorkspaceBytes: c.Plan.WorkspaceBytes,
		Batch: in.Batch, N: in.N, K: in.K, DType: in.DType.String(),
		Seed: req.seed, SeedX: in.SeedX, SeedW: in.SeedW, ScaleW: in.ScaleW,
	}
	if req.weights.format != cgo.WeightDense {
		rep.WeightFormat = req.weights.format.String()
	}
	if c.Passed {
		rep.Reason = ""
	}
	for _, m := range c.Mismatches {
		rep.Mismatches = append(rep.Mismatches, toElementJSON(m, in.N))
	}
	return rep, nil
}

// verifyOptions are the measurement options of a verify command: the seed given.
func verifyOptions(seed uint64) measure.Options {
	o := measure.DefaultOptions()
	o.Seed = seed
	return o
}

// checkRan turns a check that could not run into the command's error: a shape the kernels
// refuse is a usage error (exit 2), anything else a failure (exit 1).
func checkRan(c measure.Check, refused string) error {
	switch c.Status {
	case measure.StatusOK:
		return nil
	case measure.StatusSkipped:
		return usageError("%s: %s", refused, c.Reason)
	}
	return failure("%s", c.Reason)
}

func printLinearReport(out io.Writer, r linearReport) {
	w := r.Worst
	fmt.Fprintf(out, "%s; worst element %d (row %d, col %d): got %.7g, want %.7g, |error| %.3g (bound %.3g)\n",
		relErrorText(r.RelError, r.Tolerance, r.NonFinite), w.Index, w.Row, w.Col, float64(w.Got), w.Want, float64(w.AbsErr), w.Bound)
	if r.Passed {
		fmt.Fprintln(out, "PASS")
		return
	}
	fmt.Fprintf(out, "FAIL: %s\n", r.Reason)
	for _, m := range r.Mismatches {
		fmt.Fprintf(out, "  element %d (row %d, col %d): got %.7g, want %.7g, |error| %.3g > bound %.3g\n",
			m.Index, m.Row, m.Col, float64(m.Got), m.Want, float64(m.AbsErr), m.Bound)
	}
}

// ---- output ----------------------------------------------------------------------------------

// relErrorOf is a verification's relative error, or nil where it is undefined: with a NaN or
// infinite output the error over the finite ones says nothing (0 when every output is NaN).
func relErrorOf(v measure.Verification) *jsonFloat {
	if v.NonFinite > 0 || math.IsNaN(v.RelError) || math.IsInf(v.RelError, 0) {
		return nil
	}
	e := jsonFloat(v.RelError)
	return &e
}

// relErrorText says the relative error and its tolerance, or why there is none.
func relErrorText(e *jsonFloat, tolerance float64, nonFinite int) string {
	if e == nil {
		return fmt.Sprintf("relative L2 error undefined: %d output(s) NaN or infinite (tolerance %.3g)", nonFinite, tolerance)
	}
	return fmt.Sprintf("relative L2 error %.3g (tolerance %.3g)", float64(*e), tolerance)
}

// jsonFloat writes NaN and infinities, which JSON numbers cannot hold, as strings.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = jsonFloat(math.NaN())
	case `"+Inf"`:
		*f = jsonFloat(math.Inf(1))
	case `"-Inf"`:
		*f = jsonFloat(math.Inf(-1))
	default:
		v, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return fmt.Errorf("not a number: %s", b)
		}
		*f = jsonFloat(v)
	}
	return nil
}
