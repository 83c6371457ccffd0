package model

import "math"

// Parameter counts, per-step bytes and FLOPs. A Shape that fails Validate
// gives meaningless numbers; batch and context below 0 count as 0.

// qkvOut is the output width of the fused QKV projection.
func (s Shape) qkvOut() int64 { return int64((s.QHeads + 2*s.KVHeads) * s.HeadDim) }

// attnOut is the width attention hands to the output projection.
func (s Shape) attnOut() int64 { return int64(s.QHeads * s.HeadDim) }

// attnWeights counts the Q, K, V and output projection matrices of one layer.
func (s Shape) attnWeights() int64 {
	return int64(s.Hidden)*s.qkvOut() + s.attnOut()*int64(s.Hidden)
}

// attnBiases counts the biases of one layer's attention projections.
func (s Shape) attnBiases() int64 {
	var n int64
	if s.AttnBias {
		n += s.qkvOut()
	}
	if s.OProjBias {
		n += int64(s.Hidden)
	}
	return n
}

// mlpWeights counts the matrices of one MLP of width ffn: gate, up and down
// (or up and down when not gated).
func (s Shape) mlpWeights(ffn int) int64 {
	matrices := int64(2)
	if s.GatedMLP {
		matrices = 3
	}
	return matrices * int64(s.Hidden) * int64(ffn)
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

// expertParams counts one expert's MLP.
func (s Shape) expertParams() int64 {
	if !s.IsMoE() {
		return 0
	}
	return s.mlpWeights(s.ExpertFFN) + s.mlpBiases(s.ExpertFFN)
}

// routerParams counts one layer's router, a Hidden x Experts linear.
func (s Shape) routerParams() int64 { return int64(s.Hidden) * int64(s.Experts) }

// layerParamsBesidesExperts counts everything one layer reads in full every
// step: attention, dense MLP, router and norms.
func (s Shape) layerParamsBesidesExperts() int64 {
	return s.attnWeights() + s.attnBiases() +
		s.mlpWeights(s.FFN) + s.mlpBiases(s.FFN) +
		s.routerParams() + int64(s.NormsPerLayer())*int64(s.Hidden)
}

func (s Shape) embeddingParams() int64 { return int64(s.Vocab) * int64(s.Hidden) }

func (s Shape) lmHeadParams() int64 {
	if s.TiedEmbeddings {
		return 0
	}
	return s.embeddingParams()
}

// ParamsTotal counts every parameter: projections and their biases, norms
// (NormsPerLayer per layer plus the final one), routers and all experts, the
// embedding table and, unless tied to it, the LM head. For a shard, the
// parameters one GPU holds.
func (s Shape) ParamsTotal() int64 {
	perLayer := s.layerParamsBesidesExperts() + int64(s.Experts)*s.expertParams()
	return int64(s.Layers)*perLayer + s.embeddingParams() + s.lmHeadParams() + int64(s.Hidden)
}

// ParamsActive counts the parameters one token uses: ParamsTotal less the
// experts the router does not pick (Experts - ExpertsPerToken per layer). As in
// published "active" counts, the whole embedding table counts though a token
// reads one row of it.
func (s Shape) ParamsActive() int64 {
	unused := int64(s.Experts-s.ExpertsPerToken) * s.expertParams()
	return s.ParamsTotal() - int64(s.Layers)*unused
}

// WeightBytesTotal is the size of all weights in WeightDType (norms, biases and
// embeddings are counted in WeightDType too).
func (s Shape) WeightBytesTotal() float64 {
	return float64(s.ParamsTotal()) * s.WeightDType.Bytes()
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
//   - every layer's attention projections, dense MLP, router and norms, in full;
//   - of a mixture of experts, only the experts the batch touches:
//     ExpectedDistinctExperts(B) per layer;
//   - the LM head in full: every token needs logits over the whole vocabulary;
//   - of an untied embedding table, only the batch's B rows (one token each); a
//     tied table is already counted in full as the LM head;
//   - the final norm.
func (s Shape) WeightBytesPerStep(batch int) float64 {
	batch = max(batch, 0)
	perLayer := float64(s.layerParamsBesidesExperts()) +
		s.ExpectedDistinctExperts(batch)*float64(s.expertParams())
	params := float64(s.Layers)*perLayer + float64(s.embeddingParams()) + float64(s.Hidden)
	if !s.TiedEmbeddings {
		params += float64(min(batch, s.Vocab)) * float64(s.Hidden)
	}
	return params * s.WeightDType.Bytes()
}

// KVBytesPerToken is the KV cache one token of context occupies and a step
// reads: a key and a value vector per KV head per layer,
// 2 * Layers * KVHeads * HeadDim * KVDType bytes.
func (s Shape) KVBytesPerToken() float64 {
	return 2 * float64(s.Layers) * float64(s.KVHeads) * float64(s.HeadDim) * s.KVDType.Bytes()
}

// KVBytesPerSequence is the KV cache of one sequence of context tokens that a
// decode step reads (and a server must keep): every token in the full-attention
// layers, the last SlidingWindow tokens in the sliding-window layers. Without
// sliding layers it is context * KVBytesPerToken.
func (s Shape) KVBytesPerSequence(context int) float64 {
	perLayerToken := 2 * float64(s.KVHeads) * float64(s.HeadDim) * s.KVDType.Bytes()
	return perLayerToken * s.attendedLayerTokens(context)
}

// attendedLayerTokens sums, over the layers, the tokens each attends to at this context.
func (s Shape) attendedLayerTokens(context int) float64 {
	full, local, localContext := s.layerContexts(context)
	return float64(full)*float64(max(context, 0)) + float64(local)*float64(localContext)
}

// layerContexts splits the layers into those attending to the whole context and the sliding-
// window ones, which attend to min(context, SlidingWindow) tokens.
func (s Shape) layerContexts(context int) (full, local, localContext int) {
	context = max(context, 0)
	if s.SlidingLayers == 0 || s.SlidingWindow <= 0 {
		return s.Layers, 0, 0
	}
	return s.Layers - s.SlidingLayers, s.SlidingLayers, min(context, s.SlidingWindow)
}

// linearMACsPerToken counts the multiply-adds of one token's trip through every
// linear layer: projections, dense MLP, router, its ExpertsPerToken experts and
// the LM head. The embedding lookup does none.
func (s Shape) linearMACsPerToken() float64 {
	perLayer := s.attnWeights() + s.mlpWeights(s.FFN) + s.routerParams() +
		int64(s.ExpertsPerToken)*s.mlpWeights(s.ExpertFFN)
	return float64(s.Layers)*float64(perLayer) + float64(s.embeddingParams())
}

// attentionFLOPs is one layer's attention for B sequences of context tokens:
// QK^T and PV, each 2 * QHeads * HeadDim * context FLOPs per sequence.
func (s Shape) attentionFLOPs(batch, context int) float64 {
	return 4 * float64(batch) * float64(s.QHeads) * float64(s.HeadDim) * float64(context)
}

// FLOPsPerStep counts one decode step's matrix FLOPs: 2 per multiply-add of
// every linear layer for each of the B tokens (k experts each for a mixture of
// experts), plus attention over the tokens each layer attends to. Biases, norms,
// activations, rotary embeddings and softmax are elementwise and left out.
func (s Shape) FLOPsPerStep(batch, context int) float64 {
	batch, context = max(batch, 0), max(context, 0)
	return 2*float64(batch)*s.linearMACsPerToken() +
		4*float64(batch)*float64(s.QHeads)*float64(s.HeadDim)*s.attendedLayerTokens(context)
}
