package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/urfave/cli/v2"

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

func onUsageError(c *cli.Context, err error, isSubcommand bool) error { return usageError("%v", err) }

// ---- linear ----------------------------------------------------------------------------------

func verifyLinearCommand() *cli.Command {
	return &cli.Command{
		Name:      "linear",
		Usage:     "check Y = X·Wᵀ (the decode linear layer) for one shape",
		UsageText: "decodebench verify linear --batch B --n N --k K [--dtype bf16|fp16] [--variant auto|gemv|mma] [--split-k S] [--backend auto|cuda|emu] [--seed S] [--json]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "batch", Usage: "sequences in the batch (rows of X and Y), 1..256"},
			&cli.IntFlag{Name: "n", Usage: "output features (rows of W), >= 1"},
			&cli.IntFlag{Name: "k", Usage: "input features, a positive multiple of 8"},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "element type of X, W and Y: bf16 or fp16"},
			&cli.StringFlag{Name: "variant", Value: "auto", Usage: "kernel: gemv (CUDA cores), mma (tensor cores) or auto"},
			&cli.IntFlag{Name: "split-k", Usage: "K splits of the gemv variant, 1..64; 0 lets the kernel choose"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the input hash (X and W get distinct seeds derived from it)"},
			jsonFlag(),
		}, backendFlags()...),
		OnUsageError: onUsageError,
		Action:       verifyLinearAction,
	}
}

// linearRequest is a validated `verify linear` command line.
type linearRequest struct {
	in      ref.LinearInputs
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
	case batch < 1 || batch > 256:
		return r, usageError("--batch %d: the linear kernels take a batch of 1..256", batch)
	case n < 1 || n > math.MaxInt32:
		return r, usageError("--n %d: want 1..%d output features", n, math.MaxInt32)
	case k < 8 || k%8 != 0 || k > math.MaxInt32:
		return r, usageError("--k %d: want a positive multiple of 8 (rows are read as 16-byte vectors)", k)
	}
	dtype, err := ref.ParseDType(c.String("dtype"))
	if err != nil || (dtype != ref.BF16 && dtype != ref.FP16) {
		return r, usageError("--dtype %q: the linear kernels take bf16 or fp16", c.String("dtype"))
	}
	if r.variant, err = cgo.ParseLinearVariant(c.String("variant")); err != nil {
		return r, usageError("--variant: %v", err)
	}
	if r.splitK = c.Int("split-k"); r.splitK < 0 || r.splitK > cgo.MaxSplitK {
		return r, usageError("--split-k %d: want 0 (the kernel chooses) or a count of splits in 1..%d", r.splitK, cgo.MaxSplitK)
	}
	if r.variant == cgo.LinearMMA && r.splitK > 1 {
		return r, usageError("--split-k %d: only the gemv variant splits K (mma splits it inside a block)", r.splitK)
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
	RelError       jsonFloat     `json:"rel_error"`
	Tolerance      float64       `json:"tolerance"`
	Worst          elementJSON   `json:"worst"`
	NonFinite      int           `json:"non_finite"`
	OutOfBound     int           `json:"out_of_bound"`
	Mismatches     []elementJSON `json:"mismatches,omitempty"`
	Kernel         string        `json:"kernel"`
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
	out, asJSON := c.App.Writer, c.Bool("json")
	if !asJSON {
		in := req.in
		fmt.Fprintf(out, "verify linear: batch %d, n %d, k %d, %v, seed %d on the %s\n",
			in.Batch, in.N, in.K, in.DType, req.seed, describeDevice(lib, dev))
	}
	rep, err := runLinear(dev, req, out, asJSON)
	if err != nil {
		return err
	}
	rep.ranOn = newRanOn(lib, dev)
	return finishVerify(out, asJSON, "linear", rep, rep.Passed, rep.Reason, func() { printLinearReport(out, rep) })
}

// runLinear allocates and fills the inputs, poisons Y, plans, runs and compares.
func runLinear(dev *cgo.Device, req linearRequest, out io.Writer, quiet bool) (linearReport, error) {
	in := req.in
	dt := cgo.DType(in.DType)
	elem := dt.Bytes()
	var bufs []*cgo.Buffer
	defer func() {
		for _, b := range bufs {
			b.Close()
		}
	}()
	alloc := func(what string, bytes uint64) (*cgo.Buffer, error) {
		b, err := dev.Alloc(bytes)
		if err != nil {
			return nil, failure("allocating %s (%d bytes): %v", what, bytes, err)
		}
		bufs = append(bufs, b)
		return b, nil
	}
	batch, n, k := uint64(in.Batch), uint64(in.N), uint64(in.K)
	x, err := alloc("X", batch*k*elem)
	if err != nil {
		return linearReport{}, err
	}
	w, err := alloc("W", n*k*elem)
	if err != nil {
		return linearReport{}, err
	}
	y, err := alloc("Y", batch*n*elem)
	if err != nil {
		return linearReport{}, err
	}
	if err := x.FillHash(dt, batch*k, in.SeedX, in.ScaleX); err != nil {
		return linearReport{}, failure("filling X: %v", err)
	}
	if err := w.FillHash(dt, n*k, in.SeedW, in.ScaleW); err != nil {
		return linearReport{}, failure("filling W: %v", err)
	}
	if err := y.Memset(0xFF); err != nil { // NaN: an element the kernel skips cannot pass
		return linearReport{}, failure("poisoning Y: %v", err)
	}

	params := cgo.LinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, Batch: in.Batch, N: in.N, K: in.K,
		DType: dt, Variant: req.variant, SplitK: req.splitK}
	plan, workspace, err := dev.LinearPlan(params)
	if errors.Is(err, cgo.ErrUnsupportedShape) || errors.Is(err, cgo.ErrInvalidArgument) {
		return linearReport{}, usageError("the linear kernels refuse this shape: %v", err)
	} else if err != nil {
		return linearReport{}, failure("%v", err)
	}
	if !quiet {
		fmt.Fprintf(out, "plan: variant %s, split-k %d, workspace %d bytes\n", plan.Variant, plan.SplitK, workspace)
	}
	if workspace > 0 {
		ws, err := alloc("the split-K workspace", workspace)
		if err != nil {
			return linearReport{}, err
		}
		plan.Workspace, plan.WorkspaceBytes = ws.Ptr, ws.Bytes
	}
	if err := dev.Linear(plan); err != nil {
		return linearReport{}, failure("%v", err)
	}
	if err := dev.Synchronize(); err != nil {
		return linearReport{}, failure("%v", err)
	}
	raw := make([]byte, batch*n*elem)
	if err := y.CopyToHost(raw); err != nil {
		return linearReport{}, failure("copying Y back: %v", err)
	}
	got, err := ref.Decode(in.DType, raw)
	if err != nil {
		return linearReport{}, failure("%v", err)
	}

	want := ref.Linear(in)
	cmp := ref.Compare(got, want.Want, want.ElementBounds(in.DType, in.K), ref.LinearTolerance(in.DType))
	rep := linearReport{
		Passed: cmp.Passed, Reason: cmp.Reason(), RelError: jsonFloat(cmp.RelError), Tolerance: cmp.Tolerance,
		Worst: toElementJSON(cmp.Worst, in.N), NonFinite: cmp.NonFinite, OutOfBound: cmp.OutOfBound,
		Kernel: "linear", Variant: plan.Variant.String(), SplitK: plan.SplitK, WorkspaceBytes: workspace,
		Batch: in.Batch, N: in.N, K: in.K, DType: in.DType.String(),
		Seed: req.seed, SeedX: in.SeedX, SeedW: in.SeedW, ScaleW: in.ScaleW,
	}
	for _, m := range cmp.Mismatches {
		rep.Mismatches = append(rep.Mismatches, toElementJSON(m, in.N))
	}
	return rep, nil
}

func printLinearReport(out io.Writer, r linearReport) {
	w := r.Worst
	fmt.Fprintf(out, "relative L2 error %.3g (tolerance %.3g); worst element %d (row %d, col %d): got %.7g, want %.7g, |error| %.3g (bound %.3g)\n",
		float64(r.RelError), r.Tolerance, w.Index, w.Row, w.Col, float64(w.Got), w.Want, float64(w.AbsErr), w.Bound)
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
