package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench verify attention --mla`: multi-head latent attention decode (DeepSeek-V3, Kimi-K2,
// absorbed form) run once on hashed inputs and checked against ref.MLA. The widths are the
// kernel's (rows of cgo.MLAQKDim, values of cgo.MLAVDim), so --kv-heads and --head-dim are not
// given; --scale is required (DeepSeek's softmax scale includes the yarn mscale).

// mlaRequest is a validated `verify attention --mla` command line.
type mlaRequest struct {
	shape   ref.MLAShape // with defaults
	dtype   ref.DType
	splits  int
	append  bool
	seed    uint64
	backend backendChoice
}

func parseMLARequest(c *cli.Context) (mlaRequest, error) {
	var r mlaRequest
	if c.NArg() > 0 {
		return r, usageError("verify attention takes no arguments (got %q)", c.Args().First())
	}
	for _, name := range []string{"kv-heads", "head-dim", "variant"} {
		if c.IsSet(name) {
			return r, usageError("verify attention --mla: --%s does not apply (one latent cache of %d-element rows, values of %d, the tensor-core kernel)",
				name, cgo.MLAQKDim, cgo.MLAVDim)
		}
	}
	// What the GQA kernels take and the MLA kernel has not: refused by name, where they were
	// once ignored and a bf16 run reported PASS for an fp8 or windowed question.
	for _, name := range []string{"kv-scales", "window", "chunk", "sinks"} {
		if c.IsSet(name) {
			return r, usageError("verify attention --mla: --%s does not apply: the MLA kernel attends to every cached token of a latent cache in --dtype (no fp8 scales, window, chunk or sinks)", name)
		}
	}
	if kv := c.String("kv-dtype"); c.IsSet("kv-dtype") && kv != c.String("dtype") {
		return r, usageError("verify attention --mla: --kv-dtype %s: the MLA kernel keeps its latent cache in --dtype (%s); it has no %s cache", kv, c.String("dtype"), kv)
	}
	for _, name := range []string{"batch", "q-heads", "context", "scale"} {
		if !c.IsSet(name) {
			return r, usageError("verify attention --mla needs --%s (usage: --mla --batch B --q-heads H --context LIST --scale S)", name)
		}
	}
	batch, lens, err := parseBatchContexts(c)
	if err != nil {
		return r, err
	}
	shape := ref.MLAShape{Batch: batch, QHeads: c.Int("q-heads"), Context: lens, Scale: c.Float64("scale")}
	if shape.Layout, shape.PageSize, err = parsePageSize(c); err != nil {
		return r, err
	}
	r.shape = shape.WithDefaults()
	if err := r.shape.Validate(); err != nil {
		return r, usageError("verify attention --mla: %v", err)
	}
	if n := r.shape.CacheElements(); n > 2*maxRefCacheElements {
		return r, usageError("verify attention --mla: the latent cache holds %d elements; the host reference takes at most %d (lower --batch or --context)",
			n, 2*maxRefCacheElements)
	}
	if r.dtype, err = ref.ParseDType(c.String("dtype")); err != nil || (r.dtype != ref.BF16 && r.dtype != ref.FP16) {
		return r, usageError("--dtype %q: the MLA kernel takes bf16 or fp16", c.String("dtype"))
	}
	if r.splits = c.Int("splits"); r.splits < 0 || r.splits > cgo.MaxSplits {
		return r, usageError("--splits %d: want 0 (the kernel chooses) or 1..%d", r.splits, cgo.MaxSplits)
	}
	if r.backend, err = parseBackendFlags(c); err != nil {
		return r, err
	}
	r.append, r.seed = c.Bool("append"), c.Uint64("seed")
	return r, nil
}

func verifyMLAAction(c *cli.Context) error {
	req, err := parseMLARequest(c)
	if err != nil {
		return err
	}
	lib, dev, err := req.backend.open()
	if err != nil {
		return err
	}
	defer dev.Close()
	out, asJSON := c.App.Writer, c.Bool("json")
	s := req.shape
	if !asJSON {
		fmt.Fprintf(out, "verify attention --mla: batch %d, q heads %d over one latent cache (rows of %d, values of %d), context %s, %s, %v%s, scale %g, seed %d on the %s\n",
			s.Batch, s.QHeads, cgo.MLAQKDim, cgo.MLAVDim, describeContexts(s.Context), describeLayout(s.Attention()), req.dtype,
			map[bool]string{true: ", last token appended", false: ""}[req.append], s.Scale, req.seed, describeDevice(lib, dev))
	}
	rep, err := runMLA(dev, req, out, asJSON)
	if err != nil {
		return err
	}
	rep.ranOn = newRanOn(lib, dev)
	return finishVerify(out, asJSON, "attention --mla", rep, rep.Passed, rep.Reason, func() { printAttentionReport(out, rep) })
}

// runMLA is measure.Verify of the requested call, turned into the attention report (kernel
// attention_mla, one KV head of head dim 576; elements index the output [batch, q_heads, 512]).
func runMLA(dev *cgo.Device, req mlaRequest, out io.Writer, quiet bool) (attentionReport, error) {
	s := req.shape
	spec := measure.MLASpec{Batch: s.Batch, QHeads: s.QHeads, Contexts: s.Context, PageSize: s.PageSize, Splits: req.splits,
		DType: cgo.DType(req.dtype), Scale: s.Scale, Append: req.append}
	c := measure.Verify(dev, spec.Spec(), verifyOptions(req.seed))
	if err := checkRan(c, "the MLA kernel refuses this shape"); err != nil {
		return attentionReport{}, err
	}
	if !quiet {
		fmt.Fprintf(out, "plan: %d split(s) of %d tokens, workspace %d bytes\n", c.Plan.Splits, c.Plan.SplitTokens, c.Plan.WorkspaceBytes)
	}
	outShape := ref.AttentionShape{QHeads: s.QHeads, HeadDim: cgo.MLAVDim} // how an output index splits
	rep := attentionReportOf(c, "attention_mla", outShape)
	rep.Layout, rep.PageSize = s.Layout.String(), s.PageSize
	rep.Append, rep.Batch, rep.QHeads, rep.KVHeads, rep.HeadDim, rep.Context = req.append, s.Batch, s.QHeads, 1, cgo.MLAQKDim, s.Context
	rep.Scale, rep.DType, rep.Seed = s.Scale, req.dtype.String(), req.seed
	return rep, nil
}
