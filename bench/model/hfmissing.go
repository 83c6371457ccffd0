package model

import (
	"bytes"
	"encoding/json"
)

// missingLayerKinds are the config keys that belong to a layer kind decodebench does not
// implement, with that kind: a config that carries one is refused naming the kind, under any
// model_type, before anything is counted (it would otherwise be counted as full attention).
var missingLayerKinds = []struct{ key, kind string }{
	{"compress_ratios", "compressed attention over a compressed KV cache (DeepSeek-V4)"},
	{"index_topk", "DeepSeek sparse attention (a lightning indexer choosing index_topk tokens: DeepSeek-V3.2, GLM-5)"},
	{"num_hash_layers", "hash-routed expert layers (DeepSeek-V4)"},
	{"attn_type_list", "lightning attention (MiniMax-M1's linear-attention layers)"},
	{"linear_attn_config", "Kimi Delta Attention (KDA, Kimi Linear's linear-attention layers)"},
	{"block_configs", "per-layer block configurations (Nemotron-NAS: layers without attention or with their own widths)"},
	{"swa_num_attention_heads", "sliding-window layers with their own head counts (MiMo-V2-Flash)"},
	{"num_global_key_value_heads", "global layers with their own head dim and KV heads (Gemma 4)"},
}

// refuseMissingLayerKind names the first layer kind of missingLayerKinds that the config asks
// for, nil when it asks for none.
func (c hfConfig) refuseMissingLayerKind(modelType string) error {
	// A multimodal wrapper decodebench does not know may hold such a language model too.
	if _, known := hfWrappers[modelType]; !known && c.has("text_config") {
		if text, err := c.sub("text_config", modelType); err == nil {
			textType, _ := text.str("model_type", modelType)
			if err := text.refuseMissingLayerKind(textType); err != nil {
				return err
			}
		}
	}
	for _, m := range missingLayerKinds {
		if c.has(m.key) && string(bytes.TrimSpace(c.fields[m.key])) != "null" {
			return c.errorf("%s = %s: model_type %q has %s, a layer kind decodebench does not implement yet; it refuses the model rather than count it as full attention",
				m.key, clip(bytes.TrimSpace(c.fields[m.key])), modelType, m.kind)
		}
	}
	return nil
}

// clip shortens a JSON value for an error line.
func clip(v []byte) string {
	var compact bytes.Buffer
	if json.Compact(&compact, v) == nil {
		v = compact.Bytes()
	}
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}
