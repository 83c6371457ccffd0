package model

// Layer is what one layer of a decode step does, as the step runs it and the float64 forward
// pass checks it. Shape gives counts (SlidingLayers of Layers, ...), not positions; Layer fixes
// the positions once for both sides: dense MLP layers first (DeepSeek's first_k_dense_replace),
// the layers without rotary spread evenly through the stack, ending each stretch (Llama 4's
// layers 3, 7, 11, ...), and the full-attention layers of a sliding or chunked model likewise
// (Gemma 3's every sixth, gpt-oss's odd layers), so the sliding and chunked ones come first in
// each stretch, as the configs' layer_types have them.
type Layer struct {
	Index  int
	Mixer  MixerKind // what mixes the tokens (stack.go)
	Window int       // > 0: attends to the last Window tokens only
	Chunk  int       // > 0: attends to the tokens of its own chunk only
	RoPE   bool      // rotary embedding on q and k
	MoE    bool      // routes to experts (with SharedFFN-wide shared experts beside them)
	FFN    int       // the dense MLP's width (MoE false), or the shared experts' (MoE true; 0: none)
}

// spread reports whether layer l is among k of n layers spread evenly through the stack.
func spread(l, k, n int) bool {
	if k <= 0 || n <= 0 {
		return false
	}
	return (l+1)*k/n > l*k/n
}

// Layer describes layer l (0-based, < Layers).
func (s Shape) Layer(l int) Layer {
	if s.Pattern != "" {
		return s.patternLayer(l)
	}
	ly := Layer{Index: l, Mixer: MixerAttention, RoPE: true}
	switch {
	case s.IsMLA():
		ly.Mixer = MixerMLA
	case s.LinearLayers > 0 && !spread(l, s.Layers-s.LinearLayers, s.Layers):
		ly.Mixer = MixerGatedDeltaNet
	}
	if s.SlidingLayers > 0 && !spread(l, s.Layers-s.SlidingLayers, s.Layers) {
		ly.Window = s.SlidingWindow
	}
	if s.ChunkedLayers > 0 && !spread(l, s.Layers-s.ChunkedLayers, s.Layers) {
		ly.Chunk = s.AttentionChunk
	}
	ly.RoPE = !spread(l, s.NoRoPELayers, s.Layers)
	if !s.IsMoE() {
		ly.FFN = s.FFN
		return ly
	}
	if l < s.DenseLayers {
		ly.FFN = s.DenseFFN
		return ly
	}
	ly.MoE, ly.FFN = true, s.sharedFFN()
	return ly
}
