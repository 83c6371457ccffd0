package model

import "math"

// Parameter counts, per-step bytes and FLOPs. A Shape that fails Validate
// gives meaningless numbers; batch and context below 0 count as 0.

// matrix is count projection weights of one layer, y = x W^T with W n x k (k the input width).
type matrix struct {
	n, k, count int
	attn        bool // an attention projection, which Quantization.AttentionKept keeps unquantized
}

func (m matrix) params() int64 { return int64(m.count) * int64(m.n) * int64(m.k) }

// qkvOut is the output width of the fused QKV projection (grouped-query attention).
// With an output gate the query projection is twice as wide (query and gate).
func (s Shape) qkvOut() int64 {
	q := s.QHeads
	if s.AttnOutputGate {
		q *= 2
	}
	return int64((q + 2*s.KVHeads) * s.HeadDim)
}

// attnOut is the width attention hands to the output projection.
func (s Shape) attnOut() int64 {
	if s.IsMLA() {
		return int64(s.QHeads * s.VHeadDim)
	}
	return int64(s.QHeads * s.HeadDim)
}

// mlpMatrices lists one MLP of width ffn: gate and up (or up) and down.
func (s Shape) mlpMatrices(ffn int) []matrix {
	if ffn == 0 {
		return nil
	}
	up := 1
	if s.GatedMLP {
		up = 2
	}
	return []matrix{{n: ffn, k: s.Hidden, count: up}, {n: s.Hidden, k: ffn, count: 1}}
}

// mlpBiases counts the biases of one MLP of width ffn.
func (s Shape) mlpBiases(ffn int) int64 {
	if !s.MLPBias || ffn == 0 {
		return 0
	}
	upWidth := int64(ffn)
	if s.GatedMLP {
		upWidth = 2 * int64(ffn)
	}
	return upWidth + int64(s.Hidden)
}

func sumParams(ms []matrix) int64 {
	var n int64
	for _, m := range ms {
		n += m.params()
	}
	return n
}

func (s Shape) sumBytes(ms []matrix) float64 {
	var b float64
	for _, m := range ms {
		b += float64(m.count) * s.matrixBytes(m.n, m.k, m.attn)
	}
	return b
}

// expertParams counts one routed expert's MLP.
func (s Shape) expertParams() int64 {
	if !s.IsMoE() {
		return 0
	}
	return sumParams(s.expertMatrices()) + s.mlpBiases(s.ExpertFFN)
}

// expertMatrices lists one routed expert's MLP: from the hidden state, or from the latent of
// MoELatent where the experts work in one.
func (s Shape) expertMatrices() []matrix {
	ms := s.mlpMatrices(s.ExpertFFN)
	if s.MoELatent > 0 {
		for i := range ms {
			if ms[i].k == s.Hidden {
				ms[i].k = s.MoELatent
			} else {
				ms[i].n = s.MoELatent
			}
		}
	}
	return ms
}

func (s Shape) expertBytes() float64 {
	if !s.IsMoE() {
		return 0
	}
	return s.sumBytes(s.expertMatrices()) + float64(s.mlpBiases(s.ExpertFFN))*s.WeightDType.Bytes()
}

// routerParams counts one MoE layer's router, a Hidden x Experts linear (and its bias).
func (s Shape) routerParams() int64 {
	n := int64(s.Hidden) * int64(s.Experts)
	if s.RouterBias {
		n += int64(s.Experts)
	}
	return n
}

// normParams counts one layer's norms.
func (s Shape) normParams() int64 {
	n := int64(s.NormsPerLayer()) * int64(s.Hidden)
	if s.NormBias {
		n *= 2
	}
	return n
}

func (s Shape) finalNormParams() int64 {
	if s.NormBias {
		return 2 * int64(s.Hidden)
	}
	return int64(s.Hidden)
}

// layerParts sums a quantity over the parts every layer reads in full each step: its mixer,
// its norms, and its feed-forward's dense MLP or shared experts and router (the routed experts
// are counted apart). matrices gives the value of a matrix list, small that of count plain
// parameters.
func (s Shape) layerParts(matrices func([]matrix) float64, small func(int64) float64) float64 {
	return s.sumLayers(func(l Layer) float64 {
		m := mixerOf(l)
		return matrices(m.matrices(s, l)) + small(m.smallParams(s, l)+s.normParams()) +
			matrices(s.ffnMatrices(l)) + small(s.ffnSmallParams(l))
	})
}

// paramsBesidesExperts counts every layer's parameters except the routed experts.
func (s Shape) paramsBesidesExperts() int64 { return int64(s.totals().paramsBesidesExperts) }

func (s Shape) bytesBesidesExperts() float64 { return s.totals().bytesBesidesExperts }

func (s Shape) embeddingParams() int64 { return int64(s.Vocab) * int64(s.Hidden) }

func (s Shape) lmHeadParams() int64 {
	var n int64
	if !s.TiedEmbeddings {
		n = s.embeddingParams()
	}
	if s.LMHeadBias {
		n += int64(s.Vocab)
	}
	return n
}

// ParamsTotal counts every parameter: projections and their biases, norms
// (NormsPerLayer per layer plus the final one), QK-norm weights, sinks, routers
// and all experts, the embedding table and, unless tied to it, the LM head. For
// a shard, the parameters one GPU holds. The parts of a checkpoint in LeftOut
// (a vision tower) and multi-token-prediction layers are not counted.
func (s Shape) ParamsTotal() int64 {
	return s.paramsBesidesExperts() + int64(s.MoELayers())*int64(s.Experts)*s.expertParams() +
		s.embeddingParams() + s.lmHeadParams() + s.finalNormParams()
}

// ParamsActive counts the parameters one token uses: ParamsTotal less the
// experts the router does not pick (Experts - ExpertsPerToken per MoE layer).
// As in Mistral's and Qwen's published "active" counts, the whole embedding
// table counts though a token reads one row of it.
func (s Shape) ParamsActive() int64 {
	unused := int64(s.Experts-s.ExpertsPerToken) * s.expertParams()
	return s.ParamsTotal() - int64(s.MoELayers())*unused
}

// ParamsActiveExcludingEmbedding is ParamsActive without the input embedding
// table, the convention of DeepSeek's and OpenAI's published active counts: the
// LM head (the unembedding) counts, and a table tied to it counts once, as the
// LM head.
func (s Shape) ParamsActiveExcludingEmbedding() int64 {
	if s.TiedEmbeddings {
		return s.ParamsActive()
	}
	return s.ParamsActive() - s.embeddingParams()
}

// weightBytes sums the weights read with experts routed experts in each MoE
// layer and embeddingRows rows of an untied embedding table: the LM head (or the
// tied table) and the final norm in full.
func (s Shape) weightBytes(experts, embeddingRows float64) float64 {
	w := s.WeightDType.Bytes()
	lmHead := float64(s.lmHeadParams())
	if s.TiedEmbeddings {
		lmHead += float64(s.embeddingParams())
	} else {
		lmHead += embeddingRows * float64(s.Hidden)
	}
	return s.bytesBesidesExperts() + float64(s.MoELayers())*experts*s.expertBytes() +
		(lmHead+float64(s.finalNormParams()))*w
}

// WeightBytesTotal is the size of all weights: the quantized projections in
// their format (Quant), scales included; everything else in WeightDType.
func (s Shape) WeightBytesTotal() float64 {
	return s.weightBytes(float64(s.Experts), float64(s.Vocab))
}

// ExpectedDistinctExperts is how many of a layer's experts a batch of B tokens
// touches, on average: E * (1 - (1 - k/E)^B). It assumes uniform, independent
// routing: each token picks each expert with probability k/E, independently of
// the other tokens. B = 1 gives k; a large batch approaches E. Real routers are
// skewed, which touches fewer experts, so this errs towards more bytes. 0 for a
// dense model.
func (s Shape) ExpectedDistinctExperts(batch int) float64 {
	if !s.IsMoE() || batch <= 0 {
		return 0
	}
	e, k := float64(s.Experts), float64(s.ExpertsPerToken)
	return e * (1 - math.Pow(1-k/e, float64(batch)))
}

// WeightBytesPerStep is the weight bytes one decode step of B sequences must
// read, each weight once however many tokens use it (that is why batching is
// cheap until the KV cache or the FLOPs dominate):
//   - every layer's attention projections, dense MLP or shared experts, router
//     and norms, in full;
//   - of a mixture of experts, only the experts the batch touches:
//     ExpectedDistinctExperts(B) per MoE layer;
//   - the LM head in full: every token needs logits over the whole vocabulary;
//   - of an untied embedding table, only the batch's B rows (one token each); a
//     tied table is already counted in full as the LM head;
//   - the final norm.
func (s Shape) WeightBytesPerStep(batch int) float64 {
	batch = max(batch, 0)
	return s.weightBytes(s.ExpectedDistinctExperts(batch), float64(min(batch, s.Vocab)))
}

// KVElementsPerLayerToken is what one attention layer caches per token: a key and a value
// vector per KV head, or for multi-head latent attention the latent and the shared rotary key
// (DeepSeek-V3: 512 + 64).
func (s Shape) KVElementsPerLayerToken() int {
	l := s.attentionLayer()
	return mixerOf(l).kvElementsPerToken(s, l)
}

// attentionLayers counts the layers whose mixer attends to the cache.
func (s Shape) attentionLayers() int {
	_, n := s.layersOf(MixerAttention, MixerMLA)
	return n
}

// attentionLayer is the first layer whose mixer attends to the cache (layer 0 when none does).
func (s Shape) attentionLayer() Layer {
	if l, n := s.layersOf(MixerAttention, MixerMLA); n > 0 {
		return l
	}
	return s.Layer(0)
}

// KVBytesPerToken is the KV cache one token of context occupies over the layers: the sum of
// what each layer caches per token, in KVDType (DeepSeek-V3 in bf16: 61 x 576 x 2 = 70,272).
func (s Shape) KVBytesPerToken() float64 {
	return s.sumLayers(func(l Layer) float64 {
		return float64(mixerOf(l).kvElementsPerToken(s, l))
	}) * s.KVDType.Bytes()
}

// KVBytesPerSequence is the KV cache of one sequence of context tokens that a decode step
// reads (and a server must keep): every token in the full-attention layers, the last
// SlidingWindow tokens in the sliding-window layers, the current chunk in the chunked layers.
// Without such layers it is context * KVBytesPerToken.
func (s Shape) KVBytesPerSequence(context int) float64 {
	return s.sumLayers(func(l Layer) float64 {
		m := mixerOf(l)
		return float64(m.kvElementsPerToken(s, l)) * float64(m.attendedTokens(s, l, context))
	}) * s.KVDType.Bytes()
}

// attendedLayerTokens sums, over the layers, the tokens each attends to at this context.
func (s Shape) attendedLayerTokens(context int) float64 {
	return s.sumLayers(func(l Layer) float64 { return float64(mixerOf(l).attendedTokens(s, l, context)) })
}

// span is a group of layers that attend to the same number of tokens.
type span struct {
	name            string // the attention kernel's name
	layers, context int
}

// spans splits the layers by the tokens they attend to at this context: the
// full-attention ones (context), the sliding-window ones (min(context,
// SlidingWindow)) and the chunked ones (the current chunk's
// ((context-1) mod AttentionChunk) + 1). A group that attends to the whole
// context joins the full one; empty groups are left out.
func (s Shape) spans(context int) []span {
	context = max(context, 0)
	full := span{"attention", s.attentionLayers() - s.SlidingLayers - s.ChunkedLayers, context}
	var out []span
	if s.SlidingLayers > 0 && s.SlidingWindow > 0 {
		if c := min(context, s.SlidingWindow); c < context {
			out = append(out, span{"attention_local", s.SlidingLayers, c})
		} else {
			full.layers += s.SlidingLayers
		}
	}
	if s.ChunkedLayers > 0 && s.AttentionChunk > 0 {
		c := 0
		if context > 0 {
			c = (context-1)%s.AttentionChunk + 1
		}
		if c < context {
			out = append(out, span{"attention_chunked", s.ChunkedLayers, c})
		} else {
			full.layers += s.ChunkedLayers
		}
	}
	if full.layers > 0 {
		out = append([]span{full}, out...)
	}
	return out
}

// linearMACsPerToken counts the multiply-adds of one token's trip through every linear layer:
// each layer's mixer projections (MLA's in the absorbed form) and dense MLP or shared experts,
// router and its ExpertsPerToken experts, then the LM head. The embedding lookup does none.
func (s Shape) linearMACsPerToken() float64 {
	return s.totals().linearMACsPerToken
}

func (s Shape) sumLinearMACs() float64 {
	return s.sumLayers(func(l Layer) float64 {
		macs := sumParams(mixerOf(l).matrices(s, l)) + sumParams(s.ffnMatrices(l))
		if l.FFNKind() == FFNMoE {
			macs += int64(s.Hidden)*int64(s.Experts) + int64(s.ExpertsPerToken)*sumParams(s.expertMatrices())
			if s.SharedExpertGate {
				macs += int64(s.Hidden)
			}
		}
		return float64(macs)
	}) + float64(s.embeddingParams())
}

// attentionFLOPsPerToken is one sequence's attention FLOPs per attended token in one
// attention layer: QK^T and PV, 2 * QHeads * (QK width + V width). For grouped-query
// attention 4 * QHeads * HeadDim; for MLA's absorbed form, QK over the latent and rotary key
// (576 for DeepSeek-V3) and PV over the latent (512).
func (s Shape) attentionFLOPsPerToken() float64 {
	l := s.attentionLayer()
	return mixerOf(l).flopsPerAttendedToken(s, l)
}

// FLOPsPerStep counts one decode step's matrix FLOPs: 2 per multiply-add of
// every linear layer for each of the B tokens (k experts each for a mixture of
// experts), plus attention over the tokens each layer attends to. Biases, norms,
// activations, rotary embeddings and softmax are elementwise and left out.
func (s Shape) FLOPsPerStep(batch, context int) float64 {
	batch, context = max(batch, 0), max(context, 0)
	return float64(batch) * (2*s.linearMACsPerToken() + s.sumLayers(func(l Layer) float64 {
		m := mixerOf(l)
		return m.flopsPerToken(s, l) + m.flopsPerAttendedToken(s, l)*float64(m.attendedTokens(s, l, context))
	}))
}
