package cgo

// The small op of an MLA decode step (decodebench.h, db_mla_rope_append): kv_a_layernorm on
// the latent, rotary on the shared key and on every query head's rotary part, and the latent
// row appended to the cache. Optional: a library without it answers ErrNotExported.

/*
#include "shim.h"
*/
import "C"

// MLARopeAppendParams mirrors db_mla_rope_append_params. Strides are in elements.
type MLARopeAppendParams struct {
	KVA       uint64 // [Batch, KVARowStride]: kv_a_proj's rows, latent (MLALatentDim) then k_pe (MLARoPEDim)
	KVNorm    uint64 // [MLALatentDim]: kv_a_layernorm's weight
	QPE       uint64 // head h of sequence b's rotary part at QPE + b*QPERowStride + h*QPEHeadStride
	QOut      uint64 // [Batch, QHeads, MLAQKDim]: the rotated q_pe goes to elements MLALatentDim.. of each head
	Positions uint64 // int32 [Batch]; a position outside the cache skips the sequence
	Cache     KVCache
	Rope      Rope // RopeDefault, RotaryDim MLARoPEDim
	Eps       float32
	Batch     int
	QHeads    int

	KVARowStride  int // 0: MLAQKDim
	QPERowStride  int
	QPEHeadStride int
}

// MLARopeAppend normalises and rotates each sequence's new latent row into the cache and
// rotates every query head's rotary part into QOut.
func (d *Device) MLARopeAppend(p MLARopeAppendParams) error {
	const op = "db_mla_rope_append"
	var c C.db_mla_rope_append_params
	var err error
	c.kv_a, c.kv_norm, c.q_pe, c.q_out = C.uint64_t(p.KVA), C.uint64_t(p.KVNorm), C.uint64_t(p.QPE), C.uint64_t(p.QOut)
	c.positions = C.uint64_t(p.Positions)
	if c.cache, err = p.Cache.toC(op); err != nil {
		return err
	}
	r := p.Rope
	c.rope.theta, c.rope.scaling, c.rope.factor = C.float(r.Theta), C.int32_t(r.Scaling), C.float(r.Factor)
	c.rope.low_freq_factor, c.rope.high_freq_factor = C.float(r.LowFreqFactor), C.float(r.HighFreqFactor)
	c.eps = C.float(p.Eps)
	if err := int32s(op, "rope.original_max_positions", r.OriginalMaxPositions, &c.rope.original_max_positions,
		"rope.rotary_dim", r.RotaryDim, &c.rope.rotary_dim, "batch", p.Batch, &c.batch, "q_heads", p.QHeads, &c.q_heads,
		"kv_a_row_stride", p.KVARowStride, &c.kv_a_row_stride, "q_pe_row_stride", p.QPERowStride, &c.q_pe_row_stride,
		"q_pe_head_stride", p.QPEHeadStride, &c.q_pe_head_stride); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_mla_rope_append(d.lib.api, d.ctx, &c)) })
}
