package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo"
)

// --weight-dtype, --group-size and --kv-dtype: how the weights and the KV cache are stored.
// Every command takes the same names (bench/sweep's weight-format table, which sets a model
// shape as the matching quantization_config would): the model commands through modelFlags,
// verify linear and bench linear --n --k for their one matrix.

const weightDTypeUsage = "bf16 or fp16 (dense), fp8 (e4m3, an fp32 scale per output channel), " +
	"fp8-tensor (one scale), fp8-block (e4m3, an fp32 scale per 128x128 tile, as DeepSeek-V3 ships it), int8 (per channel), int4 (GPTQ-style symmetric, an fp16 scale per group), " +
	"int4-zp (AWQ-style, 4-bit zero points), mxfp4 (e2m1, an e8m0 scale per 32)"

// weightDTypeFlag is --weight-dtype; list: a comma-separated list of formats (predict, sweep).
func weightDTypeFlag(list bool) cli.Flag {
	f := &cli.StringFlag{Name: "weight-dtype",
		Usage: "how the projections are stored: " + weightDTypeUsage + "; the embedding, LM head and router stay 16-bit (default: the model's, and its quantization_config format)"}
	if list {
		f.Usage = "weight formats to compare, a list such as bf16,fp8,int4, each: " + weightDTypeUsage + " (default: the model's own)"
		return listFlag(f)
	}
	return f
}

func groupSizeFlag() cli.Flag {
	return &cli.IntFlag{Name: "group-size",
		Usage: "int4 and int4-zp: weights along K per scale, 32, 64 or 128 (default 128); mxfp4: 32"}
}

func kvDTypeFlag() cli.Flag {
	return &cli.StringFlag{Name: "kv-dtype",
		Usage: "the KV cache: bf16, fp16 or fp8 (e4m3, a per-tensor scale) (default: the model's)"}
}

// parseWeightDTypes reads --weight-dtype (one format, or a list) and --group-size: nil when
// --weight-dtype is not given. In a list the group goes to its grouped formats, and is refused
// only when none is grouped.
func parseWeightDTypes(c *cli.Context) ([]sweep.WeightDType, error) {
	text, group, groupGiven := strings.TrimSpace(c.String("weight-dtype")), c.Int("group-size"), c.IsSet("group-size")
	if text == "" {
		if groupGiven {
			return nil, usageError("--group-size %d goes with --weight-dtype int4, int4-zp or mxfp4: the model's own format keeps its groups", group)
		}
		return nil, nil
	}
	names := strings.Split(text, ",")
	var formats []sweep.WeightDType
	anyGrouped := false
	for _, name := range names {
		f, _, err := cgo.ParseWeightDType(strings.ToLower(strings.TrimSpace(name)))
		anyGrouped = anyGrouped || (err == nil && f.Grouped())
	}
	seen := map[sweep.WeightDType]bool{}
	for _, name := range names {
		f, _, _ := cgo.ParseWeightDType(strings.ToLower(strings.TrimSpace(name)))
		w, err := sweep.ParseWeightDType(name, group, groupGiven && (len(names) == 1 || !anyGrouped || f.Grouped()))
		if err != nil {
			return nil, usageError("--weight-dtype: %v", err)
		}
		if seen[w] {
			return nil, usageError("--weight-dtype %s: %s is listed twice", text, w)
		}
		seen[w] = true
		formats = append(formats, w)
	}
	return formats, nil
}

// weightChoice is a parsed --weight-dtype of one matrix: the format and its group (dense: 0, 0).
type weightChoice struct {
	format cgo.WeightFormat
	group  int
}

// parseWeightDType reads a --weight-dtype value (name) and --group-size of one matrix (verify
// linear, bench linear --n --k) against the activation dtype: dense bf16 or fp16 must agree
// with --dtype (dense weights are the activations' dtype).
func parseWeightDType(c *cli.Context, name string, dtype cgo.DType) (weightChoice, error) {
	if name == "" {
		name = dtype.String()
	}
	w, err := sweep.ParseWeightDType(name, c.Int("group-size"), c.IsSet("group-size"))
	if err != nil {
		return weightChoice{}, usageError("--weight-dtype: %v", err)
	}
	if f := w.Format(); f != cgo.WeightDense {
		return weightChoice{format: f, group: w.GroupSize}, nil
	}
	if _, dense, _ := cgo.ParseWeightDType(w.Name); dense != dtype {
		return weightChoice{}, usageError("--weight-dtype %s with --dtype %s: dense weights are the activations' dtype (drop one, or pick a quantized format)", name, dtype)
	}
	return weightChoice{}, nil
}

// checkShape is a usage error for an n x k shape the format does not take.
func (w weightChoice) checkShape(n, k int) error {
	if err := w.format.CheckShape(n, k, w.group); err != nil {
		return usageError("--weight-dtype %s, --n %d, --k %d: %v", w.format, n, k, err)
	}
	return nil
}

func (w weightChoice) String() string {
	return sweep.WeightDType{Name: w.format.String(), GroupSize: w.group}.String()
}

// matrixWeightDTypeFlag is --weight-dtype of one matrix, where no model flag defines it
// (verify linear).
func matrixWeightDTypeFlag() cli.Flag {
	return &cli.StringFlag{Name: "weight-dtype",
		Usage: "how W is stored: " + weightDTypeUsage + "; default: --dtype"}
}
