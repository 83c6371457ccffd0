package measure

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// AttentionSpec is one decode-attention call: one new query token per sequence against its
// KV cache.
type AttentionSpec struct {
	Batch    int       `json:"batch"`
	QHeads   int       `json:"q_heads"`
	KVHeads  int       `json:"kv_heads"`
	HeadDim  int       `json:"head_dim"`
	Contexts []int     `json:"contexts"`            // tokens of each sequence: one per sequence, or one for all
	PageSize int       `json:"page_size,omitempty"` // tokens per page of a paged cache; 0 = contiguous
	Splits   int       `json:"splits,omitempty"`    // KV splits per sequence; 0 lets the kernel choose
	DType    cgo.DType `json:"dtype"`
	// KVDType is the cache's dtype: 0 or DType (a 16-bit cache), or cgo.DTypeFP8E4M3 (one byte
	// an element, dequantised with the per-tensor scales fp8KScale and fp8VScale; q and the
	// output stay DType).
	KVDType cgo.DType `json:"kv_dtype,omitempty"`
	// KVScales is an fp8 cache's scales: "" or KVScalesTensor (one per tensor), or
	// KVScalesHead (one per KV head, db_kv_cache.k_scales and v_scales: ref.E4M3SpreadScales
	// around fp8KScale and fp8VScale, every fourth head's entry 0, the tensor's).
	KVScales string               `json:"kv_scales,omitempty"`
	Variant  cgo.AttentionVariant `json:"variant"`         // AttentionAuto lets the plan choose
	Scale    float64              `json:"scale,omitempty"` // softmax scale; 0 = 1/sqrt(HeadDim)
	// Append writes each sequence's last token with the KV append kernel first (new K and V
	// from the hash), as a decode step does, so that the verification covers the append too.
	Append bool `json:"append,omitempty"`
	// The span each sequence attends to (at most one of them; 0 = the whole context): its last
	// Window tokens (a sliding window), or the tokens of its own chunk of Chunk. The cache holds
	// every token of Contexts; only the span's are read, and Bytes and FLOPs count those.
	Window int `json:"window,omitempty"`
	Chunk  int `json:"chunk,omitempty"`
	// Sinks: a sink logit per query head (f32, from the hash, within ±sinkScale) joins the
	// softmax's denominator, as gpt-oss's attention has.
	Sinks bool `json:"sinks,omitempty"`
}

// The fp8 cache's scales: its codes come from ref.E4M3Code (every finite code), so K spans
// +-448/128 = +-3.5 and V +-7, the order of the 16-bit caches' hash fills.
const fp8KScale, fp8VScale = 1.0 / 128, 1.0 / 64

// The scale layouts of an fp8 cache (AttentionSpec.KVScales).
const (
	KVScalesTensor = "tensor"
	KVScalesHead   = "head"
)

// perHeadScales reports whether the spec's fp8 cache has per-KV-head scales.
func (s AttentionSpec) perHeadScales() bool { return s.KVScales == KVScalesHead }

// fp8HeadScales are the per-KV-head entries the device holds (K's, V's: V's pattern shifted by
// one head, so that K's and V's swapped are caught), or nil for per-tensor scales.
func (s AttentionSpec) fp8HeadScales() (k, v []float32) {
	if !s.perHeadScales() {
		return nil, nil
	}
	return ref.E4M3SpreadScales(fp8KScale, s.KVHeads), ref.E4M3SpreadScales(fp8VScale, s.KVHeads+1)[1:]
}

// kvDType is the cache's dtype, KVDType or DType.
func (s AttentionSpec) kvDType() cgo.DType {
	if s.KVDType == 0 {
		return s.DType
	}
	return s.KVDType
}

// sinkScale bounds the sink logits the hash gives: ±4 is the order of a scaled score here, so
// the sink takes a real share of every denominator.
const sinkScale = 4

// The float64 reference of a large attention call is computed for a sample of (sequence, KV
// head) pairs, each with every query head of its group: at most maxAttentionRefPairs pairs,
// and at most maxAttentionRefElements K and V elements generated from the hash in all (2^28:
// about 0.1 s on 16 cores), but always at least one pair.
const (
	maxAttentionRefPairs    = 32
	maxAttentionRefElements = 1 << 28
)

// contexts expands Contexts to one length per sequence.
func (s AttentionSpec) contexts() []int {
	if len(s.Contexts) == 1 && s.Batch > 1 {
		out := make([]int, s.Batch)
		for i := range out {
			out[i] = s.Contexts[0]
		}
		return out
	}
	return append([]int(nil), s.Contexts...)
}

// shape is the spec as bench/ref describes it, with the cache sized for the longest sequence.
func (s AttentionSpec) shape() ref.AttentionShape {
	shape := ref.AttentionShape{Batch: s.Batch, QHeads: s.QHeads, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Context: s.contexts(), Scale: s.Scale,
		Window: s.Window, Chunk: s.Chunk}
	if s.PageSize != 0 {
		shape.Layout, shape.PageSize = ref.KVPaged, s.PageSize
	}
	return shape.WithDefaults()
}

// attendedTokens is the tokens every sequence's span holds, summed: what a call reads.
func (s AttentionSpec) attendedTokens() float64 {
	shape := ref.AttentionShape{Window: max(s.Window, 0), Chunk: max(s.Chunk, 0)}
	total := 0.0
	for _, n := range s.contexts() {
		total += float64(n - shape.SpanStart(n))
	}
	return total
}

// KVBytes is the KV cache a call reads: every token of every sequence's span, K and V, each
// KV head.
func (s AttentionSpec) KVBytes() float64 {
	b := 2 * s.attendedTokens() * float64(s.KVHeads) * float64(s.HeadDim) * float64(s.kvDType().Bytes())
	if s.kvDType() == cgo.DTypeFP8E4M3 {
		b += 8 // the fp32 k_scale and v_scale
		if s.perHeadScales() {
			// static scales, one per KV head of K and of V: a call reads them once, never per token
			b += 8 * float64(s.KVHeads)
		}
	}
	return b
}

// Bytes is the least a call moves: the KV cache it reads, Q, the output, the context lengths,
// the page-table entries it follows (those of the pages its spans touch) and the sinks.
func (s AttentionSpec) Bytes() float64 {
	e := float64(s.DType.Bytes())
	qo := 2 * float64(s.Batch) * float64(s.QHeads) * float64(s.HeadDim) * e
	meta := 4 * float64(s.Batch)
	if s.PageSize > 0 {
		shape := ref.AttentionShape{Window: max(s.Window, 0), Chunk: max(s.Chunk, 0)}
		for _, n := range s.contexts() {
			if n > 0 {
				meta += 4 * float64((n-1)/s.PageSize-shape.SpanStart(n)/s.PageSize+1)
			}
		}
	}
	if s.Sinks {
		meta += 4 * float64(s.QHeads)
	}
	return s.KVBytes() + qo + meta
}

// FLOPs of a call: Q·Kᵀ and P·V, 2·HeadDim each per query head and attended token.
func (s AttentionSpec) FLOPs() float64 {
	return 4 * s.attendedTokens() * float64(s.QHeads) * float64(s.HeadDim)
}

// MinDeviceBytes is the device memory the measurement needs with one copy of the caches (the
// split workspace aside): what a sweep passes to Fits. 0 for an invalid spec.
func (s AttentionSpec) MinDeviceBytes() uint64 {
	if status, _ := s.check(); status != "" {
		return 0
	}
	shape := s.shape()
	e := s.DType.Bytes()
	q := uint64(shape.QElements()) * e
	cache := roundUp(uint64(shape.CacheElements())*e, copyAlign)
	return 2*cache + 2*q + 4*uint64(s.Batch) + 4*uint64(s.Batch)*uint64(shape.PagesPerSeq) + s.sinkBytes()
}

// sinkBytes is the sink buffer: f32 [q_heads], or none.
func (s AttentionSpec) sinkBytes() uint64 {
	if !s.Sinks {
		return 0
	}
	return 4 * uint64(s.QHeads)
}

// check reports a spec that cannot run: invalid values fail, shapes the kernels do not take
// are skipped.
func (s AttentionSpec) check() (status, reason string) {
	switch {
	case s.Batch < 1 || s.QHeads < 1 || s.KVHeads < 1 || s.HeadDim < 1:
		return StatusFailed, fmt.Sprintf("invalid shape batch %d, q heads %d, kv heads %d, head dim %d: each must be >= 1",
			s.Batch, s.QHeads, s.KVHeads, s.HeadDim)
	case s.QHeads%s.KVHeads != 0:
		return StatusFailed, fmt.Sprintf("invalid shape: q heads %d is not a multiple of kv heads %d", s.QHeads, s.KVHeads)
	case len(s.Contexts) != 1 && len(s.Contexts) != s.Batch:
		return StatusFailed, fmt.Sprintf("invalid contexts: %d lengths for a batch of %d (want one for all or one per sequence)", len(s.Contexts), s.Batch)
	case !knownAttentionVariant(s.Variant):
		return StatusFailed, fmt.Sprintf("invalid variant %v", s.Variant)
	case s.Splits < 0 || s.PageSize < 0:
		return StatusFailed, fmt.Sprintf("invalid splits %d or page size %d: want 0 (auto, contiguous) or more", s.Splits, s.PageSize)
	case s.Window < 0 || s.Chunk < 0:
		return StatusFailed, fmt.Sprintf("invalid window %d or chunk %d: want 0 (the whole context) or more", s.Window, s.Chunk)
	case s.Window > 0 && s.Chunk > 0:
		return StatusFailed, fmt.Sprintf("invalid span: window %d and chunk %d are both set (a layer has one span or none)", s.Window, s.Chunk)
	case s.KVScales != "" && s.KVScales != KVScalesTensor && s.KVScales != KVScalesHead:
		return StatusFailed, fmt.Sprintf("invalid KV scales %q: want %s or %s", s.KVScales, KVScalesTensor, KVScalesHead)
	case s.perHeadScales() && s.kvDType() != cgo.DTypeFP8E4M3:
		return StatusFailed, fmt.Sprintf("invalid KV scales %s with a %v cache: per-head scales are an fp8 cache's", s.KVScales, s.kvDType())
	case s.DType != cgo.DTypeBF16 && s.DType != cgo.DTypeFP16:
		return StatusSkipped, fmt.Sprintf("unsupported: dtype %v (the attention kernels take bf16 or fp16)", s.DType)
	case s.kvDType() != s.DType && s.kvDType() != cgo.DTypeFP8E4M3:
		return StatusSkipped, fmt.Sprintf("unsupported: KV cache dtype %v with %v activations (want %v or fp8)", s.kvDType(), s.DType, s.DType)
	case s.Batch > cgo.MaxBatch:
		return StatusSkipped, fmt.Sprintf("unsupported: batch %d (the attention kernels take 1..%d)", s.Batch, cgo.MaxBatch)
	case s.Splits > cgo.MaxSplits:
		return StatusSkipped, fmt.Sprintf("unsupported: %d splits (at most %d)", s.Splits, cgo.MaxSplits)
	case !cgo.IsAttentionHeadDim(s.HeadDim):
		return StatusSkipped, fmt.Sprintf("unsupported: head dim %d (the attention kernels are compiled for %v)", s.HeadDim, cgo.AttentionHeadDims)
	case s.PageSize != 0 && !cgo.ValidPageSize(s.PageSize):
		return StatusSkipped, fmt.Sprintf("unsupported: page size %d (a power of two, %d..%d tokens)", s.PageSize, cgo.MinPageSize, cgo.MaxPageSize)
	}
	longest := 0
	for b, n := range s.Contexts {
		if n < 1 {
			return StatusFailed, fmt.Sprintf("invalid context length %d of sequence %d: want >= 1", n, b)
		}
		longest = max(longest, n)
	}
	// Sizes are computed in int further on: refuse what would overflow them first.
	if cache := float64(s.Batch) * float64(s.KVHeads) * float64(longest) * float64(s.HeadDim); cache > 1<<60 ||
		float64(s.Batch)*float64(s.QHeads)*float64(s.HeadDim) > 1<<60 {
		return StatusSkipped, fmt.Sprintf("unsupported: a cache of %.3g elements is too large", cache)
	}
	if err := s.shape().Validate(); err != nil {
		return StatusSkipped, "unsupported: " + err.Error()
	}
	return "", ""
}

// knownAttentionVariant reports whether the seam names v.
func knownAttentionVariant(v cgo.AttentionVariant) bool {
	_, err := cgo.ParseAttentionVariant(v.String())
	return err == nil
}

// Attention verifies, then times, decode attention. The K and V caches rotate through enough
// copies that the timed calls read them from HBM; Q, the output and the page table stay put.
func Attention(dev *cgo.Device, s AttentionSpec, o Options) Outcome {
	out, _ := attention(dev, s, o)
	return out
}

func attention(dev *cgo.Device, s AttentionSpec, o Options) (Outcome, Check) {
	return measureSpec(dev, "attention", s, o, func(o Options, info deviceInfo, out Outcome) (Outcome, Check) {
		return attentionRun(dev, s, o, info, out)
	})
}

// attentionRun is the attention kernel's part of the measurement: out has what measureSpec filled.
func attentionRun(dev *cgo.Device, s AttentionSpec, o Options, info deviceInfo, out Outcome) (Outcome, Check) {
	const kernel = "attention"
	shape, seeds := s.shape(), ref.NewAttentionSeeds(o.Seed)

	cache := cgo.KVCache{K: planAddress, V: planAddress, Layout: cgo.KVLayout(shape.Layout), DType: s.kvDType(),
		KVHeads: s.KVHeads, HeadDim: s.HeadDim, Capacity: shape.Capacity}
	fp8 := s.kvDType() == cgo.DTypeFP8E4M3
	if fp8 {
		cache.KScale, cache.VScale, cache.ActDType = fp8KScale, fp8VScale, s.DType
		if s.perHeadScales() {
			cache.KScales, cache.VScales = planAddress, planAddress
		}
	}
	if shape.Layout == ref.KVPaged {
		cache.PageTable, cache.PageSize, cache.NumPages, cache.PagesPerSeq = planAddress, shape.PageSize, shape.NumPages, shape.PagesPerSeq
	}
	var sinkAddress uint64
	if s.Sinks {
		sinkAddress = planAddress
	}
	plan, workspace, err := dev.AttentionPlan(cgo.AttentionParams{Q: planAddress, Out: planAddress, ContextLens: planAddress,
		Cache: cache, Batch: s.Batch, QHeads: s.QHeads, MaxContext: shape.MaxContext(), Scale: float32(s.Scale), NumSplits: s.Splits, Variant: s.Variant,
		Window: s.Window, Chunk: s.Chunk, Sinks: sinkAddress})
	if err != nil {
		return merge(out, fromError(kernel, "planning", err)), noCheck
	}
	out.Plan = Plan{Variant: plan.Variant.String(), Layout: shape.Layout.String(), Splits: plan.NumSplits,
		SplitTokens: plan.SplitTokens, WorkspaceBytes: workspace}
	if shape.Layout == ref.KVPaged {
		out.Plan.PageSize = shape.PageSize
	}

	elem := s.DType.Bytes()
	qBytes := uint64(shape.QElements()) * elem
	cacheBytes := uint64(shape.CacheElements()) * s.kvDType().Bytes()
	cacheStride := roundUp(cacheBytes, copyAlign)
	other := 2*qBytes + 4*uint64(s.Batch) + 4*uint64(s.Batch)*uint64(shape.PagesPerSeq) + s.sinkBytes() + workspace
	if ok, why := Fits(dev, 2*cacheStride+other); !ok {
		return merge(out, skipped(kernel, "does not fit: %s", why)), noCheck
	}
	out.Rotation = planRotation(s.KVBytes(), float64(2*cacheStride), float64(info.props.L2Bytes),
		o.RotateFactor, rotateCap(o, info, other))
	copies := out.Rotation.Copies

	bufs := &buffers{dev: dev}
	defer bufs.close()
	var q, o0, lens, k, v *cgo.Buffer
	if what, err := bufs.allocEach(
		bufferAlloc{&q, "Q", qBytes}, bufferAlloc{&o0, "the output", qBytes}, bufferAlloc{&lens, "the context lengths", 4 * uint64(s.Batch)},
		bufferAlloc{&k, fmt.Sprintf("%d copies of the K cache", copies), uint64(copies) * cacheStride},
		bufferAlloc{&v, fmt.Sprintf("%d copies of the V cache", copies), uint64(copies) * cacheStride},
	); err != nil {
		return merge(out, fromError(kernel, what, err)), noCheck
	}
	// One fill over every copy: copy 0 holds exactly the cache the reference sees.
	for _, f := range []struct {
		b    *cgo.Buffer
		what string
		seed uint64
	}{{q, "Q", seeds.Q}, {k, "the K cache", seeds.K}, {v, "the V cache", seeds.V}} {
		if fp8 && f.b != q {
			if err := fillE4M3(f.b, f.seed, cacheBytes, cacheStride, copies); err != nil {
				return merge(out, failed(kernel, "filling %s: %v", f.what, err)), noCheck
			}
			continue
		}
		if err := f.b.FillHash(s.DType, f.b.Bytes/elem, f.seed, 1); err != nil {
			return merge(out, failed(kernel, "filling %s: %v", f.what, err)), noCheck
		}
	}
	if err := cgo.Write(lens, int32s(shape.Context)); err != nil {
		return merge(out, failed(kernel, "copying the context lengths: %v", err)), noCheck
	}
	cache.K, cache.V = k.Ptr, v.Ptr
	if kh, vh := s.fp8HeadScales(); kh != nil {
		for _, sc := range []struct {
			dst    *uint64
			what   string
			scales []float32
		}{{&cache.KScales, "the per-head K scales", kh}, {&cache.VScales, "the per-head V scales", vh}} {
			b, err := bufs.alloc(sc.what, uint64(4*len(sc.scales)))
			if err != nil {
				return merge(out, fromError(kernel, sc.what, err)), noCheck
			}
			if err := cgo.Write(b, sc.scales); err != nil {
				return merge(out, failed(kernel, "copying %s: %v", sc.what, err)), noCheck
			}
			*sc.dst = b.Ptr
		}
	}
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
		if err := appendLastTokens(dev, bufs, cache, shape, seeds); err != nil {
			return merge(out, fromError(kernel, "the KV append", err)), noCheck
		}
	}
	plan.Q, plan.Out, plan.ContextLens, plan.Cache = q.Ptr, o0.Ptr, lens.Ptr, cache
	var sinks []float64
	if s.Sinks {
		b, err := bufs.alloc("the sinks", s.sinkBytes())
		if err != nil {
			return merge(out, fromError(kernel, "sinks", err)), noCheck
		}
		if err := b.FillHash(cgo.DTypeF32, uint64(s.QHeads), seeds.Sinks, sinkScale); err != nil {
			return merge(out, failed(kernel, "filling the sinks: %v", err)), noCheck
		}
		plan.Sinks, sinks = b.Ptr, attentionSinks(s.QHeads, seeds)
	}
	var ws *cgo.Buffer
	if workspace > 0 {
		if ws, err = bufs.alloc("the split workspace", workspace); err != nil {
			return merge(out, fromError(kernel, "workspace", err)), noCheck
		}
		plan.Workspace, plan.WorkspaceBytes = ws.Ptr, ws.Bytes
	}

	return verifyThenTime(dev, o, out, kernel,
		func() Check {
			return verifyAttention(dev, plan, o0, ws, shape, ref.DType(s.DType), seeds, table, sinks, s.Append, o.Seed, o.checkOnly, s)
		},
		func(call int) error {
			p := plan
			offset := uint64(call%copies) * cacheStride
			p.Cache.K, p.Cache.V = k.Ptr+offset, v.Ptr+offset
			return dev.Attention(p)
		})
}

func int32s(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

// verifyAttention poisons the output and the workspace, runs the planned call once on copy 0
// of the caches, checks every output for NaN and (sequence, KV head) pairs against the float64
// reference: a sample of them, or with every set all of them.
func verifyAttention(dev *cgo.Device, plan cgo.AttentionParams, outBuf, ws *cgo.Buffer, shape ref.AttentionShape,
	dtype ref.DType, seeds ref.AttentionSeeds, table []int32, sinks []float64, appended bool, seed uint64, every bool,
	s AttentionSpec) Check {
	c := checkOf(Verification{Tolerance: ref.AttentionTolerance(dtype)})
	// The workspace is poisoned too: a partial the split merge reads unwritten is NaN.
	got, reason := runPoisoned(dev, func() error { return dev.Attention(plan) }, outBuf, dtype, ws)
	if reason != "" {
		c.Reason = reason
		return c
	}
	pairs := attentionPairs(shape, seed)
	if every {
		pairs = sampleIndices(shape.Batch*shape.KVHeads, shape.Batch*shape.KVHeads, seed)
	}
	return compareAttention(got, shape, dtype, seeds, table, sinks, appended, plan.NumSplits, plan.Variant == cgo.AttentionMMA, pairs,
		s.fp8Scales())
}

// fp8Scales is the scale of each KV head of the spec's fp8 cache, K's and V's (the tensor's, or
// the per-head ones with their 0 entries the tensor's), or nil for a 16-bit cache.
func (s AttentionSpec) fp8Scales() *fp8CacheScales {
	if s.kvDType() != cgo.DTypeFP8E4M3 {
		return nil
	}
	kh, vh := s.fp8HeadScales()
	return &fp8CacheScales{K: ref.E4M3HeadScales(s.KVHeads, fp8KScale, kh), V: ref.E4M3HeadScales(s.KVHeads, fp8VScale, vh)}
}

// fp8CacheScales are an fp8 cache's scales a KV head, K's and V's.
type fp8CacheScales struct{ K, V []float32 }

// attentionSinks are the sink logits the device holds: f32 from seeds.Sinks, widened.
func attentionSinks(qHeads int, seeds ref.AttentionSeeds) []float64 {
	out := make([]float64, qHeads)
	for i := range out {
		out[i] = float64(ref.FillValue(ref.F32, seeds.Sinks, sinkScale, uint64(i)))
	}
	return out
}

// attentionPairs picks the (sequence, KV head) pairs, as b*KVHeads+h, whose query heads the
// reference computes, within the work budget.
func attentionPairs(shape ref.AttentionShape, seed uint64) []int {
	perPair := 2 * float64(shape.MaxSpan()) * float64(shape.HeadDim)
	budget := int(math.Max(1, math.Floor(maxAttentionRefElements/perPair)))
	return sampleIndices(shape.Batch*shape.KVHeads, min(budget, maxAttentionRefPairs), seed)
}

// compareAttention checks got (the whole output) for NaN, and the query heads of the chosen
// pairs against the reference, within the tensor-core kernel's bounds where mma is set.
func compareAttention(got []float32, shape ref.AttentionShape, dtype ref.DType, seeds ref.AttentionSeeds,
	table []int32, sinks []float64, appended bool, splits int, mma bool, pairs []int, fp8 *fp8CacheScales) Check {
	d := shape.HeadDim
	want, elems := attentionReferencePairs(shape, dtype, seeds, table, sinks, appended, pairs, fp8)
	sub := make([]float32, len(elems))
	for i, e := range elems {
		sub[i] = got[e]
	}
	bounds := want.ElementBounds(dtype, splits)
	if mma {
		bounds = want.ElementBoundsMMA(dtype, splits)
	}
	cmp := ref.Compare(sub, want.Want, bounds, ref.AttentionTolerance(dtype))
	c := Check{Verification: Verification{Passed: cmp.Passed, RelError: cmp.RelError, Tolerance: cmp.Tolerance, Checked: cmp.Count}, OutOfBound: cmp.OutOfBound}
	c.Worst, c.Mismatches = elementsOf(cmp, func(i int) int { return elems[i] })
	v := &c.Verification
	if count, first := nonFinite(got); count > 0 {
		v.Passed, v.RelError, v.NonFinite, v.Checked = false, 0, count, len(got)
		row := first / d
		v.Reason = fmt.Sprintf("%d of %d outputs are NaN or infinite (first: sequence %d, head %d, dim %d = %v; NaN is the poison of an unwritten output)",
			count, len(got), row/shape.QHeads, row%shape.QHeads, first%d, got[first])
		return c
	}
	if !cmp.Passed {
		v.Reason = cmp.Reason()
		if m := cmp.Mismatches; len(m) > 0 {
			e := elems[m[0].Index]
			row := e / d
			v.Reason += fmt.Sprintf(" (at sequence %d, head %d, dim %d)", row/shape.QHeads, row%shape.QHeads, e%d)
		}
	} else if len(pairs) < shape.Batch*shape.KVHeads {
		v.Reason = fmt.Sprintf("all %d outputs finite; %d of %d (sequence, KV head) pairs checked against the float64 reference with every query head of their group",
			len(got), len(pairs), shape.Batch*shape.KVHeads)
	}
	return c
}

// attentionReferencePairs is ref.AttentionPairs on the inputs the device was filled with,
// generated from the hash: only the K and V rows the chosen pairs read. With appended, each
// sequence's last token is the one the KV append wrote: new K and V rows of [batch, kv_heads,
// head_dim] from seeds.KNew and seeds.VNew.
func attentionReferencePairs(shape ref.AttentionShape, dtype ref.DType, seeds ref.AttentionSeeds,
	table []int32, sinks []float64, appended bool, pairs []int, fp8 *fp8CacheScales) (ref.AttentionReference, []int) {
	d := shape.HeadDim
	fill := func(seed, off uint64, dst []float64) {
		for i := range dst {
			dst[i] = float64(ref.FillValue(dtype, seed, 1, off+uint64(i)))
		}
	}
	// scales: the fp8 cache's per-KV-head scales of K or V; nil for a 16-bit cache
	cached := func(seed, newSeed uint64, scales []float32) func(b, h, t int, dst []float64) {
		return func(b, h, t int, dst []float64) {
			newRow := appended && t == shape.Context[b]-1
			switch {
			case scales != nil && newRow: // the append's quantisation of the new row with the head's scale, exactly
				scale := scales[h]
				off := uint64((b*shape.KVHeads + h) * d)
				for i := range dst {
					dst[i] = ref.E4M3(ref.E4M3Quantize(ref.FillValue(dtype, newSeed, 1, off+uint64(i)), scale)) * float64(scale)
				}
			case scales != nil:
				scale := scales[h]
				off := uint64(shape.KVOffset(table, b, h, t))
				for i := range dst {
					dst[i] = ref.E4M3(ref.E4M3Code(seed, off+uint64(i))) * float64(scale)
				}
			case newRow:
				fill(newSeed, uint64((b*shape.KVHeads+h)*d), dst)
			default:
				fill(seed, uint64(shape.KVOffset(table, b, h, t)), dst)
			}
		}
	}
	var kScales, vScales []float32
	if fp8 != nil {
		kScales, vScales = fp8.K, fp8.V
	}
	in := ref.AttentionInputs{
		Q:     func(row int, dst []float64) { fill(seeds.Q, uint64(row*d), dst) },
		K:     cached(seeds.K, seeds.KNew, kScales),
		V:     cached(seeds.V, seeds.VNew, vScales),
		Sinks: sinks,
	}
	return ref.AttentionPairs(shape, in, pairs)
}

// appendLastTokens writes each sequence's last token into the cache with the KV append
// kernel: new K and V rows [batch, kv_heads, head_dim] from the hash.
func appendLastTokens(dev *cgo.Device, bufs *buffers, cache cgo.KVCache, shape ref.AttentionShape, seeds ref.AttentionSeeds) error {
	rows := uint64(shape.Batch * shape.KVHeads * shape.HeadDim)
	act := cache.Activations()
	elem := act.Bytes()
	kNew, err := bufs.alloc("the new K", rows*elem)
	if err != nil {
		return err
	}
	vNew, err := bufs.alloc("the new V", rows*elem)
	if err != nil {
		return err
	}
	positions, err := bufs.alloc("the append positions", uint64(4*shape.Batch))
	if err != nil {
		return err
	}
	if err := kNew.FillHash(act, rows, seeds.KNew, 1); err != nil {
		return err
	}
	if err := vNew.FillHash(act, rows, seeds.VNew, 1); err != nil {
		return err
	}
	last := make([]int32, shape.Batch)
	for b, n := range shape.Context {
		last[b] = int32(n - 1)
	}
	if err := cgo.Write(positions, last); err != nil {
		return err
	}
	return dev.KVAppend(cgo.KVAppendParams{KNew: kNew.Ptr, VNew: vNew.Ptr, Positions: positions.Ptr, Cache: cache, Batch: shape.Batch})
}

// fillE4M3 writes the fp8 cache codes ref.E4M3Code(seed, i) into every one of the copies of a
// cache of cacheBytes, stride bytes apart (the hash fill has no fp8 codes: they are generated
// here, once, and copied to each copy).
func fillE4M3(b *cgo.Buffer, seed, cacheBytes, stride uint64, copies int) error {
	host := make([]byte, b.Bytes)
	one := ref.E4M3Codes(seed, int(cacheBytes))
	for c := 0; c < copies; c++ {
		copy(host[uint64(c)*stride:], one)
	}
	return b.CopyFromHost(host)
}
