package model

// What the per-token operations of a step (bench/sweep's small ops: norms, rotary, the KV
// append, activations) touch, where the newer architectures differ from a Llama.

// RotaryLayers is how many layers rotate q and k: Layers - NoRoPELayers.
func (s Shape) RotaryLayers() int { return s.Layers - s.NoRoPELayers }

// RotaryElementsPerLayerToken is what one layer rotates for one token: every query and key
// head (its first RotaryDim when set), or for multi-head latent attention the rotary part of
// each query head and the one shared rotary key.
func (s Shape) RotaryElementsPerLayerToken() int {
	if s.IsMLA() {
		return (s.QHeads + 1) * s.RoPEHeadDim
	}
	width := s.HeadDim
	if s.RotaryDim > 0 {
		width = s.RotaryDim
	}
	return (s.QHeads + s.KVHeads) * width
}

// DenseMLP is how many layers have a dense MLP and its width (for a mixture of experts,
// its dense layers; the shared experts are SharedFFN).
func (s Shape) DenseMLP() (layers, width int) { return s.denseMLP() }

// SharedFFN is the width of each MoE layer's shared experts, 0 for none.
func (s Shape) SharedFFN() int { return s.sharedFFN() }

// AttentionNorm is a norm inside attention beyond the layer norms: over Elements values per
// token in each of Layers layers, with Weights weight values per layer (0 when unweighted).
type AttentionNorm struct {
	Name     string
	Layers   int
	Elements int
	Weights  int
}

// AttentionNorms lists them: QK-norm over every query and key head ("qk_norm"; weighted
// RMSNorm in every layer, or an unweighted L2 norm in the rotary layers), and MLA's norms of
// the query and latent ranks ("latent_norm").
func (s Shape) AttentionNorms() []AttentionNorm {
	var norms []AttentionNorm
	width := (s.QHeads + s.KVHeads) * s.HeadDim
	switch s.QKNorm {
	case "rms":
		norms = append(norms, AttentionNorm{"qk_norm", s.Layers, width, 2 * s.HeadDim})
	case "l2":
		norms = append(norms, AttentionNorm{"qk_norm", s.RotaryLayers(), width, 0})
	}
	if s.IsMLA() {
		norms = append(norms, AttentionNorm{"latent_norm", s.Layers, s.QLoRARank + s.KVLoRARank, s.QLoRARank + s.KVLoRARank})
	}
	return norms
}
