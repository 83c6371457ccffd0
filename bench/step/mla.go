package step

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// Multi-head latent attention (DeepSeek-V3, Kimi-K2) in the absorbed form, as a decode engine
// runs it: per layer, on the attention norm's output a,
//   q_b  = round(round(rmsnorm(round(a · q_a^T)) * q_a_norm) · q_b^T)   (or round(a · q^T) without q_lora_rank)
//   kv_a = round(a · kv_a^T)                                             [latent | k_pe]
//   q[b, h, 0:512]   = round(q_b[b, h, 0:nope] · w_uk[h]^T)              (q_absorb: a grouped linear, one group a head)
//   cache[b, pos]    = [round(rmsnorm(kv_a[b, 0:512]) * kv_a_norm) | round(rope(k_pe))]
//   q[b, h, 512:576] = round(rope(q_b[b, h, nope:]))                     (both by db_mla_rope_append)
//   o[b, h]          = round(attention over the latent cache)            [512 a head]
//   v[b, h]          = round(o[b, h] · w_uv[h]^T)                        (v_absorb) [v_head_dim a head]
//   attn_proj        = round(v · o^T)
// The grouped linears read each head's slice where it lies and write where the next op reads
// it (db_grouped_linear's strides), so nothing is copied between them.

// Buffer names of the MLA step's activations.
const (
	bufMLAQA     = "mla_q_a"        // [batch, q_lora_rank]
	bufMLAQANorm = "mla_q_a_normed" // [batch, q_lora_rank]
	bufMLAQB     = "mla_q_b"        // [batch, q_heads, nope + rope]
	bufMLAKVA    = "mla_kv_a"       // [batch, latent + rope]
	bufMLAQ      = "mla_q"          // [batch, q_heads, 576]: the attention's q
	bufMLAOut    = "mla_out"        // [batch, q_heads, 512]: the attention's latent output
	bufMLAV      = "mla_v"          // [batch, q_heads v_head_dim]: o_proj's input
)

// mlaFeature names what the step cannot run of an MLA shape, "" when it runs it.
func mlaFeature(s model.Shape) string {
	v := cgo.SmallOpVector
	switch {
	case s.KVLoRARank != cgo.MLALatentDim || s.RoPEHeadDim != cgo.MLARoPEDim:
		return fmt.Sprintf("MLA with kv_lora_rank %d and qk_rope_head_dim %d (the MLA kernel is built for %d and %d)",
			s.KVLoRARank, s.RoPEHeadDim, cgo.MLALatentDim, cgo.MLARoPEDim)
	case s.QHeads > cgo.MLAMaxHeads:
		return fmt.Sprintf("MLA with %d query heads (the kernel takes up to %d)", s.QHeads, cgo.MLAMaxHeads)
	case s.KVHeads != s.QHeads:
		return fmt.Sprintf("MLA with %d KV heads beside %d query heads (the absorbed form has one latent per query head's group)", s.KVHeads, s.QHeads)
	case s.QKNopeHeadDim()%v != 0:
		return fmt.Sprintf("MLA with qk_nope_head_dim %d, not a multiple of %d (q_absorb reads 16-byte vectors)", s.QKNopeHeadDim(), v)
	case (s.QHeads*s.VHeadDim)%v != 0:
		return fmt.Sprintf("MLA with %d heads of v_head_dim %d: o_proj's input %d is not a multiple of %d", s.QHeads, s.VHeadDim, s.QHeads*s.VHeadDim, v)
	case s.QLoRARank%v != 0 || s.QLoRARank > cgo.SmallOpMaxHidden:
		return fmt.Sprintf("MLA with q_lora_rank %d (q_a_layernorm takes a multiple of %d up to %d)", s.QLoRARank, v, cgo.SmallOpMaxHidden)
	case s.AttnBias || s.OProjBias || s.QKNorm != "" || s.AttentionSinks || s.SlidingWindow > 0 || s.AttentionChunk > 0 || s.NormsPerLayer() == 4:
		return "MLA with attention biases, QK-norm, sinks, a window or four norms a layer (no MLA model has them)"
	case s.KVDType != s.ActivationDType():
		return fmt.Sprintf("MLA over a %s latent cache (the MLA kernel reads the activations' %s)", s.KVDType, s.ActivationDType())
	}
	if _, _, ok := ref.WeightFormatOf(s); ok {
		return "quantized weights in an MLA model (the step quantizes grouped-query attention models' projections; MLA's run bf16 or fp16)"
	}
	return ""
}

// mlaBuffers adds layer l's MLA weights and latent cache.
func (p *Program) mlaBuffers(l int, weight func(layer int, name string, count uint64, scale float32)) {
	s := p.Model
	H, heads := uint64(s.Hidden), uint64(s.QHeads)
	qHead, latent, rope := uint64(s.HeadDim), uint64(s.KVLoRARank), uint64(s.RoPEHeadDim)
	nope, vd := uint64(s.QKNopeHeadDim()), uint64(s.VHeadDim)
	lws := func(k uint64) float32 { return ref.LinearWeightScale(int(k)) }
	if r := uint64(s.QLoRARank); r > 0 {
		weight(l, ref.TensorQA, r*H, lws(H))
		weight(l, ref.TensorQANorm, r, ref.UnitScale)
		weight(l, ref.TensorQB, heads*qHead*r, lws(r))
	} else {
		weight(l, ref.TensorQ, heads*qHead*H, lws(H))
	}
	weight(l, ref.TensorKVA, (latent+rope)*H, lws(H))
	weight(l, ref.TensorKVANorm, latent, ref.UnitScale)
	weight(l, ref.TensorWUK, heads*latent*nope, lws(nope))
	weight(l, ref.TensorWUV, heads*vd*latent, lws(latent))
	weight(l, ref.TensorO, H*heads*vd, lws(heads*vd))
	cache := uint64(p.Batch) * uint64(p.Capacity()) * uint64(cgo.MLAQKDim)
	p.add(Buffer{Name: tensorKey(l, ref.TensorLatentCache), Bytes: cache * p.DType.Bytes(),
		Fill: &Fill{Tensor: ref.TensorLatentCache, Layer: l, Seed: ref.TensorSeed(p.Seed, l, ref.TensorLatentCache),
			Scale: ref.CacheScale, Count: cache, DType: p.DType}})
}

// mlaActivations adds the MLA step's activation buffers.
func (p *Program) mlaActivations() {
	s := p.Model
	B, heads, el := uint64(p.Batch), uint64(s.QHeads), p.DType.Bytes()
	if r := uint64(s.QLoRARank); r > 0 {
		p.add(Buffer{Name: bufMLAQA, Bytes: B * r * el})
		p.add(Buffer{Name: bufMLAQANorm, Bytes: B * r * el})
	}
	p.add(Buffer{Name: bufMLAQB, Bytes: B * heads * uint64(s.HeadDim) * el})
	p.add(Buffer{Name: bufMLAKVA, Bytes: B * uint64(s.KVLoRARank+s.RoPEHeadDim) * el})
	p.add(Buffer{Name: bufMLAQ, Bytes: B * heads * uint64(cgo.MLAQKDim) * el})
	p.add(Buffer{Name: bufMLAOut, Bytes: B * heads * uint64(cgo.MLAVDim) * el})
	p.add(Buffer{Name: bufMLAV, Bytes: B * heads * uint64(s.VHeadDim) * el})
	p.Notes = append(p.Notes,
		fmt.Sprintf("MLA runs absorbed: q_absorb and v_absorb are grouped linears of %d heads; the softmax scale is 1/sqrt(%d) (qk_nope + qk_rope), without DeepSeek's yarn mscale, which the shape does not carry", s.QHeads, s.HeadDim),
		"MLA's rotary (k_pe and q_pe) is the neox layout with theta 10000 over 64 dims, not DeepSeek's interleaved yarn rotary: a permutation of the synthetic weights' rows, and frequencies the kernels do not read differently")
}

// mlaAttention emits layer l's MLA attention from the normed input to attn_proj.
func (p *Program) mlaAttention(l int, emit func(int, string, Op),
	linear func(int, string, uint64, uint64, uint64, int, int, int),
	norm func(int, string, uint64, uint64, uint64, uint64, int, int),
	w func(int, string) uint64, addr func(string) uint64) {
	s := p.Model
	dt := p.DType
	el := uint64(dt.Bytes())
	B, H, heads := p.Batch, s.Hidden, s.QHeads
	qHead, nope, vd := s.HeadDim, s.QKNopeHeadDim(), s.VHeadDim
	latent, qk := cgo.MLALatentDim, cgo.MLAQKDim
	normed, attnProj := addr(bufNormed), addr(bufAttnProj)
	qb, kva, q, out, v := addr(bufMLAQB), addr(bufMLAKVA), addr(bufMLAQ), addr(bufMLAOut), addr(bufMLAV)
	if r := s.QLoRARank; r > 0 {
		qa, qan := addr(bufMLAQA), addr(bufMLAQANorm)
		linear(l, "q_a_proj", normed, w(l, ref.TensorQA), qa, B, r, H)
		norm(l, "q_a_norm", qa, 0, w(l, ref.TensorQANorm), qan, B, r)
		linear(l, "q_b_proj", qan, w(l, ref.TensorQB), qb, B, heads*qHead, r)
	} else {
		linear(l, "q_proj", normed, w(l, ref.TensorQ), qb, B, heads*qHead, H)
	}
	linear(l, "kv_a_proj", normed, w(l, ref.TensorKVA), kva, B, latent+cgo.MLARoPEDim, H)
	emit(l, "q_absorb", Op{GroupedLinear: &cgo.GroupedLinearParams{X: qb, W: w(l, ref.TensorWUK), Y: q,
		Rows: B, Experts: heads, N: latent, K: nope, DType: dt,
		XRowStride: heads * qHead, XGroupStride: qHead, YRowStride: heads * qk, YGroupStride: qk}})
	posLens := addr(bufPosLens)
	positions, lens := posLens, posLens+4*uint64(B)
	cache := cgo.MLACache(w(l, ref.TensorLatentCache), dt, p.Capacity())
	emit(l, "mla_rope_append", Op{MLARopeAppend: &cgo.MLARopeAppendParams{KVA: kva, KVNorm: w(l, ref.TensorKVANorm),
		QPE: qb + uint64(nope)*el, QOut: q, Positions: positions, Cache: cache,
		Rope: cgo.Rope{Theta: RopeTheta, Scaling: cgo.RopeDefault, RotaryDim: cgo.MLARoPEDim}, Eps: NormEps,
		Batch: B, QHeads: heads, QPERowStride: heads * qHead, QPEHeadStride: qHead}})
	emit(l, "attention_mla", Op{MLAAttention: &cgo.MLAAttentionParams{Q: q, Out: out, ContextLens: lens, Cache: cache,
		Batch: B, QHeads: heads, MaxContext: p.Capacity(), Scale: float32(ref.MLASoftmaxScale(s))}})
	emit(l, "v_absorb", Op{GroupedLinear: &cgo.GroupedLinearParams{X: out, W: w(l, ref.TensorWUV), Y: v,
		Rows: B, Experts: heads, N: vd, K: latent, DType: dt,
		XRowStride: heads * cgo.MLAVDim, XGroupStride: cgo.MLAVDim, YRowStride: heads * vd, YGroupStride: vd}})
	linear(l, "o_proj", v, w(l, ref.TensorO), attnProj, B, H, heads*vd)
}
