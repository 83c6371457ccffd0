package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
)

// sweepModels builds the model axis: a preset or config.json, or explicit dimensions, each
// dimension a list; the cross product of the lists is the axis.
func sweepModels(c *cli.Context) ([]model.Shape, error) {
	name, cfg := c.String("model"), c.String("model-config")
	var base model.Shape
	var err error
	switch {
	case name != "" && cfg != "":
		return nil, usageError("give either --model or --model-config, not both (got --model %q and --model-config %q)", name, cfg)
	case name != "":
		if base, err = model.Lookup(name); err != nil {
			return nil, usageError("--model: %v", err)
		}
	case cfg != "":
		if base, err = model.LoadHFConfig(cfg); err != nil {
			return nil, usageError("--model-config: %v", err)
		}
	default:
		for _, need := range []string{"hidden", "ffn", "heads", "layers", "vocab"} {
			if c.String(need) == "" {
				return nil, usageError("no model given: use --model NAME (see `decodebench model list`), --model-config FILE, or the dimensions --hidden, --ffn, --heads, --layers and --vocab (missing --%s)", need)
			}
		}
		base = model.Shape{Name: "custom", Family: "custom", GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1, Source: "command line"}
	}
	if s := c.String("dtype"); s != "" {
		d, err := model.ParseDType(s)
		if err != nil || !slices.Contains(sweep.KernelDTypes, d) {
			return nil, usageError("--dtype %q: the kernels take bf16 or fp16", s)
		}
		base.WeightDType, base.KVDType = d, d
	}

	type dim struct {
		flag   string
		values []int
		set    func(*model.Shape, int)
	}
	dims := []dim{
		{flag: "hidden", set: func(s *model.Shape, v int) { s.Hidden = v }},
		{flag: "ffn", set: func(s *model.Shape, v int) { s.FFN = v }},
		{flag: "heads", set: func(s *model.Shape, v int) { s.QHeads = v }},
		{flag: "kv-heads", set: func(s *model.Shape, v int) { s.KVHeads = v }},
		{flag: "head-dim", set: func(s *model.Shape, v int) { s.HeadDim = v }},
		{flag: "layers", set: func(s *model.Shape, v int) { s.Layers = v }},
		{flag: "vocab", set: func(s *model.Shape, v int) { s.Vocab = v }},
	}
	var lists []axes.Axis
	for i := range dims {
		if text := c.String(dims[i].flag); text != "" {
			if dims[i].values, err = axes.ParseIntList(text); err != nil {
				return nil, usageError("--%s: %v", dims[i].flag, err)
			}
			lists = append(lists, axes.Axis{Name: "--" + dims[i].flag, Values: len(dims[i].values)})
		}
	}
	if err := checkPoints(64, "models", lists...); err != nil { // at most 64 models per sweep
		return nil, err
	}
	shapes := []model.Shape{base}
	var varying, overridden []string
	for i := range dims {
		values := dims[i].values
		if values == nil {
			continue
		}
		overridden = append(overridden, dims[i].flag)
		if len(values) > 1 {
			varying = append(varying, dims[i].flag)
		}
		var next []model.Shape
		for _, s := range shapes {
			for _, v := range values {
				t := s
				dims[i].set(&t, v)
				next = append(next, t)
			}
		}
		shapes = next
	}
	tp := c.Int("tp")
	if tp < 1 {
		return nil, usageError("--tp %d: the tensor-parallel degree must be a whole number >= 1", tp)
	}
	for i := range shapes {
		s := &shapes[i]
		if base.Family == "custom" && s.Source == "command line" {
			if !c.IsSet("kv-heads") {
				s.KVHeads = s.QHeads
			}
			if s.HeadDim, err = headDimOf(s.Hidden, s.QHeads, s.HeadDim, c.IsSet("head-dim")); err != nil {
				return nil, err
			}
		}
		if len(overridden) > 0 {
			s.Name = shapeName(base.Name, *s, varying, len(shapes) > 1 || base.Family != "custom")
			if base.Family != "custom" {
				s.PublishedParams = 0 // no longer the published model
			}
		}
		if tp > 1 {
			shard, err := s.Shard(tp)
			if err != nil {
				return nil, usageError("--tp %d: %v", tp, err)
			}
			*s = shard
		}
		if err := s.Validate(); err != nil {
			return nil, usageError("%v", err)
		}
	}
	return withWeightFormats(c, shapes)
}

// withWeightFormats is the weight-format axis: each shape once per --weight-dtype format, in
// the order given (the shapes as they are without the flag). --kv-dtype sets every shape's
// cache. The format is part of the model key, so a resumed run finds each format's records.
func withWeightFormats(c *cli.Context, shapes []model.Shape) ([]model.Shape, error) {
	if s := c.String("kv-dtype"); s != "" {
		d, err := model.ParseDType(s)
		if err != nil || (d != model.BF16 && d != model.FP16 && d != model.FP8) {
			return nil, usageError("--kv-dtype %q: accepted are bf16, fp16 and fp8 (e4m3)", s)
		}
		for i := range shapes {
			shapes[i].KVDType = d
		}
	}
	formats, err := parseWeightDTypes(c)
	if err != nil || formats == nil {
		return shapes, err
	}
	var out []model.Shape
	for _, s := range shapes {
		for _, w := range formats {
			t := w.Apply(s)
			if err := sweep.CheckShape(t); err != nil {
				return nil, usageError("--weight-dtype %s on %s: %v", w, t.Name, err)
			}
			if len(formats) > 1 {
				t = sweep.NamedByFormat(t)
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// shapeName names a shape of the model axis by its base and, when the axis has several, the
// dimensions that vary: "custom hidden=64 ffn=128".
func shapeName(base string, s model.Shape, varying []string, modified bool) string {
	if len(varying) == 0 {
		if modified && base != "custom" {
			return base + " (modified)"
		}
		return base
	}
	parts := []string{base}
	values := map[string]int{"hidden": s.Hidden, "ffn": s.FFN, "heads": s.QHeads, "kv-heads": s.KVHeads,
		"head-dim": s.HeadDim, "layers": s.Layers, "vocab": s.Vocab}
	for _, flag := range varying {
		parts = append(parts, fmt.Sprintf("%s=%d", flag, values[flag]))
	}
	return strings.Join(parts, " ")
}
