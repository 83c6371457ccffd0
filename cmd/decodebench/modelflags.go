package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/timing"
)

// resolveModel turns the model flags into one GPU's shard of a model shape. Every error is a
// usage error: it names the value and what would be accepted.
func resolveModel(c *cli.Context) (model.Shape, error) {
	shapes, err := resolveModels(c)
	if err != nil {
		return model.Shape{}, err
	}
	if len(shapes) != 1 {
		return model.Shape{}, usageError("--weight-dtype %s: give one weight format here (a list goes to predict and sweep)", c.String("weight-dtype"))
	}
	return shapes[0], nil
}

// resolveModels is resolveModel with one shape per --weight-dtype format of a list (the
// model's own format when none is given), in the order given.
func resolveModels(c *cli.Context) ([]model.Shape, error) {
	name, cfg := c.String("model"), c.String("model-config")
	var shape model.Shape
	var err error
	switch {
	case name != "" && cfg != "":
		return nil, usageError("give either --model or --model-config, not both (got --model %q and --model-config %q)", name, cfg)
	case name != "":
		shape, err = model.Lookup(name)
	case cfg != "":
		shape, err = model.LoadHFConfig(cfg)
	default:
		return nil, usageError("no model given: use --model NAME (see `decodebench model list`) or --model-config FILE")
	}
	if err != nil {
		return nil, usageError("%v", err)
	}
	formats, err := parseWeightDTypes(c)
	if err != nil {
		return nil, err
	}
	if s := c.String("kv-dtype"); s != "" {
		d, err := model.ParseDType(s)
		if err != nil || (d != model.BF16 && d != model.FP16 && d != model.FP8) {
			return nil, usageError("--kv-dtype %q: accepted are bf16, fp16 and fp8 (e4m3)", s)
		}
		shape.KVDType = d
	}
	tp := c.Int("tp")
	if tp < 1 {
		return nil, usageError("--tp %d: the tensor-parallel degree must be a whole number >= 1", tp)
	}
	if tp > 1 {
		shape, err = shape.Shard(tp)
		if err != nil {
			return nil, usageError("--tp %d: %v", tp, err)
		}
	}
	if formats == nil {
		if err := shape.Validate(); err != nil {
			return nil, usageError("%v", err)
		}
		return []model.Shape{shape}, nil
	}
	var shapes []model.Shape
	for _, w := range formats {
		s := w.Apply(shape)
		if err := s.Validate(); err != nil {
			return nil, usageError("%v", err)
		}
		// A format the kernels cannot store at one of the model's linears is refused here,
		// before any device work: what it would price or measure is not that model.
		if err := sweep.CheckShape(s); err != nil {
			return nil, usageError("--weight-dtype %s on %s: %v", w, s.Name, err)
		}
		shapes = append(shapes, s)
	}
	return shapes, nil
}

// parseReserve reads --reserve, the fraction of GPU memory kept free, of predict and sweep. NaN
// fails both comparisons and so is refused with the infinities, negatives and 1 or more:
// memory * (1 - reserve) must be a usable size.
func parseReserve(c *cli.Context) (float64, error) {
	reserve := c.Float64("reserve")
	if !(reserve >= 0 && reserve < 1) {
		return 0, usageError("--reserve %g: give the fraction of GPU memory kept free, in [0, 1), such as 0.1 or 10%%", reserve)
	}
	return reserve, nil
}

// parseBatchContextLists reads the --batch and --context axes of predict, step and sweep.
func parseBatchContextLists(c *cli.Context) (batches, contexts []int, err error) {
	if batches, err = axes.ParseIntList(c.String("batch")); err != nil {
		return nil, nil, usageError("--batch: %v", err)
	}
	if contexts, err = axes.ParseIntList(c.String("context")); err != nil {
		return nil, nil, usageError("--context: %v", err)
	}
	return batches, contexts, nil
}

// parseTimingFlags reads the timing rule of bench, step, sweep and validate: --warmup,
// --min-samples, --min-time, --target-spread, --max-time and, where the command has it (0
// where not), --max-samples; a rule timing.Config refuses is a usage error led by what.
func parseTimingFlags(c *cli.Context, what string) (timing.Config, error) {
	t := timing.Config{Warmup: c.Int("warmup"), MinSamples: c.Int("min-samples"), MinSeconds: c.Duration("min-time").Seconds(),
		TargetSpread: c.Float64("target-spread"), MaxSeconds: c.Duration("max-time").Seconds(), MaxSamples: c.Int("max-samples")}
	if err := t.Validate(); err != nil {
		return t, usageError("%s: %v", what, err)
	}
	return t, nil
}

// checkPoints refuses lists whose product exceeds limit (axes.MaxPoints, or a command's own
// cap) as a usage error, before anything that size is built.
func checkPoints(limit int, what string, lists ...axes.Axis) error {
	if err := axes.CheckPoints(limit, what, lists...); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// headDimOf is the head size of a model given by its dimensions: --head-dim when given, else
// hidden / heads, which must then divide evenly. Rounding it down would time attention over
// heads x (hidden / heads) < hidden values: another model than the one asked for.
func headDimOf(hidden, heads, headDim int, headDimGiven bool) (int, error) {
	switch {
	case headDimGiven:
		return headDim, nil
	case heads <= 0 || hidden <= 0:
		return 0, nil // Shape.Validate names the size that is not positive
	case hidden%heads != 0:
		sizes := fmt.Sprint(hidden/heads*heads + heads)
		if below := hidden / heads * heads; below > 0 {
			sizes = fmt.Sprintf("%d or %s", below, sizes)
		}
		return 0, usageError("--hidden %d is not a multiple of --heads %d, so hidden / heads is not a head size: give --head-dim, or a hidden size the heads divide (%s)",
			hidden, heads, sizes)
	}
	return hidden / heads, nil
}

// humanCount prints a parameter count: 8.03B, 1.24B, 350M.
func humanCount(n float64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.2fT", n/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	}
	return fmt.Sprintf("%.0f", n)
}
