package model

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Config keys that change what a decode step reads or computes are modelled or refused by
// name, per model type; the rest are irrelevant to the cost and leave the shape as it is.
func TestUnmodelledKeysRefused(t *testing.T) {
	llama := func(extra string) string { return strings.Replace(minimal, "%s", extra, 1) }
	qwen3 := func(extra string) string {
		return `{"model_type": "qwen3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
		"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000` + extra + `}`
	}
	mistral := func(extra string) string {
		return `{"model_type": "mistral", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
		"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000` + extra + `}`
	}
	ds := func(extra string) string {
		return `{"model_type": "deepseek_v3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
		"num_attention_heads": 8, "vocab_size": 1000, "kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
		"v_head_dim": 32, "q_lora_rank": 96, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
		"n_shared_experts": 1, "first_k_dense_replace": 1` + extra + `}`
	}
	tests := []configRefusal{
		{"no-rotary layers outside Llama 4", qwen3(`, "no_rope_layers": [1, 1, 1, 0]`),
			[]string{"no_rope_layers = [1, 1, 1, 0]", "layers without rotary is not modelled", `"qwen3"`}},
		{"a no-rotary interval outside Llama 4", llama(`, "no_rope_layer_interval": 4`),
			[]string{"no_rope_layer_interval = 4", "layers without rotary"}},
		{"QK-norm on a type without it", llama(`, "use_qk_norm": true`), []string{"use_qk_norm = true", "QK-norm is not modelled", `"llama"`}},
		{"chunked attention outside Llama 4", qwen3(`, "attention_chunk_size": 8192`),
			[]string{"attention_chunk_size = 8192", "chunked attention is not modelled", `"qwen3"`}},
		{"per-layer types on a type that reads none", mistral(`, "layer_types": ["full_attention", "sliding_attention"], "sliding_window": 4096`),
			[]string{`layer_types[1] = "sliding_attention"`, "not read for model_type \"mistral\""}},
		{"a rotary factor on latent attention", ds(`, "partial_rotary_factor": 0.5`),
			[]string{"partial_rotary_factor = 0.5", "multi-head latent attention", `"deepseek_v3"`}},
		{"biases on latent attention", ds(`, "attention_bias": true`), []string{"attention_bias = true", "multi-head latent attention"}},
		{"a rotary factor that rotates nothing", llama(`, "partial_rotary_factor": 0.01`), []string{"partial_rotary_factor = 0.01", "fewer than 2 of head_dim = 64"}},
		{"inside a wrapper, the outer type is named", `{"model_type": "mistral3", "text_config": {"hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "no_rope_layers": [1, 0]}}`,
			[]string{"text_config of mistral3", "no_rope_layers", `"mistral"`}},
		{"Qwen3-MoE's layer rule in a Mixtral config", `{"model_type": "mixtral", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
			"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "num_local_experts": 8, "num_experts_per_tok": 2,
			"decoder_sparse_step": 2}`, []string{"decoder_sparse_step = 2", "dense layers between MoE layers is not modelled", `"mixtral"`}},
		{"DeepSeek's dense first layers in a Qwen3-MoE config", `{"model_type": "qwen3_moe", "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "num_experts": 8,
			"num_experts_per_tok": 2, "moe_intermediate_size": 128, "first_k_dense_replace": 1}`, []string{"first_k_dense_replace = 1", "dense first layers"}},
		{"expert width in a gpt-oss config", `{"model_type": "gpt_oss", "hidden_size": 512, "intermediate_size": 512, "num_hidden_layers": 2,
			"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "num_local_experts": 4, "num_experts_per_tok": 2,
			"moe_intermediate_size": 256}`, []string{"moe_intermediate_size = 256", "experts narrower than intermediate_size"}},
		{"Llama 4's MoE layers in a DeepSeek config", ds(`, "moe_layers": [1]`), []string{"moe_layers = [1]", "dense layers among MoE layers"}},
		{"llama4_text without its experts", `{"model_type": "llama4_text", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
			"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "num_experts_per_tok": 1}`, []string{"num_local_experts is missing"}},
		{"gpt_oss without experts per token", `{"model_type": "gpt_oss", "hidden_size": 512, "intermediate_size": 512, "num_hidden_layers": 2,
			"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "num_local_experts": 4}`, []string{"num_experts_per_tok is missing"}},
		{"glm4_moe without its dense layers' count", `{"model_type": "glm4_moe", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
			"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "n_routed_experts": 8, "num_experts_per_tok": 2,
			"moe_intermediate_size": 128, "n_shared_experts": 1}`, []string{"first_k_dense_replace is missing"}},
	}
	checkRefusals(t, tests)
}

// The same keys where the type reads them, or where they ask for nothing beyond its own rule.
func TestUnmodelledKeysAccepted(t *testing.T) {
	tests := []struct {
		desc, json string
		check      func(Shape) bool
	}{
		// Some published configs carry another family's layer step at its no-op value.
		{"a layer step of 1 in another family's config", `{"model_type": "glm4_moe", "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "n_routed_experts": 8,
			"num_experts_per_tok": 2, "moe_intermediate_size": 128, "n_shared_experts": 1, "first_k_dense_replace": 1,
			"decoder_sparse_step": 1, "interleave_moe_layer_step": 1, "mlp_only_layers": []}`,
			func(s Shape) bool { return s.DenseLayers == 1 && s.MoELayers() == 1 }},
		{"use_qk_norm false on a type without QK-norm", strings.Replace(minimal, "%s", `, "use_qk_norm": false`, 1),
			func(s Shape) bool { return s.QKNorm == "" }},
		{"use_qk_norm on Qwen3, which always has QK-norm", `{"model_type": "qwen3", "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "use_qk_norm": true}`,
			func(s Shape) bool { return s.QKNorm == "rms" }},
		{"layer_types of full attention only on a type that reads none", strings.Replace(minimal, "%s", `, "layer_types": ["full_attention", "full_attention"]`, 1),
			func(s Shape) bool { return s.SlidingLayers == 0 && s.ChunkedLayers == 0 }},
		{"chunked layer_types with their chunk on a type that reads layer_types", `{"model_type": "qwen3", "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
			"layer_types": ["chunked_attention", "full_attention"], "attention_chunk_size": 256}`,
			func(s Shape) bool { return s.ChunkedLayers == 1 && s.AttentionChunk == 256 }},
		// Gemma 2 configs saved by newer transformers list their layers.
		{"gemma2 reads layer_types (default window 4096)", `{"model_type": "gemma2", "hidden_size": 512, "intermediate_size": 1024, "head_dim": 64,
			"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1000,
			"layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]}`,
			func(s Shape) bool { return s.SlidingLayers == 1 && s.SlidingWindow == 4096 }},
		// Phi-4-mini-instruct is a phi3 config rotating 0.75 of each 128-wide head.
		{"partial_rotary_factor on phi3", `{"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
			"num_attention_heads": 24, "num_key_value_heads": 8, "vocab_size": 200064, "partial_rotary_factor": 0.75, "tie_word_embeddings": true}`,
			func(s Shape) bool {
				return s.HeadDim == 128 && s.RotaryDim == 96 && s.RotaryElementsPerLayerToken() == (24+8)*96
			}},
		{"an odd rotary width rounds down to pairs, as transformers rotates", `{"model_type": "llama", "hidden_size": 800, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000, "partial_rotary_factor": 0.33}`,
			func(s Shape) bool { return s.HeadDim == 100 && s.RotaryDim == 32 }},
		{"factor 1 rotates the whole head", strings.Replace(minimal, "%s", `, "partial_rotary_factor": 1.0`, 1),
			func(s Shape) bool { return s.RotaryDim == 0 }},
		{"mlp_bias is not DeepSeek's", `{"model_type": "deepseek_v3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
			"num_attention_heads": 8, "vocab_size": 1000, "kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
			"v_head_dim": 32, "q_lora_rank": 96, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
			"n_shared_experts": 1, "first_k_dense_replace": 1, "mlp_bias": true}`,
			func(s Shape) bool { return !s.MLPBias && !s.AttnBias }},
	}
	for _, family := range []string{`"qwen3", "num_key_value_heads": 2`, `"gemma", "head_dim": 64, "num_key_value_heads": 2`} {
		tests = append(tests, struct {
			desc, json string
			check      func(Shape) bool
		}{"mlp_bias is Llama's only: " + family, `{"model_type": ` + family + `, "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000, "mlp_bias": true}`,
			func(s Shape) bool { return !s.MLPBias }})
	}
	for _, tc := range tests {
		s, err := ParseHFConfig([]byte(tc.json), "cfg.json")
		if err != nil {
			t.Errorf("%s: %v", tc.desc, err)
			continue
		}
		if !tc.check(s) {
			t.Errorf("%s: %+v", tc.desc, s)
		}
	}
}

// Keys that change numbers inside a step but not its bytes, FLOPs or kernels: rotary
// frequencies and their scaling, attention and logit scales, soft-capping, the routing rule's
// arithmetic, the clamp of gpt-oss's SwiGLU. Added to a fixture, each leaves the shape unchanged.
func TestCostIrrelevantKeysLeaveTheShape(t *testing.T) {
	irrelevant := map[string]any{
		"rope_scaling":            map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
		"rope_theta":              123456.0,
		"rope_local_base_freq":    10000.0,
		"query_pre_attn_scalar":   168,
		"final_logit_softcapping": 30.0,
		"attn_logit_softcapping":  50.0,
		"attn_temperature_tuning": 4,
		"floor_scale":             8192,
		"attn_scale":              0.1,
		"topk_method":             "noaux_tc",
		"rms_norm_eps":            1e-6,
		"hidden_act":              "gelu_pytorch_tanh",
		"router_aux_loss_coef":    0.001,
		"initializer_range":       0.02,
	}
	for _, file := range []string{"Qwen3-30B-A3B.json", "gemma-3-27b-it.json", "gpt-oss-20b.json", "DeepSeek-V3.json", "Llama-4-Scout-17B-16E-Instruct.json"} {
		path := "testdata/" + file
		want, err := LoadHFConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		text := cfg
		if inner, ok := cfg["text_config"].(map[string]any); ok {
			text = inner
		}
		for k, v := range irrelevant {
			text[k] = v
		}
		edited, _ := json.Marshal(cfg)
		got, err := ParseHFConfig(edited, path)
		if err != nil {
			t.Errorf("%s with cost-irrelevant keys: %v", file, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: cost-irrelevant keys changed the shape:\n got  %+v\n want %+v", file, got, want)
		}
	}
}
