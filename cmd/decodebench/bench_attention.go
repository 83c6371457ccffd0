package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/units"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench bench attention`: one layer's decode attention at each batch size and context.

func benchAttentionCommand() *cli.Command {
	return &cli.Command{
		Name:  "attention",
		Usage: "time decode attention for a model's head layout (or given heads) at each batch size and context",
		UsageText: "decodebench bench attention (--model NAME [--tp N] | --q-heads H --kv-heads G --head-dim D) [--batch LIST] " +
			"[--context LIST] [--page-size P] [--splits N] [--window N | --chunk N] [--sinks] [--variant auto|simt|mma] [--dtype bf16|fp16] [--kv-dtype bf16|fp16|fp8] [--kv-scales tensor|head] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]\n\n" +
			"   LIST syntax: " + axes.Syntax,
		Description: "One layer's decode attention: one query token per sequence against a KV cache of --context\n" +
			"tokens for every sequence, contiguous or paged. % READ is the achieved bandwidth (KV cache,\n" +
			"Q and output) over the read ceiling the read probe measures first. --window N or --chunk N\n" +
			"attend to each sequence's last N tokens or its own chunk of N only (the cache holds all\n" +
			"--context tokens; KV counts the span's); --sinks adds gpt-oss's sink logit per query head\n" +
			"(a --model with sinks has them without the flag). --kv-dtype fp8 reads an fp8 e4m3 cache (one\n" +
			"byte an element, a per-tensor scale for K and for V; q and the output stay --dtype): KV\n" +
			"counts its bytes. --kv-scales head gives that cache one scale per KV head instead (a config's\n" +
			"kv_cache_scheme strategy \"attn_head\" sets it): static, so KV adds no byte a token.",
		Flags: append(append(shapeFlags("1-256*2"),
			&cli.IntFlag{Name: "q-heads", Usage: "query heads, instead of --model"},
			&cli.IntFlag{Name: "kv-heads", Usage: "KV heads (divides --q-heads), instead of --model"},
			&cli.IntFlag{Name: "head-dim", Usage: "head dimension: " + headDimsText()},
			contextFlag("1k-128k*2", "context lengths in tokens (k = 1024), every sequence the same, LIST syntax"),
			&cli.IntFlag{Name: "page-size", Usage: fmt.Sprintf("tokens per page of a paged cache (%d..%d, a power of two); 0 = contiguous", cgo.MinPageSize, cgo.MaxPageSize)},
			&cli.IntFlag{Name: "splits", Usage: "KV splits per sequence; 0 lets the kernel choose"},
			&cli.IntFlag{Name: "window", Usage: "attend to each sequence's last N tokens only (a sliding window); 0 = every token"},
			&cli.IntFlag{Name: "chunk", Usage: "attend only to the tokens of each sequence's own chunk of N (chunked attention); 0 = every token"},
			&cli.BoolFlag{Name: "sinks", Usage: "a sink logit per query head joins the softmax's denominator (gpt-oss)"},
			&cli.StringFlag{Name: "variant", Value: "auto",
				Usage: "decode kernel: simt (fp32 CUDA cores), mma (tensor cores) or auto (simt until a card has timed both)"},
			kvScalesFlag(),
		), benchFlags()...),
		OnUsageError: onUsageError,
		Action:       benchAttentionAction,
	}
}

type attentionJob struct {
	spec    measure.AttentionSpec // for an MLA model: its heads, one KV head of 576 (what the table shows)
	mla     *measure.MLASpec      // an MLA model's call, measured instead of spec
	context int
	missing string // the kernel the library lacks for the model's attention (sweep.MissingKernel): skipped
}

func parseBenchAttention(c *cli.Context) (jobs []attentionJob, modelName string, tp int, err error) {
	if c.NArg() > 0 {
		return nil, "", 0, usageError("bench attention takes no arguments (got %q)", c.Args().First())
	}
	batches, err := parseBatches(c, cgo.MaxBatch, "the attention kernels")
	if err != nil {
		return nil, "", 0, err
	}
	contexts, err := axes.ParseIntList(c.String("context"))
	if err != nil {
		return nil, "", 0, usageError("--context: %v", err)
	}
	if err := checkPoints(axes.MaxPoints, "measurements", axes.Axis{Name: "--batch", Values: len(batches)}, axes.Axis{Name: "--context", Values: len(contexts)}); err != nil {
		return nil, "", 0, err
	}
	pageSize, splits := c.Int("page-size"), c.Int("splits")
	if pageSize != 0 && !cgo.ValidPageSize(pageSize) {
		return nil, "", 0, usageError("--page-size %d: want a power of two from %d to %d, or 0 for a contiguous cache", pageSize, cgo.MinPageSize, cgo.MaxPageSize)
	}
	if splits < 0 || splits > cgo.MaxSplits {
		return nil, "", 0, usageError("--splits %d: want 0 (the kernel chooses) or 1..%d", splits, cgo.MaxSplits)
	}
	variant, err := cgo.ParseAttentionVariant(c.String("variant"))
	if err != nil {
		return nil, "", 0, usageError("--variant: %v", err)
	}
	window, chunk, sinks := c.Int("window"), c.Int("chunk"), c.Bool("sinks")
	if err := checkSpanFlags(window, chunk); err != nil {
		return nil, "", 0, err
	}
	explicit := c.IsSet("q-heads") || c.IsSet("kv-heads") || c.IsSet("head-dim")
	haveModel := c.String("model") != "" || c.String("model-config") != ""
	var qHeads, kvHeads, headDim int
	var kvType model.DType
	var modelKVScales string
	switch {
	case explicit && haveModel:
		return nil, "", 0, usageError("give either --model (or --model-config) or --q-heads, --kv-heads and --head-dim, not both")
	case explicit:
		for _, name := range []string{"q-heads", "kv-heads", "head-dim"} {
			if !c.IsSet(name) {
				return nil, "", 0, usageError("bench attention needs --%s with the other head flags", name)
			}
		}
		qHeads, kvHeads, headDim = c.Int("q-heads"), c.Int("kv-heads"), c.Int("head-dim")
		if c.IsSet("weight-dtype") {
			return nil, "", 0, usageError("--weight-dtype %q: attention of given heads reads no weights; --kv-dtype gives its cache's format (--weight-dtype goes with --model)", c.String("weight-dtype"))
		}
	case !haveModel:
		return nil, "", 0, usageError("bench attention needs --model NAME (or --model-config FILE), or --q-heads, --kv-heads and --head-dim")
	default:
		shape, err := resolveModel(c)
		if err != nil {
			return nil, "", 0, err
		}
		qHeads, kvHeads, headDim, kvType = shape.QHeads, shape.KVHeads, shape.HeadDim, shape.KVDType
		modelKVScales = shape.KVScales
		modelName, tp = shape.Name, shape.TP
		sinks = sinks || shape.AttentionSinks
		// A model whose attention the kernels lack (MLA, sinks, an fp8 cache) is never timed
		// as grouped-query attention of its head counts: every measurement is skipped, naming it.
		for _, k := range shape.Kernels(1, 1) {
			if k.Kind != model.KindAttention && k.Kind != model.KindAttentionMLA {
				continue
			}
			why := sweep.MissingKernel(k, shape)
			if why == "" && k.Kind == model.KindAttentionMLA {
				return mlaJobs(c, shape, k, batches, contexts, pageSize, splits)
			}
			if why != "" {
				for _, b := range batches {
					for _, ctx := range contexts {
						jobs = append(jobs, attentionJob{context: ctx, missing: why,
							spec: measure.AttentionSpec{Batch: b, QHeads: qHeads, KVHeads: kvHeads, HeadDim: headDim, Contexts: []int{ctx}}})
					}
				}
				return jobs, modelName, tp, nil
			}
			break
		}
	}
	switch {
	case qHeads < 1 || kvHeads < 1 || qHeads%kvHeads != 0:
		return nil, "", 0, usageError("--q-heads %d and --kv-heads %d: want positive head counts, the KV heads dividing the query heads", qHeads, kvHeads)
	case !cgo.IsAttentionHeadDim(headDim):
		return nil, "", 0, usageError("--head-dim %d: the attention kernels take %s", headDim, headDimsText())
	}
	dtype, err := parseKernelDType(c, kvType)
	if err != nil {
		return nil, "", 0, err
	}
	kvDType, err := parseKVDType(c.String("kv-dtype"), dtype, kvType)
	if err != nil {
		return nil, "", 0, err
	}
	kvScales, err := parseKVScales(c.String("kv-scales"), kvDType, modelKVScales)
	if err != nil {
		return nil, "", 0, err
	}
	for _, b := range batches {
		for _, ctx := range contexts {
			jobs = append(jobs, attentionJob{context: ctx, spec: measure.AttentionSpec{Batch: b, QHeads: qHeads, KVHeads: kvHeads,
				HeadDim: headDim, Contexts: []int{ctx}, PageSize: pageSize, Splits: splits, DType: dtype, KVDType: kvDType, KVScales: kvScales, Variant: variant,
				Window: window, Chunk: chunk, Sinks: sinks}})
		}
	}
	return jobs, modelName, tp, nil
}

func benchAttentionAction(c *cli.Context) error {
	jobs, modelName, tp, err := parseBenchAttention(c)
	if err != nil {
		return err
	}
	settings, err := parseBenchSettings(c, true)
	if err != nil {
		return err
	}
	s, err := openBench(c, settings, "attention", nil)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.begin(modelName, tp, len(jobs), "attention"); err != nil {
		return err
	}
	s.say("%-46s %-20s %10s %11s %7s %9s %7s  %s\n", "SHAPE", "LAYOUT, KERNEL", "KV", "MEDIAN", "SPREAD", "GB/s", "% READ", "NOTE")
	for i, j := range jobs {
		a := j.spec
		shape := fmt.Sprintf("B=%d Hq=%d Hkv=%d D=%d S=%d%s", a.Batch, a.QHeads, a.KVHeads, a.HeadDim, j.context, spanLabel(a))
		if a.KVDType == cgo.DTypeFP8E4M3 {
			shape += " kv=fp8"
			if a.KVScales == measure.KVScalesHead {
				shape += "/head"
			}
		}
		o, tel := s.measure(func() measure.Outcome {
			if j.missing != "" {
				return missingKernel("attention", j.missing)
			}
			need := float64(a.MinDeviceBytes())
			if j.mla != nil {
				need = float64(j.mla.MinDeviceBytes())
			}
			if o, skip := settings.aboveMaxBytes("attention", need); skip {
				return o
			}
			if j.mla != nil {
				return measure.MLA(s.dev, *j.mla, settings.opts)
			}
			return measure.Attention(s.dev, a, settings.opts)
		})
		s.progress(i+1, len(jobs), "attention "+shape, o)
		r := s.record("attention", "attention", o, tel)
		r.Model, r.TP, r.Batch, r.QHeads, r.KVHeads, r.HeadDim, r.Context = modelName, tp, a.Batch, a.QHeads, a.KVHeads, a.HeadDim, j.context
		r.PageSize, r.DType, r.KVBytes = a.PageSize, a.DType.String(), a.KVBytes()
		if j.mla != nil {
			r.Kernel, r.KVBytes = "attention_mla", j.mla.KVBytes()
		}
		if j.missing != "" { // no kernel, so no element type was chosen
			r.DType, r.KVBytes = "", 0
		}
		r.Splits, r.Variant = a.Splits, a.Variant.String()
		if o.Plan.Splits > 0 {
			r.Splits = o.Plan.Splits
		}
		if o.Plan.Variant != "" { // auto, resolved by the plan
			r.Variant = o.Plan.Variant
		}
		if err := s.emit(r, "attention "+shape); err != nil {
			return err
		}
		layout := "contiguous"
		if a.PageSize > 0 {
			layout = fmt.Sprintf("paged %d", a.PageSize)
		}
		if r.Splits > 1 {
			layout += fmt.Sprintf(" /%d", r.Splits)
		}
		layout += " " + r.Variant
		s.say("%-46s %-20s %10s %11s %6.2f%% %9.0f %7s  %s\n", shape, layout, units.Bytes(r.KVBytes), micros(o.Stats.Median),
			100*o.Stats.Spread, o.AchievedBytesPerSec/1e9, percent(r.FractionOfRead), note(o, tel))
	}
	return s.finish()
}

// headDimsText lists the head dims the attention kernels take: "64, 80, 96, 128 or 256".
func headDimsText() string {
	var parts []string
	for _, d := range cgo.AttentionHeadDims {
		parts = append(parts, strconv.Itoa(d))
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// spanLabel is " W=4096", " C=8192" and " +sinks" as the spec has them, or "".
func spanLabel(a measure.AttentionSpec) string {
	label := ""
	if a.Window > 0 {
		label += fmt.Sprintf(" W=%d", a.Window)
	}
	if a.Chunk > 0 {
		label += fmt.Sprintf(" C=%d", a.Chunk)
	}
	if a.Sinks {
		label += " +sinks"
	}
	return label
}

// mlaJobs are the measurements of an MLA model's attention (k, KindAttentionMLA): every query head
// over one latent cache, at the softmax scale sweep.MLAScale gives the model. The table shows
// them as one KV head of the cache's row width.
func mlaJobs(c *cli.Context, shape model.Shape, k model.Kernel, batches, contexts []int, pageSize, splits int) ([]attentionJob, string, int, error) {
	if v := c.String("variant"); c.IsSet("variant") && v != "auto" {
		return nil, "", 0, usageError("--variant %s: %s's MLA attention has one kernel (tensor cores); leave --variant out", v, shape.Name)
	}
	dtype, err := parseKernelDType(c, shape.KVDType)
	if err != nil {
		return nil, "", 0, err
	}
	var jobs []attentionJob
	for _, b := range batches {
		for _, ctx := range contexts {
			m := measure.MLASpec{Batch: b, QHeads: k.QHeads, Contexts: []int{ctx}, PageSize: pageSize, Splits: splits, DType: dtype,
				Scale: sweep.MLAScale(shape)}
			jobs = append(jobs, attentionJob{context: ctx, mla: &m, spec: measure.AttentionSpec{Batch: b, QHeads: k.QHeads, KVHeads: 1,
				HeadDim: k.HeadDim, Contexts: []int{ctx}, PageSize: pageSize, Splits: splits, DType: dtype}})
		}
	}
	return jobs, shape.Name, shape.TP, nil
}

// kvScalesFlag is --kv-scales of bench and verify attention.
func kvScalesFlag() cli.Flag {
	return &cli.StringFlag{Name: "kv-scales",
		Usage: "an fp8 cache's scales: tensor (one for K, one for V; the default) or head (one per KV head; a --model's kv_cache_scheme \"attn_head\" implies it)"}
}

// parseKVScales is --kv-scales: "" (the model's, else one per tensor), tensor, or head (one scale
// a KV head, for an fp8 cache only).
func parseKVScales(name string, kvDType cgo.DType, modelScales string) (string, error) {
	switch name {
	case "":
		if kvDType == cgo.DTypeFP8E4M3 && modelScales == model.KVScalesHead {
			return measure.KVScalesHead, nil
		}
		return "", nil
	case measure.KVScalesTensor:
		return "", nil
	case measure.KVScalesHead:
		if kvDType != cgo.DTypeFP8E4M3 {
			return "", usageError("--kv-scales head: per-head scales are an fp8 cache's (add --kv-dtype fp8)")
		}
		return measure.KVScalesHead, nil
	}
	return "", usageError("--kv-scales %q: want tensor or head", name)
}

// parseKVDType is --kv-dtype: "" (the model's fp8 cache, else the activations' dtype), the
// activations' bf16 or fp16, or fp8 (an e4m3 cache). 0 means a cache of the activations' dtype.
func parseKVDType(name string, act cgo.DType, modelKV model.DType) (cgo.DType, error) {
	switch name {
	case "":
		if modelKV == model.FP8 {
			return cgo.DTypeFP8E4M3, nil
		}
		return 0, nil
	case "fp8", "e4m3", "fp8_e4m3":
		return cgo.DTypeFP8E4M3, nil
	case "bf16", "bfloat16", "fp16", "float16", "half":
		want := "bf16"
		if act == cgo.DTypeFP16 {
			want = "fp16"
		}
		if (name == "bf16" || name == "bfloat16") != (want == "bf16") {
			return 0, usageError("--kv-dtype %s with --dtype %s: a 16-bit cache has the activations' dtype (want %s or fp8)", name, want, want)
		}
		return 0, nil
	}
	return 0, usageError("--kv-dtype %q: want bf16, fp16 or fp8", name)
}
