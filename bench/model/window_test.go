package model

import (
	"math"
	"testing"
)

// Sliding-window layers read only their window of the KV cache once the context passes it.
func TestSlidingWindowKVAndKernels(t *testing.T) {
	g := mustLookup(t, "Gemma-2-9B") // 42 layers, 21 of them local with a 4096-token window
	perLayerToken := 2.0 * 8 * 256 * 2
	cases := []struct {
		context int
		wantKV  float64
	}{
		{2048, perLayerToken * 42 * 2048},               // inside the window: every layer reads it all
		{4096, perLayerToken * 42 * 4096},               // at the window
		{8192, perLayerToken * (21*8192 + 21*4096)},     // past it: local layers stop at 4096
		{131072, perLayerToken * (21*131072 + 21*4096)}, // long context: half the layers stay at 4096
	}
	for _, c := range cases {
		if got := g.KVBytesPerSequence(c.context); got != c.wantKV {
			t.Errorf("context %d: KV %g bytes, want %g", c.context, got, c.wantKV)
		}
		var attnBytes, attnFLOPs, allFLOPs float64
		names := map[string]float64{}
		for _, k := range g.Kernels(1, c.context) {
			allFLOPs += k.Repeat * k.FLOPs
			if k.Kind == KindAttention {
				names[k.Name] = k.Repeat
				attnBytes += k.Repeat * float64(k.Batch*k.Context) * 2 * 8 * 256 * 2
				attnFLOPs += k.Repeat * k.FLOPs
			}
		}
		if attnBytes != c.wantKV {
			t.Errorf("context %d: attention kernels read %g KV bytes, want %g", c.context, attnBytes, c.wantKV)
		}
		if math.Abs(allFLOPs-g.FLOPsPerStep(1, c.context)) > 1e-9*allFLOPs {
			t.Errorf("context %d: kernels' FLOPs %g != FLOPsPerStep %g", c.context, allFLOPs, g.FLOPsPerStep(1, c.context))
		}
		if c.context <= 4096 && (len(names) != 1 || names["attention"] != 42) {
			t.Errorf("context %d: attention kernels %v, want one of 42 layers", c.context, names)
		}
		if c.context > 4096 && (names["attention"] != 21 || names["attention_local"] != 21) {
			t.Errorf("context %d: attention kernels %v, want 21 global and 21 local", c.context, names)
		}
	}
	if full := mustLookup(t, "Gemma-7B"); full.KVBytesPerSequence(8192) != 8192*full.KVBytesPerToken() {
		t.Error("a model without sliding layers reads context x KVBytesPerToken")
	}
}

func TestSlidingWindowFromConfig(t *testing.T) {
	base := `"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
		"num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": true`
	cases := []struct {
		desc, json          string
		window, localLayers int
	}{
		{"qwen2 off", `{"model_type": "qwen2", ` + base + `, "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21}`, 0, 0},
		{"qwen2 on: layers from max_window_layers", `{"model_type": "qwen2", ` + base + `, "use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 21}`, 4096, 3},
		{"mistral null", `{"model_type": "mistral", ` + base + `, "sliding_window": null}`, 0, 0},
		{"mistral all layers", `{"model_type": "mistral", ` + base + `, "sliding_window": 4096}`, 4096, 24},
		{"llama ignores it", `{"model_type": "llama", ` + base + `, "sliding_window": 4096}`, 0, 0},
		{"gemma2 default window, every other layer", `{"model_type": "gemma2", ` + base + `, "head_dim": 64}`, 4096, 12},
	}
	for _, c := range cases {
		s, err := ParseHFConfig([]byte(c.json), c.desc)
		if err != nil {
			t.Errorf("%s: %v", c.desc, err)
			continue
		}
		if s.SlidingWindow != c.window || s.SlidingLayers != c.localLayers {
			t.Errorf("%s: window %d over %d layers, want %d over %d", c.desc, s.SlidingWindow, s.SlidingLayers, c.window, c.localLayers)
		}
	}
	if _, err := ParseHFConfig([]byte(`{"model_type": "mistral", `+base+`, "sliding_window": -1}`), "bad"); err == nil {
		t.Error("a negative sliding_window was accepted")
	}
}
