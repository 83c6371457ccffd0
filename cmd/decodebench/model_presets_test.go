package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// model show and predict work for every preset issue 12 names, and for each new model type's
// config.json; the numbers are the model package's (checked there against hand counts).
func TestModelShowAndPredictNewPresets(t *testing.T) {
	testdata := modelTestdata(t)
	hermetic(t, "")
	kvPerToken := map[string]float64{
		"Qwen3-8B": 147456, "Qwen3-32B": 262144, "Qwen3-30B-A3B": 98304, "Qwen3-235B-A22B": 192512,
		"Llama-3.3-70B": 327680, "Llama-4-Scout": 196608, "Gemma-3-27B": 507904,
		"DeepSeek-V3": 70272, "Kimi-K2": 70272, "gpt-oss-20b": 49152, "gpt-oss-120b": 73728,
	}
	for name, kv := range kvPerToken {
		out, code, msg := runCLI(t, "model", "show", "--model", name, "--batch", "8", "--context", "8k", "--json")
		if code != 0 {
			t.Errorf("model show %s: exit %d: %s", name, code, msg)
			continue
		}
		var m struct {
			ParamsTotal         int64   `json:"params_total"`
			ParamsActive        int64   `json:"params_active"`
			ParamsActiveNoEmbed int64   `json:"params_active_excluding_embedding"`
			KVBytesPerToken     float64 `json:"kv_bytes_per_token"`
			Kernels             []struct {
				Name, Kind string
			} `json:"kernels"`
		}
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Errorf("model show %s: not JSON: %v", name, err)
			continue
		}
		if m.KVBytesPerToken != kv || m.ParamsActiveNoEmbed <= 0 || m.ParamsActiveNoEmbed > m.ParamsActive || (name != "Gemma-3-27B" && m.ParamsActiveNoEmbed == m.ParamsActive) || m.ParamsActive > m.ParamsTotal {
			t.Errorf("model show %s: KV %g a token (want %g), params %d / %d active / %d without the embedding",
				name, m.KVBytesPerToken, kv, m.ParamsTotal, m.ParamsActive, m.ParamsActiveNoEmbed)
		}
		out, code, msg = runCLI(t, "predict", "--model", name, "--gpu", "h200", "--tp", "1", "--batch", "1,64", "--context", "4k", "--json")
		if code != 0 {
			t.Errorf("predict %s: exit %d: %s", name, code, msg)
			continue
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
			t.Errorf("predict %s: %d rows, %v", name, len(rows), err)
			continue
		}
		if r, _ := rows[0]["per_request_tokens_per_s"].(float64); r <= 0 {
			t.Errorf("predict %s: per-request %v tokens/s", name, rows[0]["per_request_tokens_per_s"])
		}
	}
	for _, file := range []string{"Qwen3-8B.json", "Qwen3-30B-A3B.json", "Llama-4-Scout-17B-16E-Instruct.json", "gemma-3-27b-it.json",
		"DeepSeek-V3.json", "Kimi-K2-Instruct.json", "gpt-oss-20b.json", "Mistral-Small-3.1-24B-Instruct-2503.json",
		"Phi-3.5-MoE-instruct.json", "GLM-4.5-Air.json"} {
		path := filepath.Join(testdata, file)
		if _, code, msg := runCLI(t, "model", "show", "--model-config", path); code != 0 {
			t.Errorf("model show --model-config %s: exit %d: %s", file, code, msg)
		}
		if _, code, msg := runCLI(t, "predict", "--model-config", path, "--gpu", "h200", "--batch", "1", "--context", "1k"); code != 0 {
			t.Errorf("predict --model-config %s: exit %d: %s", file, code, msg)
		}
	}
}

// model show says what the new architectures add: the absorbed MLA step and its latent
// attention, the quantized format, the spans, what the shape leaves out, and which kernels
// the library lacks.
func TestModelShowNewArchitecturesText(t *testing.T) {
	scout := filepath.Join(modelTestdata(t), "Llama-4-Scout-17B-16E-Instruct.json")
	hermetic(t, "")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--model", "deepseek-v3", "--batch", "4"}, []string{
			"multi-head latent attention, absorbed: q rank 1536, latent 512 + rotary key 64",
			"q_a_proj", "M=4 N=1536 K=7168 [fp8 (128x128 block scales)]", "q_absorb", "128 x M=4 N=512 K=128", "v_absorb",
			"B=4 Hq=128 latent QK=576 V=512 S=4096", "70.3 kB per token", "3 dense layers of 18432",
			"36.63B without the input embedding", "grouped linear with fp8 (128x128 block scales) weights: q_absorb, v_absorb",
			"multi-token-prediction layer"}},
		{[]string{"--model", "gpt-oss-120b", "--context", "8k"}, []string{
			"mxfp4 (e2m1, one e8m0 scale per 32) (4.25 bits a weight)", "attention sinks", "18 of the 36 layers attend to the last 128 tokens",
			"attention_local", "S=128 +sinks", "5.13B without the input embedding"}},
		{[]string{"--model-config", scout, "--context", "20000"}, []string{
			"36 of the 48 layers attend only within the current chunk of 8192 tokens", "12 of the 48 layers without rotary",
			"attention_chunked", "S=3616", "left out", "vision tower and multimodal projector (llama4's text_config read)",
			"16x8192 (top-1) + shared 8192"}},
		{[]string{"--model", "gemma-3-27b", "--context", "8k"}, []string{"52 of the 62 layers attend to the last 1024 tokens", "QK-norm"}},
	}
	for _, tc := range tests {
		out, code, msg := runCLI(t, append([]string{"model", "show"}, tc.args...)...)
		if code != 0 {
			t.Errorf("model show %v: exit %d: %s", tc.args, code, msg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("model show %v lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	// --weight-dtype sets every weight, the checkpoint's MXFP4 experts too.
	out, code, msg := runCLI(t, "model", "show", "--model", "gpt-oss-20b", "--weight-dtype", "bf16", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var m struct {
		ParamsTotal      float64 `json:"params_total"`
		WeightBytesTotal float64 `json:"weight_bytes_total"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.WeightBytesTotal != 2*m.ParamsTotal {
		t.Errorf("--weight-dtype bf16: %g bytes for %g parameters, %v", m.WeightBytesTotal, m.ParamsTotal, err)
	}
}

// An unsupported model_type is one line naming the nearest supported ones.
func TestModelShowUnsupportedType(t *testing.T) {
	hermetic(t, "")
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"model_type": "llava", "text_config": {"model_type": "llama"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, code, msg := runCLI(t, "model", "show", "--model-config", path)
	if code == 0 || !strings.Contains(msg, `"llava"`) || !strings.Contains(msg, "the nearest supported are llama, ") || strings.Contains(msg, "\n") {
		t.Errorf("exit %d: %s", code, msg)
	}
}

// modelTestdata is the model package's config.json fixtures, as an absolute path (the
// hermetic harness runs commands elsewhere).
func modelTestdata(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "bench", "model", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
