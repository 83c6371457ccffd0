package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench verify smallop OP`: one small op of a decode step run once on hashed inputs
// (outputs poisoned with NaN first) and checked against bench/ref, element by element: the
// flags make a measure.SmallOpSpec, measure.Verify checks it, and this file prints the Check.

var smallOps = measure.SmallOps

func verifySmallOpCommand() *cli.Command {
	cmd := &cli.Command{
		Name:      "smallop",
		Usage:     "check one small op of a decode step: " + strings.Join(smallOps, ", "),
		UsageText: "decodebench verify smallop OP [--batch B] [--hidden H] [--vocab V] [--dtype bf16|fp16] [op flags] [--backend auto|cuda|emu] [--seed S] [--json]",
		Description: "embedding: rows of a [vocab x hidden] table by token id. rmsnorm: [--residual] [--unit-offset].\n" +
			"rope: rotary embedding fused with the KV append (--q-heads, --kv-heads, --head-dim, --rotary-dim,\n" +
			"--position, --rope default|linear|dynamic|llama3, --theta). act: silu or gelu_tanh (--activation)\n" +
			"of a [batch x 2*hidden] gate_up. bias: a bias added to [batch x hidden]. argmax: greedy ids of\n" +
			"[batch x vocab] logits. moe: route, group and combine (--experts, --top-k, --topk-first, --renormalize).",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return usageError("verify smallop needs an op: %s", strings.Join(smallOps, ", "))
		},
	}
	for _, op := range smallOps {
		op := op
		cmd.Subcommands = append(cmd.Subcommands, &cli.Command{
			Name:         op,
			Usage:        "check " + op + " (see verify smallop --help)",
			Flags:        smallOpFlags(),
			OnUsageError: onUsageError,
			Action:       func(c *cli.Context) error { return verifySmallOpAction(c, op) },
		})
	}
	return cmd
}

func smallOpFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "batch", Value: 1, Usage: "rows (sequences or tokens)"},
		&cli.IntFlag{Name: "hidden", Value: 4096, Usage: "row length (the ffn width for act), a multiple of 8"},
		&cli.IntFlag{Name: "vocab", Value: 32000, Usage: "vocabulary (embedding, argmax)"},
		&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "bf16 or fp16"},
		&cli.BoolFlag{Name: "residual", Usage: "rmsnorm: add a residual first (and check the stored sum)"},
		&cli.BoolFlag{Name: "unit-offset", Usage: "rmsnorm: scale by 1 + weight (Gemma)"},
		&cli.IntFlag{Name: "q-heads", Value: 32, Usage: "rope: query heads"},
		&cli.IntFlag{Name: "kv-heads", Value: 8, Usage: "rope: KV heads"},
		&cli.IntFlag{Name: "head-dim", Value: 128, Usage: "rope: 64, 80, 96, 128 or 256"},
		&cli.IntFlag{Name: "rotary-dim", Usage: "rope: rotated elements of a head, even; 0 = head-dim"},
		&cli.IntFlag{Name: "position", Value: 1000, Usage: "rope: position of every sequence's new token"},
		&cli.StringFlag{Name: "rope", Value: "default", Usage: "rope scaling: default, linear (factor 4), dynamic (NTK, factor 2 past 2048) or llama3 (factor 8, 1 / 4, 8192)"},
		&cli.Float64Flag{Name: "theta", Value: 500000, Usage: "rope theta"},
		&cli.StringFlag{Name: "activation", Value: "silu", Usage: "act: silu or gelu_tanh"},
		&cli.IntFlag{Name: "experts", Value: 8, Usage: "moe: experts"},
		&cli.IntFlag{Name: "top-k", Value: 2, Usage: "moe: experts per token"},
		&cli.BoolFlag{Name: "topk-first", Usage: "moe: top k of the logits, then their softmax (else softmax, then top k)"},
		&cli.BoolFlag{Name: "renormalize", Usage: "moe: divide the top k probabilities by their sum"},
		seedFlag(""),
		jsonFlag(),
	}, backendFlags()...)
}

// smallOpCheck is one output of an op against its reference.
type smallOpCheck struct {
	Output     string    `json:"output"`
	Passed     bool      `json:"passed"`
	Reason     string    `json:"reason,omitempty"`
	Count      int       `json:"count"`
	WorstError jsonFloat `json:"worst_abs_err"`
}

type smallOpReport struct {
	Op     string         `json:"op"`
	Passed bool           `json:"passed"`
	DType  string         `json:"dtype"`
	Batch  int            `json:"batch"`
	Checks []smallOpCheck `json:"checks"`
	Seed   uint64         `json:"seed"`
	ranOn
}

func verifySmallOpAction(c *cli.Context, op string) error {
	if c.NArg() > 0 {
		return usageError("verify smallop %s takes no arguments (got %q)", op, c.Args().First())
	}
	d, err := ref.ParseDType(c.String("dtype"))
	if err != nil || (d != ref.BF16 && d != ref.FP16) {
		return usageError("--dtype %q: the small ops take bf16 or fp16", c.String("dtype"))
	}
	if c.Int("batch") < 1 { // the library refuses a batch past its limit, naming both
		return usageError("--batch %d: want 1 or more", c.Int("batch"))
	}
	spec, err := smallOpSpec(c, op, d)
	if err != nil {
		return usageError("verify smallop %s: %v", op, err)
	}
	backend, err := parseBackendFlags(c)
	if err != nil {
		return err
	}
	lib, dev, err := backend.open()
	if err != nil {
		return err
	}
	defer dev.Close()
	seed := c.Uint64("seed")
	check := measure.Verify(dev, spec.Spec(), verifyOptions(seed))
	switch check.Status {
	case measure.StatusOK:
	case measure.StatusSkipped: // the library refuses a bad shape before any launch, with the value named
		return usageError("verify smallop %s: %s", op, check.Reason)
	default:
		return failure("verify smallop %s: %s", op, check.Reason)
	}
	rep := smallOpReport{Op: op, Passed: check.Passed, DType: d.String(), Batch: spec.Batch, Seed: seed, ranOn: newRanOn(lib, dev)}
	for _, o := range check.Outputs {
		rep.Checks = append(rep.Checks, smallOpCheck{Output: o.Output, Passed: o.Passed, Reason: o.Reason(), Count: o.Count, WorstError: jsonFloat(o.Worst.AbsErr)})
	}
	out := c.App.Writer
	return finishVerify(out, c.Bool("json"), "smallop "+op, rep, rep.Passed, check.Reason, func() {
		fmt.Fprintf(out, "verify smallop %s: batch %d, %v, seed %d on the %s\n", op, rep.Batch, d, seed, describeDevice(lib, dev))
		for _, ch := range rep.Checks {
			verdict := "ok"
			if !ch.Passed {
				verdict = "FAILED: " + ch.Reason
			}
			fmt.Fprintf(out, "  %-22s %9d elements, worst |error| %.3g: %s\n", ch.Output, ch.Count, float64(ch.WorstError), verdict)
		}
	})
}

// smallOpSpec is the op's spec from the flags; an error names the flag and what it takes.
func smallOpSpec(c *cli.Context, op string, d ref.DType) (measure.SmallOpSpec, error) {
	s := measure.SmallOpSpec{Op: op, DType: cgo.DType(d), Batch: c.Int("batch"), Hidden: c.Int("hidden"), Vocab: c.Int("vocab"),
		Residual: c.Bool("residual"), UnitOffset: c.Bool("unit-offset"),
		QHeads: c.Int("q-heads"), KVHeads: c.Int("kv-heads"), HeadDim: c.Int("head-dim"), Position: c.Int("position"),
		Experts: c.Int("experts"), TopK: c.Int("top-k"), Routing: cgo.MoESoftmaxTopK, Renormalize: c.Bool("renormalize")}
	if c.Bool("topk-first") {
		s.Routing = cgo.MoETopKSoftmax
	}
	switch op {
	case "act":
		act := map[string]cgo.Activation{"silu": cgo.ActSiLU, "gelu_tanh": cgo.ActGeLUTanh}
		a, ok := act[c.String("activation")]
		if !ok {
			return s, fmt.Errorf("--activation %q: want silu or gelu_tanh", c.String("activation"))
		}
		s.Activation = a
	case "rope":
		r := ref.Rope{Theta: float64(float32(c.Float64("theta"))), RotaryDim: c.Int("rotary-dim")}
		switch c.String("rope") {
		case "default":
		case "linear":
			r.Scaling, r.Factor = ref.RopeLinear, 4
		case "dynamic":
			r.Scaling, r.Factor, r.OriginalMaxPositions = ref.RopeDynamicNTK, 2, 2048
		case "llama3":
			r.Scaling, r.Factor, r.LowFreqFactor, r.HighFreqFactor, r.OriginalMaxPositions = ref.RopeLlama3, 8, 1, 4, 8192
		default:
			return s, fmt.Errorf("--rope %q: want default, linear, dynamic or llama3", c.String("rope"))
		}
		if s.QHeads < 1 || s.KVHeads < 1 || s.Position < 0 || s.Position >= math.MaxInt32 {
			return s, fmt.Errorf("--q-heads %d, --kv-heads %d and --position %d: want heads >= 1 and a position 0..2^31-2", s.QHeads, s.KVHeads, s.Position)
		}
		s.Rope = r
	}
	return s, nil
}
