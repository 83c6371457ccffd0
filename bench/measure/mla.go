package measure

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// KindAttentionMLA is the kind of a Spec of multi-head latent attention.
const KindAttentionMLA = "attention_mla"

// MLASpec is one multi-head latent attention decode call (DeepSeek-V3, Kimi-K2; absorbed form):
// every query head of a sequence against that sequence's one latent cache of rows of
// cgo.MLAQKDim elements, the first cgo.MLAVDim of which are the values.
type MLASpec struct {
	Batch    int       `json:"batch"`
	QHeads   int       `json:"q_heads"`
	Contexts []int     `json:"contexts"`            // tokens of each sequence: one per sequence, or one for all
	PageSize int       `json:"page_size,omitempty"` // tokens per page of a paged cache; 0 = contiguous
	Splits   int       `json:"splits,omitempty"`    // KV splits per sequence; 0 lets the kernel choose
	DType    cgo.DType `json:"dtype"`
	Scale    float64   `json:"scale"` // the softmax scale, > 0 (DeepSeek's includes the yarn mscale)
	// Append writes each sequence's last token with the latent append kernel first (a new row
	// from the hash), so that the verification covers the append too.
	Append bool `json:"append,omitempty"`
}

// Spec wraps s.
func (s MLASpec) Spec() Spec {
	s.Contexts = append([]int(nil), s.Contexts...)
	return Spec{Kind: KindAttentionMLA, MLA: &s}
}

func (s MLASpec) contexts() []int {
	return AttentionSpec{Batch: s.Batch, Contexts: s.Contexts}.contexts()
}

func (s MLASpec) contextsMax() int { return AttentionSpec{Contexts: s.Contexts}.contextsMax() }

// shape is the spec as bench/ref describes it, the cache sized for the longest sequence.
func (s MLASpec) shape() ref.MLAShape {
	shape := ref.MLAShape{Batch: s.Batch, QHeads: s.QHeads, Context: s.contexts(), Scale: s.Scale}
	if s.PageSize != 0 {
		shape.Layout, shape.PageSize = ref.KVPaged, s.PageSize
	}
	return shape.WithDefaults()
}

func (s MLASpec) totalContext() float64 {
	total := 0.0
	for _, n := range s.contexts() {
		total += float64(n)
	}
	return total
}

// KVBytes is the latent cache a call reads: one row of 576 elements a token, once for all heads.
func (s MLASpec) KVBytes() float64 {
	return s.totalContext() * float64(cgo.MLAQKDim) * float64(s.DType.Bytes())
}

// Bytes is the least a call moves: the latent cache, Q (576 a head), the output (512 a head),
// the context lengths and the page-table entries it follows.
func (s MLASpec) Bytes() float64 {
	e := float64(s.DType.Bytes())
	qo := float64(s.Batch) * float64(s.QHeads) * float64(cgo.MLAQKDim+cgo.MLAVDim) * e
	meta := 4 * float64(s.Batch)
	if s.PageSize > 0 {
		for _, n := range s.contexts() {
			meta += 4 * math.Ceil(float64(n)/float64(s.PageSize))
		}
	}
	return s.KVBytes() + qo + meta
}

// FLOPs of a call: Q·Cᵀ over 576 and P·C over 512, per query head and token.
func (s MLASpec) FLOPs() float64 {
	return 2 * s.totalContext() * float64(s.QHeads) * float64(cgo.MLAQKDim+cgo.MLAVDim)
}

// MinDeviceBytes is the device memory of one copy of the call's buffers (the workspace aside).
func (s MLASpec) MinDeviceBytes() uint64 {
	if status, _ := s.check(); status != "" {
		return 0
	}
	shape := s.shape()
	e := s.DType.Bytes()
	return roundUp(uint64(shape.CacheElements())*e, copyAlign) + uint64(shape.QElements()+shape.OutElements())*e +
		4*uint64(s.Batch) + 4*uint64(s.Batch)*uint64(shape.PagesPerSeq)
}

// check reports a spec that cannot run: invalid values fail, shapes the kernel does not take
// are skipped.
func (s MLASpec) check() (status, reason string) {
	switch {
	case s.Batch < 1 || s.QHeads < 1:
		return StatusFailed, fmt.Sprintf("invalid shape batch %d, q heads %d: each must be >= 1", s.Batch, s.QHeads)
	case len(s.Contexts) != 1 && len(s.Contexts) != s.Batch:
		return StatusFailed, fmt.Sprintf("invalid contexts: %d lengths for a batch of %d (want one for all or one per sequence)", len(s.Contexts), s.Batch)
	case s.Splits < 0 || s.PageSize < 0:
		return StatusFailed, fmt.Sprintf("invalid splits %d or page size %d: want 0 (auto, contiguous) or more", s.Splits, s.PageSize)
	case !(s.Scale > 0) || math.IsInf(s.Scale, 0):
		return StatusFailed, fmt.Sprintf("invalid scale %g: the MLA softmax scale must be finite and > 0", s.Scale)
	case s.DType != cgo.DTypeBF16 && s.DType != cgo.DTypeFP16:
		return StatusSkipped, fmt.Sprintf("unsupported: dtype %v (the MLA kernel takes bf16 or fp16)", s.DType)
	case s.Batch > cgo.MaxBatch:
		return StatusSkipped, fmt.Sprintf("unsupported: batch %d (the MLA kernel takes 1..%d)", s.Batch, cgo.MaxBatch)
	case s.QHeads > cgo.MLAMaxHeads:
		return StatusSkipped, fmt.Sprintf("unsupported: %d query heads (the MLA kernel takes 1..%d)", s.QHeads, cgo.MLAMaxHeads)
	case s.Splits > cgo.MaxSplits:
		return StatusSkipped, fmt.Sprintf("unsupported: %d splits (at most %d)", s.Splits, cgo.MaxSplits)
	case s.PageSize != 0 && !cgo.ValidPageSize(s.PageSize):
		return StatusSkipped, fmt.Sprintf("unsupported: page size %d (a power of two, %d..%d tokens)", s.PageSize, cgo.MinPageSize, cgo.MaxPageSize)
	}
	for b, n := range s.Contexts {
		if n < 1 {
			return StatusFailed, fmt.Sprintf("invalid context length %d of sequence %d: want >= 1", n, b)
		}
	}
	if cache := float64(s.Batch) * float64(s.contextsMax()) * float64(cgo.MLAQKDim); cache > 1<<60 {
		return StatusSkipped, fmt.Sprintf("unsupported: a latent cache of %.3g elements is too large", cache)
	}
	if err := s.shape().Validate(); err != nil {
		return StatusSkipped, "unsupported: " + err.Error()
	}
	return "", ""
}

// MLA verifies, then times, MLA decode attention. The latent cache rotates through enough
// copies that the timed calls read it from HBM; Q, the output and the page table stay put.
func MLA(dev *cgo.Device, s MLASpec, o Options) Outcome {
	out, _ := mla(dev, s, o)
	return out
}

func mla(dev *cgo.Device, s MLASpec, o Options) (Outcome, Check) {
	return measureSpec(dev, "attention_mla", s, o, func(o Options, info deviceInfo, out Outcome) (Outcome, Check) {
		return mlaRun(dev, s, o, info, out)
	})
}

// mlaRun is the attention_mla kernel's part of the measurement: out has what measureSpec filled.
func mlaRun(dev *cgo.Device, s MLASpec, o Options, info deviceInfo, out Outcome) (Outcome, Check) {
	const kernel = "attention_mla"
	shape, seeds := s.shape(), ref.NewAttentionSeeds(o.Seed)

	cache := cgo.MLACache(planAddress, s.DType, shape.Capacity)
	if shape.Layout == ref.KVPaged {
		cache.Layout = cgo.KVPaged
		cache.PageTable, cache.PageSize, cache.NumPages, cache.PagesPerSeq = planAddress, shape.PageSize, shape.NumPages, shape.PagesPerSeq
	}
	plan, workspace, err := dev.MLAAttentionPlan(cgo.MLAAttentionParams{Q: planAddress, Out: planAddress, ContextLens: planAddress,
		Cache: cache, Batch: s.Batch, QHeads: s.QHeads, MaxContext: shape.MaxContext(), Scale: float32(s.Scale), NumSplits: s.Splits})
	if err != nil {
		return merge(out, fromError(kernel, "planning", err)), noCheck
	}
	out.Plan = Plan{Variant: "mma", Layout: shape.Layout.String(), Splits: plan.NumSplits, SplitTokens: plan.SplitTokens,
		WorkspaceBytes: workspace}
	if shape.Layout == ref.KVPaged {
		out.Plan.PageSize = shape.PageSize
	}

	elem := s.DType.Bytes()
	qBytes, outBytes := uint64(shape.QElements())*elem, uint64(shape.OutElements())*elem
	cacheStride := roundUp(uint64(shape.CacheElements())*elem, copyAlign)
	other := qBytes + outBytes + 4*uint64(s.Batch) + 4*uint64(s.Batch)*uint64(shape.PagesPerSeq) + workspace
	if ok, why := Fits(dev, cacheStride+other); !ok {
		return merge(out, skipped(kernel, "does not fit: %s", why)), noCheck
	}
	out.Rotation = planRotation(s.KVBytes(), float64(cacheStride), float64(info.props.L2Bytes), o.RotateFactor, rotateCap(o, info, other))
	copies := out.Rotation.Copies

	bufs := &buffers{dev: dev}
	defer bufs.close()
	var q, o0, lens, kv *cgo.Buffer
	if what, err := bufs.allocEach(
		bufferAlloc{&q, "Q", qBytes}, bufferAlloc{&o0, "the output", outBytes}, bufferAlloc{&lens, "the context lengths", 4 * uint64(s.Batch)},
		bufferAlloc{&kv, fmt.Sprintf("%d copies of the latent cache", copies), uint64(copies) * cacheStride},
	); err != nil {
		return merge(out, fromError(kernel, what, err)), noCheck
	}
	// One fill over every copy: copy 0 holds exactly the cache the reference sees.
	for _, f := range []struct {
		b    *cgo.Buffer
		what string
		seed uint64
	}{{q, "Q", seeds.Q}, {kv, "the latent cache", seeds.K}} {
		if err := f.b.FillHash(s.DType, f.b.Bytes/elem, f.seed, 1); err != nil {
			return merge(out, failed(kernel, "filling %s: %v", f.what, err)), noCheck
		}
	}
	if err := cgo.Write(lens, int32s(shape.Context)); err != nil {
		return merge(out, failed(kernel, "copying the context lengths: %v", err)), noCheck
	}
	cache.K = kv.Ptr
	var table []int32
	if shape.Layout == ref.KVPaged {
		table = shape.ShuffledPageTable(seeds.PageTable)
		pages, fail := bufs.pageTable(kernel, table)
		if fail != nil {
			return merge(out, *fail), noCheck
		}
		cache.PageTable = pages
	}
	if s.Append {
		if err := mlaAppendLastTokens(dev, bufs, cache, shape, seeds); err != nil {
			return merge(out, fromError(kernel, "the latent append", err)), noCheck
		}
	}
	plan.Q, plan.Out, plan.ContextLens, plan.Cache = q.Ptr, o0.Ptr, lens.Ptr, cache
	var ws *cgo.Buffer
	if workspace > 0 {
		if ws, err = bufs.alloc("the split workspace", workspace); err != nil {
			return merge(out, fromError(kernel, "workspace", err)), noCheck
		}
		plan.Workspace, plan.WorkspaceBytes = ws.Ptr, ws.Bytes
	}
	return verifyThenTime(dev, o, out, kernel,
		func() Check {
			return verifyMLA(dev, plan, o0, ws, shape, ref.DType(s.DType), seeds, table, s.Append, o.Seed, o.checkOnly)
		},
		func(call int) error {
			p := plan
			p.Cache.K = kv.Ptr + uint64(call%copies)*cacheStride
			return dev.MLAAttention(p)
		})
}

// verifyMLA poisons the output and the workspace, runs the planned call once on copy 0 of the
// cache, checks every output for NaN and every query head of some sequences (all of them with
// every) against the float64 reference.
func verifyMLA(dev *cgo.Device, plan cgo.MLAAttentionParams, outBuf, ws *cgo.Buffer, shape ref.MLAShape,
	dtype ref.DType, seeds ref.AttentionSeeds, table []int32, appended bool, seed uint64, every bool) Check {
	c := checkOf(Verification{Tolerance: ref.MLATolerance(dtype)})
	got, reason := runPoisoned(dev, func() error { return dev.MLAAttention(plan) }, outBuf, dtype, ws)
	if reason != "" {
		c.Reason = reason
		return c
	}
	perSeq := float64(shape.MaxContext()) * float64(cgo.MLAQKDim)
	budget := int(math.Max(1, math.Floor(maxAttentionRefElements/perSeq)))
	seqs := sampleIndices(shape.Batch, min(budget, maxAttentionRefPairs), seed)
	if every {
		seqs = sampleIndices(shape.Batch, shape.Batch, seed)
	}
	d := cgo.MLAQKDim
	fill := func(seed, off uint64, dst []float64) {
		for i := range dst {
			dst[i] = float64(ref.FillValue(dtype, seed, 1, off+uint64(i)))
		}
	}
	in := ref.MLAInputs{
		Q: func(row int, dst []float64) { fill(seeds.Q, uint64(row*d), dst) },
		Row: func(b, t int, dst []float64) {
			if appended && t == shape.Context[b]-1 {
				fill(seeds.KNew, uint64(b*d), dst)
				return
			}
			fill(seeds.K, uint64(shape.RowOffset(table, b, t)), dst)
		},
	}
	want, elems := ref.MLAPairs(shape, in, seqs)
	sub := make([]float32, len(elems))
	for i, e := range elems {
		sub[i] = got[e]
	}
	cmp := ref.Compare(sub, want.Want, want.ElementBounds(dtype, plan.NumSplits), ref.MLATolerance(dtype))
	c = Check{Verification: Verification{Passed: cmp.Passed, RelError: cmp.RelError, Tolerance: cmp.Tolerance, Checked: cmp.Count}, OutOfBound: cmp.OutOfBound}
	c.Worst, c.Mismatches = elementsOf(cmp, func(i int) int { return elems[i] })
	v := &c.Verification
	where := func(e int) string {
		row := e / cgo.MLAVDim
		return fmt.Sprintf("sequence %d, head %d, dim %d", row/shape.QHeads, row%shape.QHeads, e%cgo.MLAVDim)
	}
	if count, first := nonFinite(got); count > 0 {
		v.Passed, v.RelError, v.NonFinite, v.Checked = false, 0, count, len(got)
		v.Reason = fmt.Sprintf("%d of %d outputs are NaN or infinite (first: %s = %v; NaN is the poison of an unwritten output)",
			count, len(got), where(first), got[first])
		return c
	}
	if !cmp.Passed {
		v.Reason = cmp.Reason()
		if m := cmp.Mismatches; len(m) > 0 {
			v.Reason += " (at " + where(elems[m[0].Index]) + ")"
		}
	} else if len(seqs) < shape.Batch {
		v.Reason = fmt.Sprintf("all %d outputs finite; every head of %d of %d sequences checked against the float64 reference",
			len(got), len(seqs), shape.Batch)
	}
	return c
}

// mlaAppendLastTokens writes each sequence's last token into the latent cache with the append
// kernel: new rows [batch, 576] from seeds.KNew.
func mlaAppendLastTokens(dev *cgo.Device, bufs *buffers, cache cgo.KVCache, shape ref.MLAShape, seeds ref.AttentionSeeds) error {
	rows := uint64(shape.Batch * cgo.MLAQKDim)
	kvNew, err := bufs.alloc("the new latent rows", rows*cache.DType.Bytes())
	if err != nil {
		return err
	}
	positions, err := bufs.alloc("the append positions", uint64(4*shape.Batch))
	if err != nil {
		return err
	}
	if err := kvNew.FillHash(cache.DType, rows, seeds.KNew, 1); err != nil {
		return err
	}
	last := make([]int32, shape.Batch)
	for b, n := range shape.Context {
		last[b] = int32(n - 1)
	}
	if err := cgo.Write(positions, last); err != nil {
		return err
	}
	return dev.MLAKVAppend(cgo.MLAKVAppendParams{KVNew: kvNew.Ptr, Positions: positions.Ptr, Cache: cache, Batch: shape.Batch})
}
