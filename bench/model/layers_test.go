package model

import "testing"

func TestLayerPlacement(t *testing.T) {
	s := Shape{Layers: 48, SlidingLayers: 40, SlidingWindow: 1024, ChunkedLayers: 36, AttentionChunk: 8192,
		NoRoPELayers: 12, Experts: 16, ExpertsPerToken: 1, FFN: 8192, DenseLayers: 2, DenseFFN: 4096}
	var sliding, chunked, noRoPE, moe, dense int
	for l := 0; l < s.Layers; l++ {
		ly := s.Layer(l)
		if ly.Window == 1024 {
			sliding++
		}
		if ly.Chunk == 8192 {
			chunked++
			if !ly.RoPE {
				t.Errorf("layer %d is chunked and without rotary", l)
			}
		}
		if !ly.RoPE {
			noRoPE++
		}
		if ly.MoE {
			moe++
			if ly.FFN != 8192 {
				t.Errorf("layer %d: shared FFN %d, want 8192", l, ly.FFN)
			}
		} else {
			dense++
			if l >= 2 || ly.FFN != 4096 {
				t.Errorf("layer %d: dense with FFN %d", l, ly.FFN)
			}
		}
	}
	if sliding != 40 || chunked != 36 || noRoPE != 12 || moe != 46 || dense != 2 {
		t.Errorf("sliding %d chunked %d noRoPE %d moe %d dense %d; want 40 36 12 46 2", sliding, chunked, noRoPE, moe, dense)
	}
	// Every fourth layer of Llama 4's pattern is global and without rotary: 3, 7, ...
	if s.Layer(3).Chunk != 0 || s.Layer(3).RoPE || s.Layer(0).Chunk == 0 || !s.Layer(0).RoPE {
		t.Errorf("chunk pattern: layer 0 %d, layer 3 %d", s.Layer(0).Chunk, s.Layer(3).Chunk)
	}
	// gpt-oss: even layers sliding, odd full.
	g := Shape{Layers: 24, SlidingLayers: 12, SlidingWindow: 128, FFN: 1}
	for l := 0; l < 24; l++ {
		if want := l%2 == 0; (g.Layer(l).Window == 128) != want {
			t.Errorf("gpt-oss layer %d sliding = %v, want %v", l, !want, want)
		}
	}
	d := Shape{Layers: 5, FFN: 100}
	for l := 0; l < 5; l++ {
		if ly := d.Layer(l); ly.MoE || ly.FFN != 100 || !ly.RoPE || ly.Window != 0 || ly.Chunk != 0 {
			t.Errorf("dense layer %d: %+v", l, ly)
		}
	}
}

// TestStackGroupsEveryLayer: the stack's groups cover every layer once, each group's layers are
// alike but for their index, and the per-layer sums of the kinds equal the spans the attention
// kernels are listed by, on every preset.
func TestStackGroupsEveryLayer(t *testing.T) {
	shapes := Presets()
	for _, file := range []string{"qwen3-next-80b-a3b.json", "qwen3.5-27b.json"} {
		s, err := LoadHFConfig(sharedModel(t, file))
		if err != nil {
			t.Fatal(err)
		}
		shapes = append(shapes, s)
	}
	for _, s := range shapes {
		name := s.Name
		n := 0
		for _, g := range s.Stack() {
			n += g.Count
			if _, ok := mixers[g.Layer.Mixer]; !ok {
				t.Errorf("%s: layer %d has unregistered mixer %q", name, g.Layer.Index, g.Layer.Mixer)
			}
		}
		if n != s.Layers {
			t.Errorf("%s: the stack holds %d layers, want %d", name, n, s.Layers)
		}
		for _, context := range []int{0, 1, 100, 4096, 8193, 131072} {
			var spans float64
			for _, g := range s.spans(context) {
				spans += float64(g.layers) * float64(g.context)
			}
			if got := s.attendedLayerTokens(context); got != spans {
				t.Errorf("%s at context %d: layers attend to %g tokens, the kernels' spans to %g", name, context, got, spans)
			}
		}
	}
}
