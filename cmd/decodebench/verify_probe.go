package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench verify probe NAME`: each bandwidth and compute probe run once at a small size,
// every value it wrote checked exactly against bench/ref.

// Compute-probe launches: small and explicit, so the reference is quick (measure.Verify runs
// them at the few iterations whose result is exact).
const (
	probeComputeBlocks  = 2
	probeComputeThreads = 64
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
			seedFlag(""),
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

// runProbe is measure.Verify of one probe at the requested size (compute probes on a small
// explicit launch, so the reference is quick); it only turns the Check into the report.
func runProbe(dev *cgo.Device, kind cgo.ProbeKind, req probeRequest) (probeReport, error) {
	spec := measure.ProbeSpec{Kind: kind, Blocks: probeComputeBlocks, Threads: probeComputeThreads}
	if kind.Memory() {
		spec = measure.ProbeSpec{Kind: kind, Bytes: 4 * req.words, Blocks: req.blocks, Threads: req.threads}
	}
	c := measure.Verify(dev, spec.Spec(), verifyOptions(req.seed))
	if c.Status != measure.StatusOK {
		return probeReport{}, errors.New(c.Reason)
	}
	rep := probeReport{Name: kind.String(), Passed: c.Passed, Checked: c.Checked, Mismatches: c.OutOfBound,
		Blocks: c.Plan.Blocks, Threads: c.Plan.Threads, BytesMoved: c.Bytes, FLOPs: c.FLOPs}
	switch {
	case !c.Passed:
		rep.First, rep.Detail = c.Reason, c.Reason
	case kind.Memory():
		rep.Detail = fmt.Sprintf("%d words of seed %d, every one checked exactly", req.words, req.seed)
	default:
		rep.Detail = c.Reason
	}
	return rep, nil
}
