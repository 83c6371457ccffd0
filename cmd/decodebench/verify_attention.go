package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench verify attention`: decode attention (and, with --append, the KV append before
// it) run once on hashed inputs, checked against ref.Attention.

// maxRefCacheElements bounds the caches the host reference materialises (float32, K and V):
// 2^28 elements is 1 GiB each.
const maxRefCacheElements = 1 << 28

func verifyAttentionCommand() *cli.Command {
	return &cli.Command{
		Name:  "attention",
		Usage: "check decode attention over a KV cache (GQA, contiguous or paged, split-KV) for one shape",
		UsageText: "decodebench verify attention --batch B --q-heads H --kv-heads G --head-dim D --context LIST " +
			"[--page-size P] [--splits N] [--dtype bf16|fp16] [--kv-dtype bf16|fp16|fp8] [--kv-scales tensor|head] [--variant auto|simt|mma] [--append] [--scale S] [--window N | --chunk N] [--sinks] [--backend auto|cuda|emu] [--seed S] [--json]\n" +
			"   decodebench verify attention --mla --batch B --q-heads H --context LIST --scale S [--page-size P] [--splits N] [--dtype bf16|fp16] [--append] ...",
		Description: "One new query token per sequence against its cached tokens. --context gives each sequence's\n" +
			"length: one value for every sequence, or one per sequence (items may be ranges of the LIST\n" +
			"syntax, expanded in place: \"1,17,200\" or \"1-4\" for four sequences of 1..4 tokens). Without\n" +
			"--page-size the cache is contiguous [batch, kv_heads, context, head_dim]; with it, paged\n" +
			"[pages, kv_heads, page_size, head_dim] through a shuffled page table. With --append the last\n" +
			"token of every sequence is written by the KV append kernel first, so the check also covers it.\n" +
			"--window N attends to each sequence's last N tokens only (a sliding window), --chunk N to the\n" +
			"tokens of its own chunk of N (chunked attention); the cache keeps every token. --sinks adds a\n" +
			"sink logit per query head (from the hash) to the softmax's denominator, as gpt-oss does.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "batch", Usage: fmt.Sprintf("sequences in the batch, 1..%d", cgo.MaxBatch)},
			&cli.IntFlag{Name: "q-heads", Usage: "query heads, a multiple of --kv-heads"},
			&cli.IntFlag{Name: "kv-heads", Usage: "KV heads (the group size is q-heads / kv-heads; 1 is multi-query)"},
			&cli.IntFlag{Name: "head-dim", Usage: "head dimension: " + headDimsText()},
			&cli.StringFlag{Name: "context", Usage: "tokens of each sequence (>= 1): one value for all, or one per sequence"},
			&cli.IntFlag{Name: "page-size", Usage: fmt.Sprintf("tokens per page of a paged cache, a power of two from %d to %d; 0 = contiguous", cgo.MinPageSize, cgo.MaxPageSize)},
			&cli.IntFlag{Name: "splits", Usage: fmt.Sprintf("KV splits per sequence, 1..%d; 0 lets the kernel choose from the shape and the SM count", cgo.MaxSplits)},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "element type of Q, the caches and the output: bf16 or fp16"},
			&cli.StringFlag{Name: "kv-dtype", Usage: "KV cache dtype: the --dtype (default), or fp8 (e4m3 codes with a per-tensor scale for K and V; --append quantises the new token)"},
			kvScalesFlag(),
			&cli.StringFlag{Name: "variant", Value: "auto", Usage: "decode kernel: simt (fp32 CUDA cores), mma (tensor cores) or auto (simt until a card has timed both)"},
			&cli.BoolFlag{Name: "append", Usage: "write each sequence's last token with the KV append kernel before the attention"},
			&cli.BoolFlag{Name: "mla", Usage: "multi-head latent attention (DeepSeek-V3, Kimi-K2): every query head over one latent cache of 576-element rows, values of 512; no --kv-heads, --head-dim or --variant, --scale required"},
			&cli.Float64Flag{Name: "scale", Usage: "softmax scale; 0 = 1/sqrt(head-dim)"},
			&cli.IntFlag{Name: "window", Usage: "attend to each sequence's last N tokens only (a sliding window); 0 = every token"},
			&cli.IntFlag{Name: "chunk", Usage: "attend only to the tokens of each sequence's own chunk of N (chunked attention); 0 = every token"},
			&cli.BoolFlag{Name: "sinks", Usage: "a sink logit per query head joins the softmax's denominator (gpt-oss)"},
			seedFlag("Q, K, V, the new token and the page table get distinct seeds derived from it"),
			jsonFlag(),
		}, backendFlags()...),
		OnUsageError: onUsageError,
		Action:       verifyAttentionAction,
	}
}

// attentionRequest is a validated `verify attention` command line.
type attentionRequest struct {
	shape    ref.AttentionShape // with defaults: Capacity, PagesPerSeq, NumPages filled
	dtype    ref.DType
	kvDType  cgo.DType // 0: the activations' dtype; cgo.DTypeFP8E4M3: an fp8 cache
	kvScales string    // "" (per tensor) or measure.KVScalesHead
	splits   int
	variant  cgo.AttentionVariant
	append   bool
	sinks    bool
	seed     uint64
	backend  backendChoice
}

// parseContextList reads --context: comma-separated items in the LIST syntax, each expanded
// in place (unlike a sweep axis, order and repeats matter: one value per sequence).
func parseContextList(s string) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		values, err := axes.ParseIntList(item)
		if err != nil {
			return nil, err
		}
		out = append(out, values...)
		if len(out) > cgo.MaxBatch {
			return nil, fmt.Errorf("%q gives more than %d lengths", s, cgo.MaxBatch)
		}
	}
	return out, nil
}

func parseAttentionRequest(c *cli.Context) (attentionRequest, error) {
	var r attentionRequest
	if c.NArg() > 0 {
		return r, usageError("verify attention takes no arguments (got %q)", c.Args().First())
	}
	for _, name := range []string{"batch", "q-heads", "kv-heads", "head-dim", "context"} {
		if !c.IsSet(name) {
			return r, usageError("verify attention needs --%s (usage: --batch B --q-heads H --kv-heads G --head-dim D --context LIST)", name)
		}
	}
	batch, lens, err := parseBatchContexts(c)
	if err != nil {
		return r, err
	}
	shape := ref.AttentionShape{Batch: batch, QHeads: c.Int("q-heads"), KVHeads: c.Int("kv-heads"),
		HeadDim: c.Int("head-dim"), Context: lens, Scale: c.Float64("scale"), Window: c.Int("window"), Chunk: c.Int("chunk")}
	if err := checkSpanFlags(shape.Window, shape.Chunk); err != nil {
		return r, err
	}
	if shape.Layout, shape.PageSize, err = parsePageSize(c); err != nil {
		return r, err
	}
	r.shape = shape.WithDefaults()
	if err := r.shape.Validate(); err != nil {
		return r, usageError("verify attention: %v", err)
	}
	if n := r.shape.CacheElements(); n > maxRefCacheElements {
		return r, usageError("verify attention: the KV caches hold %d elements each; the host reference takes at most %d (lower --batch, --kv-heads or --context)",
			n, maxRefCacheElements)
	}
	if r.dtype, err = ref.ParseDType(c.String("dtype")); err != nil || (r.dtype != ref.BF16 && r.dtype != ref.FP16) {
		return r, usageError("--dtype %q: the attention kernels take bf16 or fp16", c.String("dtype"))
	}
	if r.kvDType, err = parseKVDType(c.String("kv-dtype"), cgo.DType(r.dtype), ""); err != nil {
		return r, err
	}
	if r.kvScales, err = parseKVScales(c.String("kv-scales"), r.kvDType, ""); err != nil {
		return r, err
	}
	if r.splits = c.Int("splits"); r.splits < 0 || r.splits > cgo.MaxSplits {
		return r, usageError("--splits %d: want 0 (the kernel chooses) or 1..%d", r.splits, cgo.MaxSplits)
	}
	if r.variant, err = cgo.ParseAttentionVariant(c.String("variant")); err != nil {
		return r, usageError("--variant: %v", err)
	}
	if r.backend, err = parseBackendFlags(c); err != nil {
		return r, err
	}
	r.append, r.sinks, r.seed = c.Bool("append"), c.Bool("sinks"), c.Uint64("seed")
	return r, nil
}

// parseBatchContexts reads --batch and --context: one length for every sequence or one per
// sequence.
func parseBatchContexts(c *cli.Context) (batch int, lens []int, err error) {
	batch = c.Int("batch")
	if batch < 1 || batch > cgo.MaxBatch {
		return 0, nil, usageError("--batch %d: want 1..%d sequences", batch, cgo.MaxBatch)
	}
	if lens, err = parseContextList(c.String("context")); err != nil {
		return 0, nil, usageError("--context: %v", err)
	}
	switch len(lens) {
	case 1:
		for len(lens) < batch {
			lens = append(lens, lens[0])
		}
	case batch:
	default:
		return 0, nil, usageError("--context gives %d lengths for a batch of %d: give one for all or one per sequence", len(lens), batch)
	}
	return batch, lens, nil
}

// parsePageSize reads --page-size: 0 is a contiguous cache, anything else a paged one.
func parsePageSize(c *cli.Context) (ref.KVLayout, int, error) {
	p := c.Int("page-size")
	if p == 0 {
		return ref.KVContiguous, 0, nil
	}
	if err := ref.ValidatePageSize(p); err != nil {
		return 0, 0, usageError("--page-size: %v (or 0 for a contiguous cache)", err)
	}
	return ref.KVPaged, p, nil
}

// checkSpanFlags refuses a negative --window or --chunk, or both at once.
func checkSpanFlags(window, chunk int) error {
	switch {
	case window < 0:
		return usageError("--window %d: want a number of tokens >= 1, or 0 for every token", window)
	case chunk < 0:
		return usageError("--chunk %d: want a number of tokens >= 1, or 0 for every token", chunk)
	case window > 0 && chunk > 0:
		return usageError("--window %d and --chunk %d: a layer has one span or none, give one of them", window, chunk)
	}
	return nil
}

// describeSpan is " (window 4096)", " (chunk 8192)" or "", with ", sinks" where they are set.
func describeSpan(window, chunk int, sinks bool) string {
	var parts []string
	if window > 0 {
		parts = append(parts, fmt.Sprintf("window %d", window))
	}
	if chunk > 0 {
		parts = append(parts, fmt.Sprintf("chunk %d", chunk))
	}
	if sinks {
		parts = append(parts, "sinks")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// attentionReport is the verdict of one `verify attention` run; it is also the --json output.
type attentionReport struct {
	Passed         bool                   `json:"passed"`
	Reason         string                 `json:"reason,omitempty"`
	RelError       *jsonFloat             `json:"rel_error"` // null when an output is NaN or infinite
	Tolerance      float64                `json:"tolerance"`
	Worst          attentionElementJSON   `json:"worst"`
	NonFinite      int                    `json:"non_finite"`
	OutOfBound     int                    `json:"out_of_bound"`
	Mismatches     []attentionElementJSON `json:"mismatches,omitempty"`
	Kernel         string                 `json:"kernel"`
	Variant        string                 `json:"variant"` // the one the plan resolved: simt or mma
	Layout         string                 `json:"layout"`
	PageSize       int                    `json:"page_size,omitempty"`
	Splits         int                    `json:"splits"`
	SplitTokens    int                    `json:"split_tokens"`
	WorkspaceBytes uint64                 `json:"workspace_bytes"`
	Append         bool                   `json:"append"`
	Batch          int                    `json:"batch"`
	QHeads         int                    `json:"q_heads"`
	KVHeads        int                    `json:"kv_heads"`
	HeadDim        int                    `json:"head_dim"`
	Context        []int                  `json:"context"`
	Scale          float64                `json:"scale"`
	Window         int                    `json:"window,omitempty"`
	Chunk          int                    `json:"chunk,omitempty"`
	Sinks          bool                   `json:"sinks,omitempty"`
	DType          string                 `json:"dtype"`
	KVDType        string                 `json:"kv_dtype,omitempty"`  // "fp8" for an fp8 e4m3 cache
	KVScales       string                 `json:"kv_scales,omitempty"` // "head" for an fp8 cache's per-KV-head scales
	ranOn
	Seed uint64 `json:"seed"`
}

// attentionElementJSON is one output element of out[batch, q_heads, head_dim] next to its
// reference.
type attentionElementJSON struct {
	Index  int       `json:"index"`
	Seq    int       `json:"seq"`
	Head   int       `json:"head"` // query head
	Dim    int       `json:"dim"`
	Got    jsonFloat `json:"got"`
	Want   float64   `json:"want"`
	AbsErr jsonFloat `json:"abs_err"`
	Bound  float64   `json:"bound"`
}

func toAttentionElementJSON(e ref.Element, s ref.AttentionShape) attentionElementJSON {
	row := e.Index / s.HeadDim
	return attentionElementJSON{Index: e.Index, Seq: row / s.QHeads, Head: row % s.QHeads, Dim: e.Index % s.HeadDim,
		Got: jsonFloat(e.Got), Want: e.Want, AbsErr: jsonFloat(e.AbsErr), Bound: e.Bound}
}

func verifyAttentionAction(c *cli.Context) error {
	if c.Bool("mla") {
		return verifyMLAAction(c)
	}
	req, err := parseAttentionRequest(c)
	if err != nil {
		return err
	}
	lib, dev, err := req.backend.open()
	if err != nil {
		return err
	}
	defer dev.Close()
	out, asJSON := c.App.Writer, c.Bool("json")
	if !asJSON {
		s := req.shape
		dtype := req.dtype.String()
		if req.kvDType == cgo.DTypeFP8E4M3 {
			dtype += " with an fp8 e4m3 KV cache"
			if req.kvScales == measure.KVScalesHead {
				dtype += " (a scale per KV head)"
			}
		}
		fmt.Fprintf(out, "verify attention: batch %d, q heads %d, kv heads %d (group %d), head dim %d, context %s%s, %s, %v%s, seed %d on the %s\n",
			s.Batch, s.QHeads, s.KVHeads, s.Group(), s.HeadDim, describeContexts(s.Context), describeSpan(s.Window, s.Chunk, req.sinks), describeLayout(s),
			dtype, map[bool]string{true: ", last token appended", false: ""}[req.append], req.seed, describeDevice(lib, dev))
	}
	rep, err := runAttention(dev, req, out, asJSON)
	if err != nil {
		return err
	}
	rep.ranOn = newRanOn(lib, dev)
	return finishVerify(out, asJSON, "attention", rep, rep.Passed, rep.Reason, func() { printAttentionReport(out, rep) })
}

func describeLayout(s ref.AttentionShape) string {
	if s.Layout == ref.KVPaged {
		return fmt.Sprintf("paged (%d-token pages, %d per sequence)", s.PageSize, s.PagesPerSeq)
	}
	return "contiguous"
}

// describeContexts shortens a long list of lengths: "[1 17 200]", "4 x 100", "[1 2 3 ... 64] (64)".
func describeContexts(lens []int) string {
	same := true
	for _, n := range lens {
		same = same && n == lens[0]
	}
	switch {
	case same && len(lens) > 1:
		return fmt.Sprintf("%d x %d", len(lens), lens[0])
	case len(lens) > 8:
		return fmt.Sprintf("%v ... %d] (%d sequences)", strings.TrimSuffix(fmt.Sprint(lens[:6]), "]"), lens[len(lens)-1], len(lens))
	}
	return fmt.Sprint(lens)
}

// runAttention is measure.Verify of the requested call; it only turns the Check into the
// report.
func runAttention(dev *cgo.Device, req attentionRequest, out io.Writer, quiet bool) (attentionReport, error) {
	s := req.shape
	spec := measure.AttentionSpec{Batch: s.Batch, QHeads: s.QHeads, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Contexts: s.Context,
		PageSize: s.PageSize, Splits: req.splits, DType: cgo.DType(req.dtype), KVDType: req.kvDType, KVScales: req.kvScales, Variant: req.variant, Scale: s.Scale, Append: req.append,
		Window: s.Window, Chunk: s.Chunk, Sinks: req.sinks}
	c := measure.Verify(dev, spec.Spec(), verifyOptions(req.seed))
	if err := checkRan(c, "the attention kernels refuse this shape"); err != nil {
		return attentionReport{}, err
	}
	if !quiet {
		fmt.Fprintf(out, "plan: %s kernel, %d split(s) of %d tokens, workspace %d bytes\n", c.Plan.Variant, c.Plan.Splits, c.Plan.SplitTokens, c.Plan.WorkspaceBytes)
	}
	rep := attentionReportOf(c, "attention", s)
	rep.Layout, rep.PageSize = s.Layout.String(), s.PageSize
	rep.Append, rep.Batch, rep.QHeads, rep.KVHeads, rep.HeadDim, rep.Context = req.append, s.Batch, s.QHeads, s.KVHeads, s.HeadDim, s.Context
	rep.Scale, rep.Window, rep.Chunk, rep.Sinks, rep.DType, rep.Seed = s.SoftmaxScale(), s.Window, s.Chunk, req.sinks, req.dtype.String(), req.seed
	if req.kvDType == cgo.DTypeFP8E4M3 {
		rep.KVDType, rep.KVScales = "fp8", req.kvScales
	}
	return rep, nil
}

// attentionReportOf is the verdict and the plan of c as the report gives them, for the kernel
// named; outShape says how an output index splits into sequence, head and dim. The caller adds
// the shape, the layout and the inputs.
func attentionReportOf(c measure.Check, kernel string, outShape ref.AttentionShape) attentionReport {
	rep := attentionReport{
		Passed: c.Passed, Reason: c.Reason, RelError: relErrorOf(c.Verification), Tolerance: c.Tolerance,
		Worst: toAttentionElementJSON(c.Worst, outShape), NonFinite: c.NonFinite, OutOfBound: c.OutOfBound,
		Kernel: kernel, Variant: c.Plan.Variant, Splits: c.Plan.Splits, SplitTokens: c.Plan.SplitTokens, WorkspaceBytes: c.Plan.WorkspaceBytes,
	}
	if c.Passed {
		rep.Reason = ""
	}
	for _, m := range c.Mismatches {
		rep.Mismatches = append(rep.Mismatches, toAttentionElementJSON(m, outShape))
	}
	return rep
}

func printAttentionReport(out io.Writer, r attentionReport) {
	w := r.Worst
	fmt.Fprintf(out, "%s; worst element %d (seq %d, head %d, dim %d): got %.7g, want %.7g, |error| %.3g (bound %.3g)\n",
		relErrorText(r.RelError, r.Tolerance, r.NonFinite), w.Index, w.Seq, w.Head, w.Dim, float64(w.Got), w.Want, float64(w.AbsErr), w.Bound)
	if r.Passed {
		fmt.Fprintln(out, "PASS")
		return
	}
	fmt.Fprintf(out, "FAIL: %s\n", r.Reason)
	for _, m := range r.Mismatches {
		fmt.Fprintf(out, "  element %d (seq %d, head %d, dim %d): got %.7g, want %.7g, |error| %.3g > bound %.3g\n",
			m.Index, m.Seq, m.Head, m.Dim, float64(m.Got), m.Want, float64(m.AbsErr), m.Bound)
	}
}
