package model

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadHFConfigMatchesPresets(t *testing.T) {
	tests := []struct {
		file, preset string
		weights      DType // torch_dtype of the file
	}{
		{"Meta-Llama-3-8B.json", "Llama-3-8B", BF16},
		{"Llama-3.2-1B.json", "Llama-3.2-1B", BF16},
		{"Qwen2.5-7B-Instruct.json", "Qwen2.5-7B", BF16},
		{"Qwen2.5-0.5B.json", "Qwen2.5-0.5B", BF16},
		{"Mixtral-8x7B-v0.1.json", "Mixtral-8x7B", BF16},
		{"gemma-7b.json", "Gemma-7B", BF16},
		{"gemma-2-9b.json", "Gemma-2-9B", FP32},
		{"Phi-3-mini-4k-instruct.json", "Phi-3-mini", BF16},
		{"Mistral-7B-v0.1.json", "Mistral-7B-v0.1", BF16},
		{"Mistral-Nemo-Base-2407.json", "Mistral-Nemo-12B", BF16},
		// Llama 3.3 70B: the config published with transformers 4.47.0.dev0, as quoted in public
		// repositories (and identical to DeepSeek-R1-Distill-Llama-70B's, which is built on it).
		{"Llama-3.3-70B-Instruct.json", "Llama-3.1-70B", BF16},
	}
	for _, tc := range tests {
		path := filepath.Join("testdata", tc.file)
		got, err := LoadHFConfig(path)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		want := mustLookup(t, tc.preset)
		want.Name, want.Source, want.PublishedParams, want.MaxPositions = got.Name, path, 0, got.MaxPositions
		want.WeightDType, want.KVDType = tc.weights, tc.weights
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tc.file, got, want)
		}
		if got.ParamsTotal() != mustLookup(t, tc.preset).ParamsTotal() {
			t.Errorf("%s: %d parameters, preset %s has %d", tc.file, got.ParamsTotal(), tc.preset, mustLookup(t, tc.preset).ParamsTotal())
		}
	}
}

// Configs of models no preset mirrors, as published on Hugging Face (long rope_scaling arrays
// shortened), against their published parameter counts (safetensors totals) within 0.5%.
func TestLoadHFConfigPublishedCounts(t *testing.T) {
	tests := []struct {
		file              string
		published, active float64
		headDim           int
		tied              bool
		weights           DType
	}{
		{"Llama-3.1-8B-Instruct.json", 8.03e9, 8.03e9, 128, false, BF16},        // rope_scaling dict
		{"Llama-3.2-3B.json", 3.21e9, 3.21e9, 128, true, BF16},                  // tied
		{"Mistral-Nemo-Instruct-2407.json", 12.25e9, 12.25e9, 128, false, BF16}, // head_dim != 5120/32
		{"Mistral-7B-v0.3.json", 7.25e9, 7.25e9, 128, false, BF16},              // no head_dim
		{"gemma-2-2b-it.json", 2.61e9, 2.61e9, 256, true, FP32},                 // softcapping, float32
		{"Phi-3-medium-128k-instruct.json", 13.96e9, 13.96e9, 128, false, BF16}, // long/short factors
		{"Mixtral-8x22B-v0.1.json", 140.6e9, 39.2e9, 128, false, BF16},
	}
	for _, tc := range tests {
		s, err := LoadHFConfig(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"total", float64(s.ParamsTotal()), tc.published}, {"active", float64(s.ParamsActive()), tc.active}} {
			if off := math.Abs(c.got/c.want - 1); off > 0.005 {
				t.Errorf("%s: %.4g %s parameters, published %.4g (%.2f%% off)", tc.file, c.got, c.what, c.want, 100*off)
			}
		}
		if s.HeadDim != tc.headDim || s.TiedEmbeddings != tc.tied || s.WeightDType != tc.weights || s.KVDType != tc.weights {
			t.Errorf("%s: head_dim %d, tied %v, weights %s, KV %s; want %d, %v, %s", tc.file, s.HeadDim, s.TiedEmbeddings, s.WeightDType, s.KVDType, tc.headDim, tc.tied, tc.weights)
		}
	}
	// "head_dim": null (as some Mistral configs write it) is the same as no head_dim.
	data, err := os.ReadFile("testdata/Mistral-7B-v0.3.json")
	if err != nil {
		t.Fatal(err)
	}
	withNull := strings.Replace(string(data), `"hidden_size"`, `"head_dim": null, "hidden_size"`, 1)
	if s, err := ParseHFConfig([]byte(withNull), "m.json"); err != nil || s.HeadDim != 128 || s.ParamsTotal() != 7248023552 {
		t.Errorf(`"head_dim": null: head_dim %d, %d parameters, %v`, s.HeadDim, s.ParamsTotal(), err)
	}
}

func TestHFConfigNames(t *testing.T) {
	if s, _ := LoadHFConfig("testdata/Meta-Llama-3-8B.json"); s.Name != "Meta-Llama-3-8B" {
		t.Errorf("name from file name = %q", s.Name)
	}
	if s, _ := LoadHFConfig("testdata/Mistral-Nemo-Base-2407.json"); s.Name != "mistralai/Mistral-Nemo-Base-2407" {
		t.Errorf("name from _name_or_path = %q", s.Name)
	}
	data, err := os.ReadFile("testdata/gemma-2-9b.json")
	if err != nil {
		t.Fatal(err)
	}
	// A Hugging Face cache snapshot, loaded by its folder.
	snapshot := filepath.Join(t.TempDir(), "models--google--gemma-2-9b", "snapshots", "33c193028431c2fde6c6e51f29e6f17b60cbfac6")
	if err := os.MkdirAll(snapshot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snapshot, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadHFConfig(snapshot)
	if err != nil || s.Name != "google/gemma-2-9b" || s.Source != filepath.Join(snapshot, "config.json") {
		t.Errorf("snapshot folder: name %q, source %q, %v", s.Name, s.Source, err)
	}
}

// minimal is a small valid llama config; cases edit it.
const minimal = `{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
 "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000 %s}`

func TestParseHFConfigDefaults(t *testing.T) {
	tests := []struct {
		desc  string
		json  string
		check func(Shape) bool
	}{
		{"KV heads default to attention heads, head_dim to hidden/heads, bf16", `{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000}`,
			func(s Shape) bool {
				return s.KVHeads == 8 && s.HeadDim == 64 && s.WeightDType == BF16 && !s.TiedEmbeddings && !s.AttnBias
			}},
		{"null means absent", `{"model_type": "phi3", "hidden_size": 512, "intermediate_size": 1024, "num_key_value_heads": null,
			"num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000, "head_dim": null}`,
			func(s Shape) bool { return s.KVHeads == 8 && s.HeadDim == 64 }},
		{"llama attention_bias sets Q, K, V and O biases; mlp_bias", strings.Replace(minimal, "%s", `, "attention_bias": true, "mlp_bias": true`, 1),
			func(s Shape) bool { return s.AttnBias && s.OProjBias && s.MLPBias }},
		{"qwen2 has QKV bias though the file does not say", `{"model_type": "qwen2", "hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000}`,
			func(s Shape) bool { return s.AttnBias && !s.OProjBias && !s.TiedEmbeddings }},
		{"gemma ties by default", `{"model_type": "gemma", "hidden_size": 512, "intermediate_size": 1024, "head_dim": 128,
			"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 1, "vocab_size": 1000}`,
			func(s Shape) bool { return s.TiedEmbeddings && s.HeadDim == 128 && s.GatedMLP }},
		{"dtype (transformers 4.56) wins over torch_dtype", strings.Replace(minimal, "%s", `, "dtype": "float16", "torch_dtype": "float32"`, 1),
			func(s Shape) bool { return s.WeightDType == FP16 && s.KVDType == FP16 }},
		{"fp8 quantization: 128x128 blocks by default, the rest and the KV cache bf16", strings.Replace(minimal, "%s", `, "quantization_config": {"quant_method": "fp8"}`, 1),
			func(s Shape) bool {
				return s.WeightDType == BF16 && s.KVDType == BF16 && s.Quant != nil && *s.Quant == Quantization{Method: QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}
			}},
		{"awq: bits, group size, zero points", strings.Replace(minimal, "%s", `, "torch_dtype": "float16", "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true, "version": "gemm"}`, 1),
			func(s Shape) bool {
				return s.WeightDType == FP16 && *s.Quant == Quantization{Method: QuantAWQ, Bits: 4, GroupSize: 64, Zeros: true}
			}},
		{"gptq: group_size -1 is one group per row; desc_act stores g_idx", strings.Replace(minimal, "%s", `, "quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": true}`, 1),
			func(s Shape) bool {
				return *s.Quant == Quantization{Method: QuantGPTQ, Bits: 8, Zeros: true, GIdx: true}
			}},
		{"4096.0 is a whole number", strings.Replace(minimal, `"hidden_size": 512`, `"hidden_size": 512.0`, 1),
			func(s Shape) bool { return s.Hidden == 512 }},
	}
	for _, tc := range tests {
		s, err := ParseHFConfig([]byte(strings.Replace(tc.json, "%s", "", 1)), "test.json")
		if err != nil || !tc.check(s) {
			t.Errorf("%s: %+v, %v", tc.desc, s, err)
		}
	}
}

// configRefusal is a config.json that ParseHFConfig must refuse, with what its error must say.
type configRefusal struct {
	desc, json string
	want       []string // each must appear in the error
}

// checkRefusals parses each config and fails where one is accepted or its error leaves out
// something it must say.
func checkRefusals(t *testing.T, tests []configRefusal) {
	t.Helper()
	for _, tc := range tests {
		_, err := ParseHFConfig([]byte(tc.json), "cfg.json")
		if err == nil {
			t.Errorf("%s: accepted", tc.desc)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.desc, err, w)
			}
		}
	}
}

func TestParseHFConfigRejects(t *testing.T) {
	withField := func(extra string) string { return strings.Replace(minimal, "%s", extra, 1) }
	replace := func(old, new string) string {
		return strings.Replace(strings.Replace(minimal, "%s", "", 1), old, new, 1)
	}
	tests := []configRefusal{
		{"not JSON", `{"model_type": "llama",`, []string{"cfg.json", "not a JSON object"}},
		{"JSON but not an object", `[1, 2]`, []string{"cfg.json", "not a JSON object", "it holds an array"}},
		{"empty file", "\n", []string{"cfg.json", "the file is empty"}},
		{"null", `null`, []string{"cfg.json", "it holds null"}},
		{"qwen2_moe", replace(`"llama"`, `"qwen2_moe"`), []string{`model_type "qwen2_moe" is not supported: the nearest supported are qwen3_moe, `, "decodebench model show --help"}},
		{"deepseek_v2", replace(`"llama"`, `"deepseek_v2"`), []string{`model_type "deepseek_v2" is not supported`, "the nearest supported are deepseek_v3, "}},
		{"more KV heads than heads", withField(`, "num_key_value_heads": 16`), []string{"num_attention_heads = 8", "num_key_value_heads = 16"}},
		{"unknown model_type", replace(`"llama"`, `"bert"`), []string{"cfg.json", `"bert"`, "the nearest supported are", "decodebench model show --help"}},
		{"no model_type", replace(`"model_type": "llama",`, ``), []string{"model_type is missing", "llama"}},
		{"missing hidden_size", replace(`"hidden_size": 512,`, ``), []string{"cfg.json", "hidden_size is missing", "positive whole number"}},
		{"zero layers", replace(`"num_hidden_layers": 2`, `"num_hidden_layers": 0`), []string{"num_hidden_layers = 0", "positive whole number"}},
		{"negative vocab", replace(`"vocab_size": 1000`, `"vocab_size": -1000`), []string{"vocab_size = -1000"}},
		{"vocab 1e12", replace(`"vocab_size": 1000`, `"vocab_size": 1e12`), []string{"vocab_size = 1e12", "too large", "at most 2147483647"}},
		{"vocab 10^12 in digits", replace(`"vocab_size": 1000`, `"vocab_size": 1000000000000`), []string{"vocab_size = 1000000000000", "too large", "at most 2147483647"}},
		{"hidden 2^31", replace(`"hidden_size": 512`, `"hidden_size": 2147483648`), []string{"hidden_size = 2147483648", "too large", "at most 2147483647"}},
		{"layers past float64", replace(`"num_hidden_layers": 2`, `"num_hidden_layers": 1e400`), []string{"num_hidden_layers = 1e400", "too large"}},
		{"negative and huge", replace(`"vocab_size": 1000`, `"vocab_size": -1e12`), []string{"vocab_size = -1e12", "positive whole number"}},
		{"fractional width", replace(`"intermediate_size": 1024`, `"intermediate_size": 1024.5`), []string{"intermediate_size = 1024.5"}},
		{"number as a string", replace(`"hidden_size": 512`, `"hidden_size": "512"`), []string{`hidden_size = "512"`}},
		{"uneven GQA", withField(`, "num_key_value_heads": 3`), []string{"num_attention_heads = 8", "num_key_value_heads = 3"}},
		{"head_dim needed", replace(`"num_attention_heads": 8`, `"num_attention_heads": 7`), []string{"head_dim is missing", "hidden_size = 512", "num_attention_heads = 7"}},
		{"mistral must state KV heads", replace(`"llama"`, `"mistral"`), []string{"num_key_value_heads is missing"}},
		{"gemma must state head_dim", strings.Replace(replace(`"llama"`, `"gemma"`), `"vocab_size"`, `"num_key_value_heads": 1, "vocab_size"`, 1),
			[]string{"head_dim is missing"}},
		{"bad dtype", withField(`, "torch_dtype": "int4"`), []string{`torch_dtype = "int4"`, "bfloat16, float16, float32"}},
		{"bool as string", withField(`, "tie_word_embeddings": "yes"`), []string{`tie_word_embeddings = "yes"`, "true or false"}},
		{"bitsandbytes", withField(`, "quantization_config": {"quant_method": "bitsandbytes"}`), []string{`"bitsandbytes"`, "mxfp4, fp8, fbgemm_fp8, awq and gptq"}},
		{"unknown module kept unquantized", withField(`, "quantization_config": {"quant_method": "awq", "modules_to_not_convert": ["mlp.down_proj"]}`),
			[]string{`modules_to_not_convert entry "mlp.down_proj"`, "self_attn"}},
		{"mixtral without experts", strings.Replace(replace(`"llama"`, `"mixtral"`), `"vocab_size"`, `"num_key_value_heads": 8, "vocab_size"`, 1),
			[]string{"num_local_experts is missing"}},
		{"mixtral k > E", strings.Replace(replace(`"llama"`, `"mixtral"`), `"vocab_size"`,
			`"num_key_value_heads": 8, "num_local_experts": 4, "num_experts_per_tok": 5, "vocab_size"`, 1),
			[]string{"num_experts_per_tok = 5", "num_local_experts = 4"}},
	}
	checkRefusals(t, tests)
}

func TestLoadHFConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "config.json")
	if _, err := LoadHFConfig(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v, want an error naming %s", err, missing)
	}
	if _, err := LoadHFConfig(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) || !strings.Contains(err.Error(), "folder without a config.json") {
		t.Errorf("folder without config.json: %v", err)
	}
	unreadable := filepath.Join(dir, "unreadable.json")
	if err := os.WriteFile(unreadable, []byte("{}"), 0o000); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root reads anything
		if _, err := LoadHFConfig(unreadable); err == nil || !strings.Contains(err.Error(), unreadable) {
			t.Errorf("unreadable file: %v", err)
		}
	}
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("\x00\x01 not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHFConfig(garbage); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("not JSON: %v", err)
	}
}
