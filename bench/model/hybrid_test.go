package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedModel is the path of a real config.json, exactly as published: testdata/shared holds
// byte-for-byte copies of the ones these tests read from the project's shared/models folder,
// so that a clone without that folder runs them; where the folder is beside the checkout (CI),
// TestSharedModelCopiesUnchanged holds each copy to its original.
func sharedModel(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join("testdata", "shared", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: copy %s from shared/models (unchanged) into testdata/shared", err, name)
	}
	return path
}

// TestSharedModelCopiesUnchanged: every copy in testdata/shared is its shared/models original,
// byte for byte, wherever that folder is beside the checkout.
func TestSharedModelCopiesUnchanged(t *testing.T) {
	originals := filepath.Join("..", "..", "..", "shared", "models")
	if _, err := os.Stat(originals); err != nil {
		t.Skipf("no shared/models beside the checkout (%v): the copies cannot be compared here", err)
	}
	copies, err := filepath.Glob(filepath.Join("testdata", "shared", "*.json"))
	if err != nil || len(copies) == 0 {
		t.Fatalf("no copies in testdata/shared (%v)", err)
	}
	for _, c := range copies {
		mine, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join(originals, filepath.Base(c)))
		if err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		if string(mine) != string(theirs) {
			t.Errorf("%s differs from shared/models/%s: copy it again, unchanged", c, filepath.Base(c))
		}
	}
}

// textConfig reads a real config's language-model fields (its text_config, where it has one).
func textConfig(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(pythonJSON(raw), &c); err != nil {
		t.Fatal(err)
	}
	if text, ok := c["text_config"].(map[string]any); ok {
		return text
	}
	return c
}

// TestGatedDeltaNetHybridsCountedByHand: every Gated DeltaNet hybrid of shared/models imports,
// and its parameters (total and active), KV bytes per token and recurrent state per sequence
// equal a count made here from the config's own numbers, layer by layer, as transformers'
// modeling_qwen3_next builds the modules.
func TestGatedDeltaNetHybridsCountedByHand(t *testing.T) {
	for _, file := range []string{"qwen3-next-80b-a3b.json", "qwen3.5-27b.json", "qwen3.5-35b-a3b.json",
		"qwen3.5-122b-a10b.json", "qwen3.5-397b-a17b.json"} {
		t.Run(file, func(t *testing.T) {
			path := sharedModel(t, file)
			s, err := LoadHFConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			c := textConfig(t, path)
			n := func(key string) int64 {
				v, ok := c[key].(float64)
				if !ok {
					t.Fatalf("%s: %s missing", file, key)
				}
				return int64(v)
			}
			h, layers, heads, kv, hd := n("hidden_size"), n("num_hidden_layers"), n("num_attention_heads"), n("num_key_value_heads"), n("head_dim")
			kh, vh, kd, vd, conv := n("linear_num_key_heads"), n("linear_num_value_heads"), n("linear_key_head_dim"), n("linear_value_head_dim"), n("linear_conv_kernel_dim")
			full := int64(0)
			if types, ok := c["layer_types"].([]any); ok {
				for _, ty := range types {
					if ty == "full_attention" {
						full++
					}
				}
			} else {
				full = layers / n("full_attention_interval")
			}
			linear := layers - full
			keyDim, valueDim := kh*kd, vh*vd
			// in_proj_qkvz + in_proj_ba, conv1d (no bias), dt_bias, A_log, the gated norm, out_proj
			gdn := h*(2*keyDim+2*valueDim) + h*2*vh + (2*keyDim+valueDim)*conv + 2*vh + vd + valueDim*h
			// q_proj doubled for the output gate, k, v, o, q_norm and k_norm
			attn := h*heads*hd*2 + 2*h*kv*hd + heads*hd*h + 2*hd
			var ffnTotal, ffnActive int64
			if _, moe := c["num_experts"]; moe {
				e, k, w, shared := n("num_experts"), n("num_experts_per_tok"), n("moe_intermediate_size"), n("shared_expert_intermediate_size")
				expert := 3 * h * w
				common := h*e + 3*h*shared + h // router, shared expert, shared expert gate
				ffnTotal, ffnActive = common+e*expert, common+k*expert
			} else {
				ffnTotal = 3 * h * n("intermediate_size")
				ffnActive = ffnTotal
			}
			norms := 2 * h
			embed := n("vocab_size") * h
			total := linear*gdn + full*attn + layers*(ffnTotal+norms) + 2*embed + h // untied LM head, final norm
			active := linear*gdn + full*attn + layers*(ffnActive+norms) + 2*embed + h
			if got := s.ParamsTotal(); got != total {
				t.Errorf("parameters %d, hand count %d", got, total)
			}
			if got := s.ParamsActive(); got != active {
				t.Errorf("active parameters %d, hand count %d", got, active)
			}
			if got, want := s.KVBytesPerToken(), float64(full*2*kv*hd*2); got != want {
				t.Errorf("KV bytes per token %g, hand count %g (bf16, %d attention layers)", got, want, full)
			}
			// fp32 state per value head, the convolution's last conv-1 inputs in bf16
			state := float64(linear) * (float64(vh*kd*vd*4) + float64((2*keyDim+valueDim)*(conv-1)*2))
			if got := s.StateBytesPerSequence(); got != state {
				t.Errorf("state bytes per sequence %g, hand count %g", got, state)
			}
			if s.KVBytesPerSequence(100000) != 100000*s.KVBytesPerToken() {
				t.Errorf("a hybrid's KV per sequence is not context x its attention layers' per token")
			}
		})
	}
}

// TestHybridFlatterThanDense: a Gated DeltaNet hybrid's bytes per step grow with the context
// only through its few attention layers, so its bound falls far less from 1k to 128k tokens
// than that of a dense model of its size.
func TestHybridFlatterThanDense(t *testing.T) {
	hybrid, err := LoadHFConfig(sharedModel(t, "qwen3.5-27b.json"))
	if err != nil {
		t.Fatal(err)
	}
	dense, err := LoadHFConfig(sharedModel(t, "qwen3-32b.json"))
	if err != nil {
		t.Fatal(err)
	}
	growth := func(s Shape) float64 {
		bytes := func(context int) float64 {
			return s.WeightBytesPerStep(16) + 16*(s.KVBytesPerSequence(context)+2*s.StateBytesPerSequence())
		}
		return bytes(131072) / bytes(1024)
	}
	if h, d := growth(hybrid), growth(dense); !(h < d*0.6) {
		t.Errorf("bytes per step from 1k to 128k tokens at batch 16: hybrid x%.2f, dense x%.2f; want the hybrid visibly flatter", h, d)
	}
}

// TestGatedDeltaNetRefusals: a layer kind decodebench does not implement, or a pattern it would
// place differently, is refused by name before anything is counted.
func TestGatedDeltaNetRefusals(t *testing.T) {
	raw, err := os.ReadFile(sharedModel(t, "qwen3-next-80b-a3b.json"))
	if err != nil {
		t.Fatal(err)
	}
	derive := func(edit func(c map[string]any)) []byte {
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		edit(c)
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	types := func(kinds ...string) []any {
		out := make([]any, 48)
		for i := range out {
			out[i] = kinds[i%len(kinds)]
		}
		return out
	}
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		want string
	}{
		{"an unknown layer kind", func(c map[string]any) {
			c["layer_types"] = types("linear_attention", "mamba", "linear_attention", "full_attention")
		}, `layer_types[1] = "mamba" is not a layer kind decodebench implements`},
		{"attention first in each stretch", func(c map[string]any) {
			c["layer_types"] = types("full_attention", "linear_attention", "linear_attention", "linear_attention")
		}, "layer 0 is full_attention"},
		{"no attention layer", func(c map[string]any) { c["layer_types"] = types("linear_attention") }, "no full_attention layer"},
		{"value heads not a multiple of key heads", func(c map[string]any) { c["linear_num_value_heads"] = 24.0; c["linear_num_key_heads"] = 16.0 },
			"ValueHeads = 24 is not a multiple of KeyHeads = 16"},
		{"an unknown state dtype", func(c map[string]any) { c["mamba_ssm_dtype"] = "float8" }, `mamba_ssm_dtype = "float8"`},
		{"linear-attention keys on another type", func(c map[string]any) { c["model_type"] = "qwen3_moe" }, "full_attention_interval = 4: linear-attention layers is not modelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHFConfig(derive(tc.edit), "derived.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one naming %q", err, tc.want)
			}
		})
	}
}

// TestPythonJSONNumbers: Infinity, -Infinity and NaN as Python's json writes them read as the
// numbers they mean, inside lists and objects, and never inside strings.
func TestPythonJSONNumbers(t *testing.T) {
	in := `{"time_step_limit": [0.0, Infinity], "low": -Infinity, "x": NaN, "name": "Infinity and NaN", "esc": "a\"NaN"}`
	var got map[string]any
	if err := json.Unmarshal(pythonJSON([]byte(in)), &got); err != nil {
		t.Fatal(err)
	}
	limit := got["time_step_limit"].([]any)
	if limit[1].(float64) != 1.7976931348623157e308 || got["low"].(float64) != -1.7976931348623157e308 || got["x"] != nil {
		t.Errorf("numbers read as %v, %v, %v", limit[1], got["low"], got["x"])
	}
	if got["name"] != "Infinity and NaN" || got["esc"] != `a"NaN` {
		t.Errorf("strings changed: %q, %q", got["name"], got["esc"])
	}
}

// TestMamba2HybridsCountedByHand: the Nemotron-H and Nemotron 3 configs of shared/models
// import, and their parameters, KV bytes per token and recurrent state per sequence equal a
// count made here from each config's numbers, block by block, as modeling_nemotron_h builds
// them: M a Mamba-2 mixer, * attention, - a relu^2 MLP, E a mixture of experts (with the
// experts' latent projections where moe_latent_size is set), each behind one RMSNorm.
func TestMamba2HybridsCountedByHand(t *testing.T) {
	for _, file := range []string{"nemotron-h-56b-base-8k.json", "nemotron-3-nano-30b-a3b-bf16.json", "nemotron-3-super-120b-a12b-fp8.json"} {
		t.Run(file, func(t *testing.T) {
			path := sharedModel(t, file)
			s, err := LoadHFConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			c := textConfig(t, path)
			n := func(key string) int64 {
				v, ok := c[key].(float64)
				if !ok {
					t.Fatalf("%s: %s missing", file, key)
				}
				return int64(v)
			}
			h := n("hidden_size")
			hd, ok := c["head_dim"].(float64)
			if !ok {
				hd = c["attention_head_dim"].(float64)
			}
			heads, kvHeads, headDim := n("num_attention_heads"), n("num_key_value_heads"), int64(hd)
			mh, mhd, groups, state, conv := n("mamba_num_heads"), n("mamba_head_dim"), n("n_groups"), n("ssm_state_size"), n("conv_kernel")
			inner := mh * mhd
			convDim := inner + 2*groups*state
			mamba := h*(inner+convDim+mh) + convDim*conv + convDim + 3*mh + inner + inner*h
			attn := h*(heads+2*kvHeads)*headDim + heads*headDim*h
			var mlp, moeTotal, moeActive int64
			if _, ok := c["intermediate_size"]; ok {
				mlp = 2 * h * n("intermediate_size") // up and down, not gated
			}
			if _, ok := c["n_routed_experts"]; ok {
				e, k, w := n("n_routed_experts"), n("num_experts_per_tok"), n("moe_intermediate_size")
				in := h
				common := h*e + e + 2*h*n("moe_shared_expert_intermediate_size") // router, correction bias, shared expert
				if latent, ok := c["moe_latent_size"].(float64); ok {
					in = int64(latent)
					common += 2 * h * in
				}
				moeTotal, moeActive = common+e*2*in*w, common+k*2*in*w
			}
			var total, active int64
			for _, block := range c["hybrid_override_pattern"].(string) {
				total += h // the block's norm
				active += h
				switch block {
				case 'M':
					total, active = total+mamba, active+mamba
				case '*':
					total, active = total+attn, active+attn
				case '-':
					total, active = total+mlp, active+mlp
				case 'E':
					total, active = total+moeTotal, active+moeActive
				}
			}
			embed := n("vocab_size") * h
			total, active = total+2*embed+h, active+2*embed+h
			if got := s.ParamsTotal(); got != total {
				t.Errorf("parameters %d, hand count %d", got, total)
			}
			if got := s.ParamsActive(); got != active {
				t.Errorf("active parameters %d, hand count %d", got, active)
			}
			pattern := c["hybrid_override_pattern"].(string)
			attnLayers, mambaLayers := int64(strings.Count(pattern, "*")), int64(strings.Count(pattern, "M"))
			if got, want := s.KVBytesPerToken(), float64(attnLayers*2*kvHeads*headDim*2); got != want {
				t.Errorf("KV bytes per token %g, hand count %g", got, want)
			}
			stateBytes := int64(2) // the weight dtype, bf16
			if c["mamba_ssm_cache_dtype"] == "float32" {
				stateBytes = 4
			}
			want := float64(mambaLayers * (mh*mhd*state*stateBytes + convDim*(conv-1)*2))
			if got := s.StateBytesPerSequence(); got != want {
				t.Errorf("state bytes per sequence %g, hand count %g", got, want)
			}
		})
	}
}

// TestDenseFamiliesBehindNewNames: the dense models that ship under newer type names (Devstral 2
// as ministral3, Qwen3-VL's text model, SmolLM3 with its layers without rotary) and Gemma 3 as
// transformers writes it (every field equal to Gemma3TextConfig's default omitted) import with
// the counts of their layers by hand: attention, gated MLP, two norms, QK-norm where the family
// has it, the embedding and an untied LM head.
func TestDenseFamiliesBehindNewNames(t *testing.T) {
	for _, tc := range []struct {
		file                    string
		family                  string
		heads, kvHeads, headDim int64
		qkNorm                  bool
		noRoPE                  int
		tied                    bool
	}{
		{"devstral-2-123b-instruct.json", "ministral3", 96, 8, 128, false, 0, false},
		{"devstral-small-2-24b-instruct.json", "ministral3", 32, 8, 128, false, 0, false},
		{"qwen3-vl-32b-instruct.json", "qwen3_vl_text", 64, 8, 128, true, 0, false},
		{"smollm3-3b.json", "smollm3", 16, 4, 128, false, 9, true},
		// Gemma3TextConfig's defaults: 8 query and 4 KV heads of 256.
		{"gemma-3-4b-it.json", "gemma3_text", 8, 4, 256, true, 0, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := sharedModel(t, tc.file)
			s, err := LoadHFConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.Family != tc.family || int64(s.QHeads) != tc.heads || int64(s.KVHeads) != tc.kvHeads || int64(s.HeadDim) != tc.headDim ||
				s.NoRoPELayers != tc.noRoPE || s.TiedEmbeddings != tc.tied {
				t.Fatalf("read as %s, %d/%d heads of %d, %d layers without rotary, tied %v", s.Family, s.QHeads, s.KVHeads, s.HeadDim, s.NoRoPELayers, s.TiedEmbeddings)
			}
			c := textConfig(t, path)
			n := func(key string) int64 { return int64(c[key].(float64)) }
			vocab := int64(262208) // Gemma3TextConfig's vocab_size, which gemma-3-4b-it omits
			if _, ok := c["vocab_size"]; ok {
				vocab = n("vocab_size")
			}
			h, layers, ffn := n("hidden_size"), n("num_hidden_layers"), n("intermediate_size")
			norms := int64(2)
			if tc.family == "gemma3_text" {
				norms = 4
			}
			layer := h*(tc.heads+2*tc.kvHeads)*tc.headDim + tc.heads*tc.headDim*h + 3*h*ffn + norms*h
			if tc.qkNorm {
				layer += 2 * tc.headDim
			}
			embeddings := int64(2)
			if tc.tied {
				embeddings = 1
			}
			if want := layers*layer + embeddings*vocab*h + h; s.ParamsTotal() != want {
				t.Errorf("parameters %d, hand count %d", s.ParamsTotal(), want)
			}
		})
	}
}

// TestMissingLayerKindsRefusedByName: a real config whose layers include a kind decodebench
// does not implement is refused naming that kind, whatever its model_type (wrapped in an
// unknown multimodal config too), and so is a supported type that carries such a key.
func TestMissingLayerKindsRefusedByName(t *testing.T) {
	for file, kind := range map[string]string{
		"deepseek-v4-flash.json":               "compressed attention",
		"deepseek-v4-pro.json":                 "compressed attention",
		"deepseek-v3.2.json":                   "DeepSeek sparse attention",
		"glm-5.json":                           "DeepSeek sparse attention",
		"minimax-m1.json":                      "lightning attention",
		"kimi-k3.json":                         "Kimi Delta Attention",
		"gemma-4-26b-a4b.json":                 "global layers with their own head dim",
		"mimo-v2-flash.json":                   "sliding-window layers with their own head counts",
		"llama-3.3-nemotron-super-49b-v1.json": "per-layer block configurations",
	} {
		_, err := LoadHFConfig(sharedModel(t, file))
		if err == nil || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), "a layer kind decodebench does not implement") {
			t.Errorf("%s: %v; want a refusal naming %q", file, err, kind)
		}
	}
	raw, err := os.ReadFile(sharedModel(t, "qwen3-8b.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["index_topk"] = 2048
	derived, _ := json.Marshal(c)
	if _, err := ParseHFConfig(derived, "qwen3-with-indexer.json"); err == nil || !strings.Contains(err.Error(), "index_topk = 2048") {
		t.Errorf("a qwen3 config with index_topk: %v; want it refused by name", err)
	}
}
