package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/cgo"
)

// --weight-dtype and --group-size: how the linear layers' W is stored (kernels/decodebench.h,
// "quantized weight formats"), on `bench linear` and `verify linear`.

// weightDTypeFlag is --weight-dtype where no model flag defines it (verify linear); bench
// linear has modelFlags' --weight-dtype, which takes these names too.
func weightDTypeFlag() cli.Flag {
	return &cli.StringFlag{Name: "weight-dtype", EnvVars: []string{"DECODEBENCH_WEIGHT_DTYPE"},
		Usage: "how W is stored: bf16 or fp16 (dense, the activations' dtype), fp8 (e4m3, an fp32 scale per output channel), " +
			"fp8-tensor (one scale), fp8-block (e4m3, an fp32 scale per 128x128 tile, as DeepSeek-V3 ships it), int8 (per channel), int4 (GPTQ-style symmetric, an fp16 scale per group), " +
			"int4-zp (AWQ-style, 4-bit zero points), mxfp4 (e2m1, an e8m0 scale per 32); default: --dtype"}
}

func groupSizeFlag() cli.Flag {
	return &cli.IntFlag{Name: "group-size", EnvVars: []string{"DECODEBENCH_GROUP_SIZE"},
		Usage: "int4 and int4-zp: weights along K per scale, 32, 64 or 128 (default 128); mxfp4: 32"}
}

// weightChoice is a parsed --weight-dtype: the format and its group (dense: 0, 0).
type weightChoice struct {
	format cgo.WeightFormat
	group  int
}

// parseWeightDType reads a --weight-dtype value (name) and --group-size against the
// activation dtype: dense bf16 or fp16 must agree with --dtype (dense weights are the
// activations' dtype).
func parseWeightDType(c *cli.Context, name string, dtype cgo.DType) (weightChoice, error) {
	var w weightChoice
	if name == "" {
		name = dtype.String()
	}
	f, dense, err := cgo.ParseWeightDType(name)
	if err != nil {
		return w, usageError("--weight-dtype: %v", err)
	}
	group := c.Int("group-size")
	if f == cgo.WeightDense {
		if dense != dtype {
			return w, usageError("--weight-dtype %s with --dtype %s: dense weights are the activations' dtype (drop one, or pick a quantized format)", name, dtype)
		}
		if c.IsSet("group-size") {
			return w, usageError("--group-size %d: dense %s weights have no groups", group, name)
		}
		return w, nil
	}
	if !c.IsSet("group-size") {
		group = f.DefaultGroupSize()
	}
	if !f.Grouped() && group != 0 {
		return w, usageError("--group-size %d: %s weights have one scale per output channel (or tensor), no groups", group, f)
	}
	// The shape-independent half of the rule; CheckShape with n and k does the rest.
	if err := f.CheckShape(2, 4096, group); err != nil && f.Grouped() {
		return w, usageError("--group-size: %v", err)
	}
	return weightChoice{format: f, group: group}, nil
}

// checkShape is a usage error for an n x k shape the format does not take.
func (w weightChoice) checkShape(n, k int) error {
	if err := w.format.CheckShape(n, k, w.group); err != nil {
		return usageError("--weight-dtype %s, --n %d, --k %d: %v", w.format, n, k, err)
	}
	return nil
}

// quantizes reports whether a linear of a model step is stored in the format: its projection
// matrices; the LM head and the router never are (bench/model/quant.go).
func (w weightChoice) quantizes(name string) bool {
	return w.format != cgo.WeightDense && name != "lm_head" && name != "router"
}

func (w weightChoice) String() string {
	if w.group > 0 {
		return fmt.Sprintf("%s g%d", w.format, w.group)
	}
	return w.format.String()
}
