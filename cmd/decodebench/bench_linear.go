package main

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench bench linear`: the decode linear layers of a model, or one N x K shape.

func benchLinearCommand() *cli.Command {
	return &cli.Command{
		Name:  "linear",
		Usage: "time the decode linear layers of a model (or one N x K shape) at each batch size",
		UsageText: "decodebench bench linear (--model NAME [--tp N] | --n N --k K) [--batch LIST] [--dtype bf16|fp16] " +
			"[--variant auto|gemv|mma|tiled] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]\n\n   LIST syntax: " + axes.Syntax,
		Description: "With --model, every distinct linear shape of one decode step (fused QKV, O, fused gate/up,\n" +
			"down, LM head; routers and experts for a mixture of experts) at each batch size. The read\n" +
			"probe runs first: % READ is the achieved bandwidth over that measured ceiling.",
		Flags: append(append(shapeFlags("1-256*2"),
			&cli.IntFlag{Name: "n", EnvVars: []string{"DECODEBENCH_N"}, Usage: "output features (rows of W), instead of --model"},
			&cli.IntFlag{Name: "k", EnvVars: []string{"DECODEBENCH_K"}, Usage: "input features, a positive multiple of 8, instead of --model"},
			&cli.StringFlag{Name: "variant", Value: "auto", EnvVars: []string{"DECODEBENCH_VARIANT"}, Usage: "kernel: gemv, mma, tiled or auto"},
			&cli.IntFlag{Name: "split-k", EnvVars: []string{"DECODEBENCH_SPLIT_K"}, Usage: fmt.Sprintf("K splits of the gemv or tiled variant, 1..%d; 0 lets the kernel choose", cgo.MaxSplitK)},
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
	batches, err := parseBatches(c, cgo.MaxBatch, "the linear kernels")
	if err != nil {
		return nil, "", 0, err
	}
	variant, err := cgo.ParseLinearVariant(c.String("variant"))
	if err != nil {
		return nil, "", 0, usageError("--variant: %v", err)
	}
	splitK := c.Int("split-k")
	switch {
	case splitK < 0 || splitK > cgo.MaxSplitK:
		return nil, "", 0, usageError("--split-k %d: want 0 (the kernel chooses) or a count of splits in 1..%d", splitK, cgo.MaxSplitK)
	case variant == cgo.LinearMMA && splitK > 1:
		return nil, "", 0, usageError("--split-k %d: only the gemv and tiled variants split K", splitK)
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
					Reason: fmt.Sprintf("needs %s, above --max-gb %g", units.Bytes(need), settings.maxBytes/1e9)}
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
		if o.Plan.Variant != "" { // auto, resolved by the plan
			r.Variant = o.Plan.Variant
		}
		if o.Plan.SplitK > 0 {
			r.SplitK = o.Plan.SplitK
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
