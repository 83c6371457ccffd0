package cgo

// #include "shim.h"
import "C"

import (
	"fmt"
	"strings"
)

// KVLayout is a DB_KV_* cache layout.
type KVLayout int32

const (
	KVContiguous KVLayout = C.DB_KV_CONTIGUOUS // [batch, kv_heads, capacity, head_dim]
	KVPaged      KVLayout = C.DB_KV_PAGED      // [num_pages, kv_heads, page_size, head_dim] + page table
)

// AttentionVariant is a DB_ATTENTION_* decode kernel choice.
type AttentionVariant int32

const (
	AttentionAuto AttentionVariant = C.DB_ATTENTION_AUTO // chosen by the plan: SIMT until a card says otherwise
	AttentionSIMT AttentionVariant = C.DB_ATTENTION_SIMT // fp32 CUDA-core scores and P·V
	AttentionMMA  AttentionVariant = C.DB_ATTENTION_MMA  // tensor-core scores and P·V (P rounded to the input dtype)
)

var attentionVariantNames = []string{"auto", "simt", "mma"}

func (v AttentionVariant) String() string {
	if v >= 0 && int(v) < len(attentionVariantNames) {
		return attentionVariantNames[v]
	}
	return fmt.Sprintf("variant(%d)", int32(v))
}

// ParseAttentionVariant accepts auto, simt or mma.
func ParseAttentionVariant(s string) (AttentionVariant, error) {
	for i, name := range attentionVariantNames {
		if s == name {
			return AttentionVariant(i), nil
		}
	}
	return 0, fmt.Errorf("unknown attention variant %q (want %s)", s, strings.Join(attentionVariantNames, ", "))
}

// KVCache mirrors db_kv_cache: what db_attention reads and db_kv_append writes.
type KVCache struct {
	K, V      uint64 // device addresses of the K and V caches, same layout and dtype
	PageTable uint64 // paged: int32 [batch, PagesPerSeq] page ids in [0, NumPages)
	Layout    KVLayout
	DType     DType // bf16, fp16 or fp8 (DTypeFP8E4M3)
	// An fp8 cache holds e4m3 codes; an element is code * KScale (K) or code * VScale (V),
	// both finite and > 0, and the activations it meets (q, out, the new tokens) are ActDType,
	// bf16 or fp16. For a 16-bit cache ActDType is 0 or DType and the scales are not read.
	KScale, VScale float32
	ActDType       DType
	// KScales, VScales: an fp8 cache's per-KV-head scales, device addresses of f32 [KVHeads]
	// (0: none, every head takes KScale / VScale; a 0 entry: that head takes them). Each entry
	// is 0 or finite and > 0; the device memory is not validated.
	KScales, VScales uint64
	KVHeads          int
	HeadDim          int // one of AttentionHeadDims
	Capacity         int // contiguous: tokens per (sequence, kv head)
	PageSize         int // paged: tokens per page, a power of two from MinPageSize to MaxPageSize
	NumPages         int
	PagesPerSeq      int
}

// Activations is the dtype of the q, out and new tokens used with the cache: ActDType for an
// fp8 cache, else DType.
func (k KVCache) Activations() DType {
	if k.DType == DTypeFP8E4M3 {
		return k.ActDType
	}
	return k.DType
}

func (k KVCache) toC(op string) (C.db_kv_cache, error) {
	var c C.db_kv_cache
	c.k, c.v, c.page_table = C.uint64_t(k.K), C.uint64_t(k.V), C.uint64_t(k.PageTable)
	c.layout, c.dtype = C.int32_t(k.Layout), C.int32_t(k.DType)
	c.k_scale, c.v_scale, c.act_dtype = C.float(k.KScale), C.float(k.VScale), C.int32_t(k.ActDType)
	c.k_scales, c.v_scales = C.uint64_t(k.KScales), C.uint64_t(k.VScales)
	if err := int32s(op, "cache.kv_heads", k.KVHeads, &c.kv_heads, "cache.head_dim", k.HeadDim, &c.head_dim,
		"cache.capacity", k.Capacity, &c.capacity, "cache.page_size", k.PageSize, &c.page_size,
		"cache.num_pages", k.NumPages, &c.num_pages, "cache.pages_per_seq", k.PagesPerSeq, &c.pages_per_seq); err != nil {
		return c, err
	}
	return c, nil
}

func kvCacheFromC(c *C.db_kv_cache) KVCache {
	return KVCache{
		K: uint64(c.k), V: uint64(c.v), PageTable: uint64(c.page_table),
		Layout: KVLayout(c.layout), DType: DType(c.dtype),
		KScale: float32(c.k_scale), VScale: float32(c.v_scale), ActDType: DType(c.act_dtype),
		KScales: uint64(c.k_scales), VScales: uint64(c.v_scales),
		KVHeads: int(c.kv_heads), HeadDim: int(c.head_dim), Capacity: int(c.capacity),
		PageSize: int(c.page_size), NumPages: int(c.num_pages), PagesPerSeq: int(c.pages_per_seq),
	}
}

// AttentionParams mirrors db_attention_params: one query token per sequence against its cache.
type AttentionParams struct {
	Q, Out         uint64 // [batch, q_heads, head_dim], Cache.Activations()
	ContextLens    uint64 // int32 [batch]
	Workspace      uint64 // fp32 split partials (see AttentionPlan)
	WorkspaceBytes uint64
	Cache          KVCache
	Batch          int
	QHeads         int              // a multiple of Cache.KVHeads
	MaxContext     int              // >= every context length
	Scale          float32          // 0 = 1/sqrt(head_dim)
	NumSplits      int              // 0 = auto; written back by AttentionPlan
	SplitTokens    int              // written back: tokens per split
	Variant        AttentionVariant // AttentionAuto is resolved and written back by AttentionPlan
	Sinks          uint64           // f32 [q_heads] sink logits joining the softmax denominator; 0 = none
	Window         int              // > 0: attend to the last Window tokens only (sliding window)
	Chunk          int              // > 0: attend to the tokens of the query's own chunk only (chunked attention)
}

func (p AttentionParams) toC(op string) (C.db_attention_params, error) {
	var c C.db_attention_params
	var err error
	c.q, c.out, c.context_lens = C.uint64_t(p.Q), C.uint64_t(p.Out), C.uint64_t(p.ContextLens)
	c.workspace, c.workspace_bytes = C.uint64_t(p.Workspace), C.uint64_t(p.WorkspaceBytes)
	if c.cache, err = p.Cache.toC(op); err != nil {
		return c, err
	}
	if err := int32s(op, "batch", p.Batch, &c.batch, "q_heads", p.QHeads, &c.q_heads,
		"max_context", p.MaxContext, &c.max_context, "num_splits", p.NumSplits, &c.num_splits,
		"split_tokens", p.SplitTokens, &c.split_tokens,
		"window", p.Window, &c.window,
		"chunk", p.Chunk, &c.chunk,
	); err != nil {
		return c, err
	}
	c.scale = C.float(p.Scale)
	c.variant = C.int32_t(p.Variant)
	c.sinks = C.uint64_t(p.Sinks)
	return c, nil
}

func attentionFromC(c *C.db_attention_params) AttentionParams {
	return AttentionParams{
		Q: uint64(c.q), Out: uint64(c.out), ContextLens: uint64(c.context_lens),
		Workspace: uint64(c.workspace), WorkspaceBytes: uint64(c.workspace_bytes),
		Cache: kvCacheFromC(&c.cache), Batch: int(c.batch), QHeads: int(c.q_heads),
		MaxContext: int(c.max_context), Scale: float32(c.scale),
		NumSplits: int(c.num_splits), SplitTokens: int(c.split_tokens),
		Variant: AttentionVariant(c.variant),
		Sinks:   uint64(c.sinks), Window: int(c.window), Chunk: int(c.chunk),
	}
}

// AttentionPlan validates p and resolves Variant and NumSplits (and SplitTokens); it returns the resolved
// params and the workspace bytes the call needs. Device memory is not read.
func (d *Device) AttentionPlan(p AttentionParams) (AttentionParams, uint64, error) {
	const op = "db_attention_plan"
	c, err := p.toC(op)
	if err != nil {
		return p, 0, err
	}
	var workspace C.uint64_t
	err = d.Do(func() error { return d.check(op, C.dbshim_attention_plan(d.lib.api, d.ctx, &c, &workspace)) })
	if err != nil {
		return p, 0, err
	}
	return attentionFromC(&c), uint64(workspace), nil
}

// Attention launches decode attention on the device's stream (planning it first when
// NumSplits is 0).
func (d *Device) Attention(p AttentionParams) error {
	const op = "db_attention"
	c, err := p.toC(op)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_attention(d.lib.api, d.ctx, &c)) })
}

// KVAppendParams mirrors db_kv_append_params: each sequence's new K and V go to its position.
type KVAppendParams struct {
	KNew, VNew uint64 // [batch, kv_heads, head_dim], Cache.Activations()
	Positions  uint64 // int32 [batch]; positions outside a sequence's capacity are skipped
	Cache      KVCache
	Batch      int
}

// KVAppend writes the new tokens into the cache, in either layout.
func (d *Device) KVAppend(p KVAppendParams) error {
	const op = "db_kv_append"
	var c C.db_kv_append_params
	var err error
	c.k_new, c.v_new, c.positions = C.uint64_t(p.KNew), C.uint64_t(p.VNew), C.uint64_t(p.Positions)
	if c.cache, err = p.Cache.toC(op); err != nil {
		return err
	}
	if c.batch, err = toInt32(op, "batch", p.Batch); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_kv_append(d.lib.api, d.ctx, &c)) })
}
