package main

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
)

func modelCommand() *cli.Command {
	return &cli.Command{
		Name:  "model",
		Usage: "list the model presets, or show one model's decode shape, bytes and FLOPs",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the preset models",
				Flags: []cli.Flag{jsonFlag()},
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usageError("model list takes no arguments (got %q)", c.Args().First())
					}
					return modelList(c.App.Writer, c.Bool("json"))
				},
			},
			{
				Name:      "show",
				Usage:     "show a model's shape, parameter counts, bytes per step and its kernel shapes",
				UsageText: "decodebench model show (--model NAME | --model-config FILE) [--tp N] [--batch B] [--context S] [--format table|md|csv|json|jsonl]",
				Flags: append(modelFlags(),
					&cli.StringFlag{Name: "batch", Value: "1", Usage: "batch size for the per-step numbers: one whole number >= 1"},
					&cli.StringFlag{Name: "context", Value: "4k", Usage: "context length for the per-step numbers: one whole number of tokens >= 1, k = 1024 (8k = 8192)"},
					formatFlag(format.All...),
					jsonAlias(format.JSON)),
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usageError("model show takes no arguments (got %q); use --model NAME", c.Args().First())
					}
					shape, err := resolveModel(c)
					if err != nil {
						return err
					}
					batch, err := oneValue("batch", c.String("batch"), "the batch must be one whole number >= 1")
					if err != nil {
						return err
					}
					context, err := oneValue("context", c.String("context"), "the context must be one whole number of tokens >= 1 (a k suffix multiplies by 1024: 8k = 8192)")
					if err != nil {
						return err
					}
					name, err := parseFormat(c)
					if err != nil {
						return err
					}
					return modelShow(c.App.Writer, shape, batch, context, name)
				},
			},
		},
	}
}

// oneValue reads a flag that takes a single positive whole number with an optional k suffix
// (the syntax of one item of a list flag), as a usage error naming the value otherwise.
func oneValue(flag, text, accepted string) (int, error) {
	values, err := axes.ParseIntList(text)
	if err != nil || len(values) != 1 || strings.ContainsAny(text, ",-") {
		return 0, usageError("--%s %q: %s", flag, text, accepted)
	}
	return values[0], nil
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"}
}

func modelList(out io.Writer, asJSON bool) error {
	presets := model.Presets()
	if asJSON {
		type row struct {
			Name         string `json:"name"`
			Family       string `json:"family"`
			ParamsTotal  int64  `json:"params_total"`
			ParamsActive int64  `json:"params_active"`
			// Without the input embedding: DeepSeek's and OpenAI's convention.
			ParamsActiveExcludingEmbedding int64 `json:"params_active_excluding_embedding"`
			Layers                         int   `json:"layers"`
			Hidden                         int   `json:"hidden"`
			QHeads                         int   `json:"q_heads"`
			KVHeads                        int   `json:"kv_heads"`
			HeadDim                        int   `json:"head_dim"`
			FFN                            int   `json:"ffn"`
			Vocab                          int   `json:"vocab"`
			Experts                        int   `json:"experts,omitempty"`
		}
		rows := make([]row, 0, len(presets))
		for _, p := range presets {
			rows = append(rows, row{p.Name, p.Family, p.ParamsTotal(), p.ParamsActive(), p.ParamsActiveExcludingEmbedding(), p.Layers, p.Hidden,
				p.QHeads, p.KVHeads, p.HeadDim, p.FFN, p.Vocab, p.Experts})
		}
		return writeJSON(out, rows)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tFAMILY\tPARAMS\tACTIVE\tACTIVE W/O EMBEDDING\tLAYERS\tHIDDEN\tHEADS/KV\tHEAD DIM\tFFN\tVOCAB")
	for _, p := range presets {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%d\t%s\t%d\n", p.Name, p.Family,
			humanCount(float64(p.ParamsTotal())), humanCount(float64(p.ParamsActive())), humanCount(float64(p.ParamsActiveExcludingEmbedding())), p.Layers, p.Hidden,
			p.QHeads, p.KVHeads, p.HeadDim, ffnText(p), p.Vocab)
	}
	return w.Flush()
}

// ffnText describes the MLPs: "14336", "8x14336 (top-2)", "256x2048 (top-8) + shared 2048,
// 3 dense layers of 18432".
func ffnText(p model.Shape) string {
	if p.Experts == 0 {
		return fmt.Sprint(p.FFN)
	}
	text := fmt.Sprintf("%dx%d (top-%d)", p.Experts, p.ExpertFFN, p.ExpertsPerToken)
	if p.FFN > 0 {
		text += fmt.Sprintf(" + shared %d", p.FFN)
	}
	if p.DenseLayers > 0 {
		text += fmt.Sprintf(", %d dense layers of %d", p.DenseLayers, p.DenseFFN)
	}
	return text
}

// modelShowJSON is the --json output of `model show`.
type modelShowJSON struct {
	Name         string      `json:"name"`
	Family       string      `json:"family"`
	Source       string      `json:"source"`
	TP           int         `json:"tp"`
	Shape        model.Shape `json:"shape"`
	ParamsTotal  int64       `json:"params_total"`
	ParamsActive int64       `json:"params_active"` // the embedding table counted, as Mistral, Qwen and Meta publish
	// Without the input embedding (the LM head counted), as DeepSeek and OpenAI publish.
	ParamsActiveExcludingEmbedding int64          `json:"params_active_excluding_embedding"`
	WeightBytesTotal               float64        `json:"weight_bytes_total"`
	WeightBytesPerStep             float64        `json:"weight_bytes_per_step"` // at batch 1
	KVBytesPerToken                float64        `json:"kv_bytes_per_token"`
	Batch                          int            `json:"batch"`
	Context                        int            `json:"context"`
	WeightBytesAtBatch             float64        `json:"weight_bytes_per_step_at_batch"`
	KVBytesPerSequence             float64        `json:"kv_bytes_per_sequence"`
	StateBytesPerSequence          float64        `json:"state_bytes_per_sequence"` // recurrent layers' state, at any context
	FLOPsPerStep                   float64        `json:"flops_per_step"`
	Kernels                        []model.Kernel `json:"kernels"`
}

// modelShow prints the model in the format named: json is the whole document (shape, counts,
// bytes and its kernels); md, csv and jsonl are the kernels of one step, one a row.
func modelShow(stdout io.Writer, s model.Shape, batch, context int, name string) error {
	out := modelShowJSON{
		Name: s.Name, Family: s.Family, Source: s.Source, TP: max(s.TP, 1), Shape: s,
		ParamsTotal: s.ParamsTotal(), ParamsActive: s.ParamsActive(),
		ParamsActiveExcludingEmbedding: s.ParamsActiveExcludingEmbedding(),
		WeightBytesTotal:               s.WeightBytesTotal(),
		WeightBytesPerStep:             s.WeightBytesPerStep(1),
		KVBytesPerToken:                s.KVBytesPerToken(),
		Batch:                          batch, Context: context,
		WeightBytesAtBatch:    s.WeightBytesPerStep(batch),
		KVBytesPerSequence:    s.KVBytesPerSequence(context),
		StateBytesPerSequence: s.StateBytesPerSequence(),
		FLOPsPerStep:          s.FLOPsPerStep(batch, context),
		Kernels:               s.Kernels(batch, context),
	}
	switch name {
	case format.JSON:
		return writeJSON(stdout, out)
	case format.MD, format.CSV, format.JSONL:
		rows, err := format.FromRecords(out.Kernels)
		if err != nil {
			return failure("encoding the kernels: %v", err)
		}
		return format.Write(stdout, name, rows)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "model\t%s (%s, from %s)\n", s.Name, s.Family, s.Source)
	if out.TP > 1 {
		fmt.Fprintf(w, "tensor parallel\t%d (numbers are one GPU's shard)\n", out.TP)
	}
	for _, line := range shapeLines(s) {
		fmt.Fprintf(w, "%s\t%s\n", line[0], line[1])
	}
	fmt.Fprintf(w, "parameters\t%s total, %s active per token (%s without the input embedding)\n", humanCount(float64(out.ParamsTotal)),
		humanCount(float64(out.ParamsActive)), humanCount(float64(out.ParamsActiveExcludingEmbedding)))
	fmt.Fprintf(w, "weights\t%s in all; %s read per step at batch 1\n", units.Bytes(out.WeightBytesTotal), units.Bytes(out.WeightBytesPerStep))
	fmt.Fprintf(w, "KV cache\t%s per token; %s per sequence at context %d\n", units.Bytes(out.KVBytesPerToken), units.Bytes(out.KVBytesPerSequence), context)
	if out.StateBytesPerSequence > 0 {
		fmt.Fprintf(w, "recurrent state\t%s per sequence at any context (%d of %d layers are recurrent); a step reads and writes it\n",
			units.Bytes(out.StateBytesPerSequence), s.RecurrentLayers(), s.Layers)
	}
	fmt.Fprintf(w, "one step at batch %d, context %d\t%s of weights + %s of KV, %.3g FLOPs\n", batch, context,
		units.Bytes(out.WeightBytesAtBatch), units.Bytes(float64(batch)*out.KVBytesPerSequence), out.FLOPsPerStep)
	w.Flush()
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "kernels of one decode step (bytes are the minimum one call moves; decimal units):")
	w = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KERNEL\tSHAPE\tCALLS/STEP\tBYTES/CALL\tFLOPS/CALL")
	var variants []string
	lacking := map[string][]string{}
	for _, k := range out.Kernels {
		fmt.Fprintf(w, "%s\t%s\t%.4g\t%s\t%.3g\n", k.Name, kernelShapeText(k), k.Repeat, units.Bytes(k.Bytes), k.FLOPs)
		if v := sweep.MissingKernel(k, s); v != "" {
			if lacking[v] == nil {
				variants = append(variants, v)
			}
			lacking[v] = append(lacking[v], k.Name)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(variants) > 0 {
		fmt.Fprintln(stdout, "\nthe kernel library has no kernel yet for (sweep skips these steps; predict models them):")
		for _, v := range variants {
			fmt.Fprintf(stdout, "  %s: %s\n", v, strings.Join(lacking[v], ", "))
		}
	}
	return nil
}

// shapeLines are model show's rows about the shape: its widths, what each layer's attention
// is and spans, the dtypes and formats, and what the shape leaves out.
func shapeLines(s model.Shape) [][2]string {
	var lines [][2]string
	add := func(key, format string, args ...any) {
		lines = append(lines, [2]string{key, fmt.Sprintf(format, args...)})
	}
	if s.IsMLA() {
		q := fmt.Sprintf("q rank %d", s.QLoRARank)
		if s.QLoRARank == 0 {
			q = "q projected from the hidden state"
		}
		add("shape", "hidden %d, %d layers, %d query heads of %d (%d with rotary), values of %d, FFN %s, vocab %d",
			s.Hidden, s.Layers, s.QHeads, s.HeadDim, s.RoPEHeadDim, s.VHeadDim, ffnText(s), s.Vocab)
		add("attention", "multi-head latent attention, absorbed: %s, latent %d + rotary key %d cached per layer and token; every query head attends over the one latent (QK width %d, V width %d)",
			q, s.KVLoRARank, s.RoPEHeadDim, s.KVLoRARank+s.RoPEHeadDim, s.KVLoRARank)
	} else {
		add("shape", "hidden %d, %d layers, %d query / %d KV heads of dim %d, FFN %s, vocab %d",
			s.Hidden, s.Layers, s.QHeads, s.KVHeads, s.HeadDim, ffnText(s), s.Vocab)
	}
	var extras []string
	if s.QKNorm == "rms" {
		extras = append(extras, "QK-norm (an RMSNorm on each q and k head)")
	}
	if s.QKNorm == "l2" {
		extras = append(extras, "QK L2-norm in the layers with rotary")
	}
	if s.AttentionSinks {
		extras = append(extras, "attention sinks (a learned logit per query head in each softmax)")
	}
	if s.NoRoPELayers > 0 {
		extras = append(extras, fmt.Sprintf("%d of the %d layers without rotary", s.NoRoPELayers, s.Layers))
	}
	if len(extras) > 0 {
		add("attention details", "%s", strings.Join(extras, "; "))
	}
	if s.SlidingLayers > 0 {
		add("sliding window", "%d of the %d layers attend to the last %d tokens only", s.SlidingLayers, s.Layers, s.SlidingWindow)
	}
	if s.ChunkedLayers > 0 {
		add("chunked attention", "%d of the %d layers attend only within the current chunk of %d tokens", s.ChunkedLayers, s.Layers, s.AttentionChunk)
	}
	dtypes := fmt.Sprintf("weights %s, KV cache %s", s.WeightDType, s.KVDType)
	if q := s.Quant; q != nil {
		quantized, rest := "projections", "embedding, LM head, router and norms"
		if q.AttentionKept {
			quantized, rest = "MLP and expert projections", "attention, "+rest
		}
		dtypes = fmt.Sprintf("%s %s (%.3g bits a weight); %s %s; KV cache %s", quantized, q, q.BitsPerWeight(s.Hidden, s.Hidden), rest, s.WeightDType, s.KVDType)
	}
	add("dtypes", "%s", dtypes)
	if s.LeftOut != "" {
		add("left out", "%s", s.LeftOut)
	}
	return lines
}

// weightFormatText names the weights' storage in a few words, in --weight-dtype's names:
// "bf16", "mxfp4 MLPs + bf16", "int4 g128 projections + bf16".
func weightFormatText(s model.Shape) string {
	if s.Quant == nil {
		return string(s.WeightDType)
	}
	if s.Quant.AttentionKept {
		return fmt.Sprintf("%s MLPs + %s", sweep.WeightDTypeLabel(s), s.WeightDType)
	}
	return fmt.Sprintf("%s projections + %s", sweep.WeightDTypeLabel(s), s.WeightDType)
}

func kernelShapeText(k model.Kernel) string {
	var text string
	switch k.Kind {
	case model.KindAttention:
		text = fmt.Sprintf("B=%d Hq=%d Hkv=%d D=%d S=%d", k.Batch, k.QHeads, k.KVHeads, k.HeadDim, k.Context)
		if k.Sinks {
			text += " +sinks"
		}
	case model.KindAttentionMLA:
		text = fmt.Sprintf("B=%d Hq=%d latent QK=%d V=%d S=%d", k.Batch, k.QHeads, k.HeadDim, k.VHeadDim, k.Context)
	case model.KindLinearGrouped:
		text = fmt.Sprintf("%d x M=%d N=%d K=%d", k.Groups, k.M, k.N, k.K)
	case model.KindMamba2:
		text = fmt.Sprintf("B=%d H=%d groups=%d state %dx%d", k.Batch, k.QHeads, k.KVHeads, k.HeadDim, k.VHeadDim)
	case model.KindGatedDeltaNet:
		text = fmt.Sprintf("B=%d Hv=%d Hk=%d state %dx%d", k.Batch, k.QHeads, k.KVHeads, k.HeadDim, k.VHeadDim)
	default:
		text = fmt.Sprintf("M=%d N=%d K=%d", k.M, k.N, k.K)
	}
	if k.WeightFormat != "" {
		text += " [" + k.WeightFormat + "]"
	}
	return text
}

func writeJSON(w io.Writer, v any) error {
	return format.WriteJSON(w, v)
}
