package cgo

// Multi-head latent attention (decodebench.h's MLA section): decode in the absorbed form over
// one latent cache per sequence, and its append. Optional functions of the table (shim.h): a
// library without them answers ErrNotExported, naming the function.

/*
#include "shim.h"
*/
import "C"

// The MLA kernel's fixed widths and head limit (DB_MLA_* in decodebench.h).
const (
	MLALatentDim = int(C.DB_MLA_LATENT_DIM) // kv_lora_rank: the latent c_kv, also the values
	MLARoPEDim   = int(C.DB_MLA_ROPE_DIM)   // qk_rope_head_dim: the shared rotary key
	MLAQKDim     = int(C.DB_MLA_QK_DIM)     // a query head and a cache row: latent, then rotary key
	MLAVDim      = int(C.DB_MLA_V_DIM)      // an output head
	MLAMaxHeads  = int(C.DB_MLA_MAX_HEADS)  // query heads of one call
)

// MLAAttentionParams mirrors db_mla_attention_params. Cache is the latent cache: K the rows of
// MLAQKDim elements, V 0, KVHeads 1, HeadDim MLAQKDim.
type MLAAttentionParams struct {
	Q, Out         uint64 // Q [batch, q_heads, MLAQKDim], Out [batch, q_heads, MLAVDim], Cache.DType
	ContextLens    uint64 // int32 [batch]
	Workspace      uint64 // fp32 split partials (see MLAAttentionPlan)
	WorkspaceBytes uint64
	Cache          KVCache
	Batch          int
	QHeads         int     // 1..MLAMaxHeads
	MaxContext     int     // >= every context length
	Scale          float32 // the softmax scale, > 0 (required: DeepSeek's includes the yarn mscale)
	NumSplits      int     // 0 = auto; written back by MLAAttentionPlan
	SplitTokens    int     // written back: tokens per split
}

// MLACache is the latent cache description of rows at k, contiguous [batch, capacity, MLAQKDim].
func MLACache(k uint64, dtype DType, capacity int) KVCache {
	return KVCache{K: k, Layout: KVContiguous, DType: dtype, KVHeads: 1, HeadDim: MLAQKDim, Capacity: capacity}
}

func (p MLAAttentionParams) toC(op string) (C.db_mla_attention_params, error) {
	var c C.db_mla_attention_params
	var err error
	c.q, c.out, c.context_lens = C.uint64_t(p.Q), C.uint64_t(p.Out), C.uint64_t(p.ContextLens)
	c.workspace, c.workspace_bytes = C.uint64_t(p.Workspace), C.uint64_t(p.WorkspaceBytes)
	if c.cache, err = p.Cache.toC(op); err != nil {
		return c, err
	}
	if err := int32s(op, "batch", p.Batch, &c.batch, "q_heads", p.QHeads, &c.q_heads,
		"max_context", p.MaxContext, &c.max_context, "num_splits", p.NumSplits, &c.num_splits,
		"split_tokens", p.SplitTokens, &c.split_tokens,
	); err != nil {
		return c, err
	}
	c.scale = C.float(p.Scale)
	return c, nil
}

func mlaAttentionFromC(c *C.db_mla_attention_params) MLAAttentionParams {
	return MLAAttentionParams{
		Q: uint64(c.q), Out: uint64(c.out), ContextLens: uint64(c.context_lens),
		Workspace: uint64(c.workspace), WorkspaceBytes: uint64(c.workspace_bytes),
		Cache: kvCacheFromC(&c.cache), Batch: int(c.batch), QHeads: int(c.q_heads),
		MaxContext: int(c.max_context), Scale: float32(c.scale),
		NumSplits: int(c.num_splits), SplitTokens: int(c.split_tokens),
	}
}

// MLAAttentionPlan validates p and resolves NumSplits (and SplitTokens); it returns the
// resolved params and the workspace bytes the call needs. Device memory is not read.
func (d *Device) MLAAttentionPlan(p MLAAttentionParams) (MLAAttentionParams, uint64, error) {
	const op = "db_mla_attention_plan"
	c, err := p.toC(op)
	if err != nil {
		return p, 0, err
	}
	var workspace C.uint64_t
	err = d.Do(func() error {
		return d.check(op, C.dbshim_mla_attention_plan(d.lib.api, d.ctx, &c, &workspace))
	})
	if err != nil {
		return p, 0, err
	}
	return mlaAttentionFromC(&c), uint64(workspace), nil
}

// MLAAttention launches MLA decode attention on the device's stream (planning it first when
// NumSplits is 0).
func (d *Device) MLAAttention(p MLAAttentionParams) error {
	const op = "db_mla_attention"
	c, err := p.toC(op)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_mla_attention(d.lib.api, d.ctx, &c)) })
}

// MLAAttentionLaunches is AttentionLaunches for an MLA call.
func (d *Device) MLAAttentionLaunches(p MLAAttentionParams) ([]LaunchInfo, error) {
	const op = "db_mla_attention_launches"
	c, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	return d.launches(op, func(out *C.db_launch_info, count *C.int32_t) C.int {
		return C.dbshim_mla_attention_launches(d.lib.api, d.ctx, &c, out, maxLaunches, count)
	})
}

// MLAKVAppendParams mirrors db_mla_kv_append_params: each sequence's new latent row goes to its
// position.
type MLAKVAppendParams struct {
	KVNew     uint64 // [batch, MLAQKDim], Cache.DType
	Positions uint64 // int32 [batch]; positions outside a sequence's capacity are skipped
	Cache     KVCache
	Batch     int
}

// MLAKVAppend writes the new latent rows into the cache, in either layout.
func (d *Device) MLAKVAppend(p MLAKVAppendParams) error {
	const op = "db_mla_kv_append"
	var c C.db_mla_kv_append_params
	var err error
	c.kv_new, c.positions = C.uint64_t(p.KVNew), C.uint64_t(p.Positions)
	if c.cache, err = p.Cache.toC(op); err != nil {
		return err
	}
	if c.batch, err = toInt32(op, "batch", p.Batch); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_mla_kv_append(d.lib.api, d.ctx, &c)) })
}
