package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench verify probe NAME`: each bandwidth and compute probe run once at a small size,
// every value it wrote checked exactly against bench/ref.

// Compute-probe launches: small and explicit, so the result buffer is known and the reference
// quick. One mma iteration keeps every accumulator exact (see ref.MMAProbeResult).
const (
	probeComputeBlocks  = 2
	probeComputeThreads = 64
	probeFMAIterations  = 2
	probeMMAIterations  = 1
	probeTriadScalar    = 3 // not a power of two: the one rounding of fmaf shows
)

func verifyProbeCommand() *cli.Command {
	var names []string
	var subs []*cli.Command
	for _, kind := range cgo.ProbeKinds {
		names = append(names, kind.String())
		subs = append(subs, verifyProbeKindCommand(kind.String(), []cgo.ProbeKind{kind}))
	}
	subs = append(subs, verifyProbeKindCommand("all", cgo.ProbeKinds))
	return &cli.Command{
		Name:         "probe",
		Usage:        "check a bandwidth or compute probe: " + strings.Join(names, ", ") + " or all",
		UsageText:    "decodebench verify probe NAME [--words W] [--backend auto|cuda|emu] [--json]",
		Subcommands:  subs,
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("verify probe: unknown probe %q (want %s or all)", c.Args().First(), strings.Join(names, ", "))
			}
			return usageError("verify probe needs a probe name: %s or all", strings.Join(names, ", "))
		},
	}
}

func verifyProbeKindCommand(name string, kinds []cgo.ProbeKind) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: "run the " + name + " probe once at a small size and check it exactly",
		Flags: append([]cli.Flag{
			&cli.Uint64Flag{Name: "words", Value: 1 << 16, Usage: "32-bit words per buffer for the memory probes, a positive multiple of 4"},
			&cli.IntFlag{Name: "blocks", Usage: "blocks of the memory probes; 0 lets the kernel choose"},
			&cli.IntFlag{Name: "threads", Usage: "threads per block of the memory probes (a multiple of 32); 0 lets the kernel choose"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the input hash"},
			jsonFlag(),
		}, backendFlags()...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("verify probe %s takes no further arguments (got %q)", name, c.Args().First())
			}
			req := probeRequest{words: c.Uint64("words"), blocks: c.Int("blocks"), threads: c.Int("threads"), seed: c.Uint64("seed")}
			switch {
			case req.words < 4 || req.words%4 != 0 || req.words > 1<<40:
				return usageError("--words %d: want a positive multiple of 4 (the probes move 16-byte vectors)", req.words)
			case req.blocks < 0 || req.blocks > math.MaxInt32:
				return usageError("--blocks %d: want 0 (auto) or a count of blocks", req.blocks)
			case req.threads != 0 && (req.threads < 32 || req.threads > 1024 || req.threads%32 != 0):
				return usageError("--threads %d: want 0 (auto) or a multiple of 32 in 32..1024", req.threads)
			}
			backend, err := parseBackendFlags(c)
			if err != nil {
				return err
			}
			return verifyProbes(c, backend, kinds, req)
		},
	}
}

type probeRequest struct {
	words           uint64
	blocks, threads int
	seed            uint64
}

// probeReport is the verdict on one probe.
type probeReport struct {
	Name       string  `json:"name"`
	Passed     bool    `json:"passed"`
	Checked    int     `json:"checked"`    // values compared exactly
	Mismatches int     `json:"mismatches"` // values that differ
	First      string  `json:"first_mismatch,omitempty"`
	Detail     string  `json:"detail"`
	Blocks     int     `json:"blocks"`
	Threads    int     `json:"threads"`
	BytesMoved float64 `json:"bytes_moved"`
	FLOPs      float64 `json:"flops"`
}

func verifyProbes(c *cli.Context, backend backendChoice, kinds []cgo.ProbeKind, req probeRequest) error {
	lib, dev, err := backend.open()
	if err != nil {
		return err
	}
	defer dev.Close()
	out, asJSON := c.App.Writer, c.Bool("json")
	if !asJSON {
		fmt.Fprintf(out, "verify probe: %d words, seed %d on the %s\n", req.words, req.seed, describeDevice(lib, dev))
	}
	var reports []probeReport
	var failed []string
	for _, kind := range kinds {
		rep, err := runProbe(dev, kind, req)
		if err != nil {
			return failure("probe %s: %v", kind, err)
		}
		reports = append(reports, rep)
		if !rep.Passed {
			failed = append(failed, kind.String())
		}
		if !asJSON {
			verdict := "PASS"
			if !rep.Passed {
				verdict = fmt.Sprintf("FAIL: %d of %d differ, first %s", rep.Mismatches, rep.Checked, rep.First)
			}
			fmt.Fprintf(out, "  %-5s  %s (%s; %d blocks x %d threads)\n", kind, verdict, rep.Detail, rep.Blocks, rep.Threads)
		}
	}
	if asJSON {
		err := writeJSON(out, struct {
			Passed  bool          `json:"passed"`
			Backend string        `json:"backend"`
			Library string        `json:"library"`
			Device  int           `json:"device"`
			Words   uint64        `json:"words"`
			Seed    uint64        `json:"seed"`
			Probes  []probeReport `json:"probes"`
		}{len(failed) == 0, lib.Name(), lib.Path(), dev.Index(), req.words, req.seed, reports})
		if err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return failure("verify probe failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// runProbe allocates and fills the probe's buffers, poisons what it writes, runs it once and
// checks every value it wrote.
func runProbe(dev *cgo.Device, kind cgo.ProbeKind, req probeRequest) (probeReport, error) {
	var bufs []*cgo.Buffer
	defer func() {
		for _, b := range bufs {
			b.Close()
		}
	}()
	// alloc allocates, poisons with 0xFF (NaN as a float) and, when fill is set, fills.
	alloc := func(bytes uint64, fill func(*cgo.Buffer) error) (*cgo.Buffer, error) {
		b, err := dev.Alloc(bytes)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		if err := b.Memset(0xFF); err != nil {
			return nil, err
		}
		if fill != nil {
			err = fill(b)
		}
		return b, err
	}
	words := req.words
	seedB, seedC := ref.Hash64(req.seed, 1), ref.Hash64(req.seed, 2)
	hashWords := func(b *cgo.Buffer) error { return b.FillHash(cgo.DTypeU32, words, req.seed, 1) }
	p := cgo.ProbeParams{Kind: kind, Words: words, Seed: req.seed, Scalar: probeTriadScalar,
		Blocks: req.blocks, Threads: req.threads}
	var a, b, c, result *cgo.Buffer
	var err error
	switch kind {
	case cgo.ProbeRead:
		if a, err = alloc(4*words, hashWords); err == nil {
			result, err = alloc(4, nil)
		}
	case cgo.ProbeWrite:
		a, err = alloc(4*words, nil)
	case cgo.ProbeCopy:
		if a, err = alloc(4*words, hashWords); err == nil {
			b, err = alloc(4*words, nil)
		}
	case cgo.ProbeTriad:
		a, err = alloc(4*words, nil)
		if err == nil {
			b, err = alloc(4*words, func(b *cgo.Buffer) error { return b.FillHash(cgo.DTypeF32, words, seedB, 1) })
		}
		if err == nil {
			c, err = alloc(4*words, func(c *cgo.Buffer) error { return c.FillHash(cgo.DTypeF32, words, seedC, 1) })
		}
	default: // compute probes: one float per launched thread, which the plan says
		p.Blocks, p.Threads, p.Iterations = probeComputeBlocks, probeComputeThreads, probeFMAIterations
		if kind == cgo.ProbeMMABF16 {
			p.Iterations = probeMMAIterations
		}
		var plan cgo.ProbeResult
		if result, err = alloc(4, nil); err == nil { // the plan checks that a result is given
			p.Result = result.Ptr
			plan, err = dev.ProbePlan(p)
		}
		if err == nil {
			result, err = alloc(4*uint64(plan.BlocksUsed)*uint64(plan.ThreadsUsed), nil)
		}
	}
	if err != nil {
		return probeReport{}, err
	}
	p.A, p.B, p.C, p.Result = ptrOf(a), ptrOf(b), ptrOf(c), ptrOf(result)
	res, err := dev.Probe(p)
	if err == nil {
		err = dev.Synchronize()
	}
	if err != nil {
		return probeReport{}, err
	}

	rep := probeReport{Name: kind.String(), Blocks: res.BlocksUsed, Threads: res.ThreadsUsed,
		BytesMoved: res.BytesMoved, FLOPs: res.FLOPs}
	switch kind {
	case cgo.ProbeRead:
		got := make([]uint32, 1)
		err = cgo.Read(result, got)
		want := ref.ReadSum(req.seed, words)
		rep.Detail = fmt.Sprintf("sum of %d words %#08x, want %#08x", words, got[0], want)
		rep.check(got, []uint32{want})
	case cgo.ProbeWrite, cgo.ProbeCopy:
		dst := a
		if kind == cgo.ProbeCopy {
			dst = b
		}
		got := make([]uint32, words)
		err = cgo.Read(dst, got)
		want := ref.FillWords(req.seed, int(words)) // COPY moves the hashed words
		if kind == cgo.ProbeWrite {
			want = ref.WriteWords(req.seed, int(words))
		}
		rep.Detail = fmt.Sprintf("%d words of seed %d", words, req.seed)
		rep.check(got, want)
	case cgo.ProbeTriad:
		got := make([]float32, words)
		err = cgo.Read(a, got)
		want := ref.Triad(ref.Fill(ref.F32, seedB, 1, int(words)), ref.Fill(ref.F32, seedC, 1, int(words)), probeTriadScalar)
		rep.Detail = fmt.Sprintf("%d words of b + %v·c, one rounding", words, float32(probeTriadScalar))
		rep.checkFloats(got, want)
	default:
		threads := res.BlocksUsed * res.ThreadsUsed
		got := make([]float32, threads)
		err = cgo.Read(result, got)
		want := make([]float32, threads)
		for tid := range want {
			if kind == cgo.ProbeFMAF32 {
				want[tid] = ref.FMAProbeResult(tid%res.ThreadsUsed, p.Iterations)
			} else {
				want[tid], _ = ref.MMAProbeResult(tid%res.ThreadsUsed, p.Iterations) // exact at 1 iteration
			}
		}
		rep.Detail = fmt.Sprintf("%d threads' chains of %d iterations, %.4g FLOPs", threads, p.Iterations, res.FLOPs)
		rep.checkFloats(got, want)
	}
	return rep, err
}

// ptrOf is a buffer's device address, 0 for none.
func ptrOf(b *cgo.Buffer) uint64 {
	if b == nil {
		return 0
	}
	return b.Ptr
}

// check compares words exactly.
func (r *probeReport) check(got, want []uint32) {
	r.Checked = len(want)
	for i := range want {
		if got[i] != want[i] {
			if r.Mismatches == 0 {
				r.First = fmt.Sprintf("[%d] = %#08x, want %#08x", i, got[i], want[i])
			}
			r.Mismatches++
		}
	}
	r.Passed = r.Mismatches == 0
}

// checkFloats compares floats bit for bit (so a NaN never passes).
func (r *probeReport) checkFloats(got, want []float32) {
	r.Checked = len(want)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if r.Mismatches == 0 {
				r.First = fmt.Sprintf("[%d] = %.9g, want %.9g", i, got[i], want[i])
			}
			r.Mismatches++
		}
	}
	r.Passed = r.Mismatches == 0
}
