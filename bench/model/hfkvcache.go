package model

import "strings"

// kvCacheScheme reads quantization_config.kv_cache_scheme, the fp8 KV cache of a
// compressed-tensors checkpoint (llm-compressor): {"type": "float", "num_bits": 8, "strategy":
// "tensor" | "attn_head", ...}. It gives the cache's dtype and its scales (KVScalesTensor: one
// k_scale and v_scale a layer; KVScalesHead: one a KV head, vLLM's per-attention-head
// quantization), or ok false without a scheme. Both are static scales, calibrated once: they add
// no bytes per token.
func (c hfConfig) kvCacheScheme() (dtype DType, scales string, ok bool, err error) {
	if !c.has("quantization_config") {
		return "", "", false, nil
	}
	q, err := c.sub("quantization_config", c.typeName())
	if err != nil {
		return "", "", false, err
	}
	if !q.has("kv_cache_scheme") || string(q.fields["kv_cache_scheme"]) == "null" {
		return "", "", false, nil
	}
	kv, err := q.sub("kv_cache_scheme", "quantization_config")
	if err != nil {
		return "", "", false, err
	}
	kind, err := kv.str("type", "float")
	if err != nil {
		return "", "", false, err
	}
	bits, err := kv.positiveInt("num_bits", 8, false)
	if err != nil {
		return "", "", false, err
	}
	if kind != "float" || bits != 8 {
		return "", "", false, c.errorf("quantization_config.kv_cache_scheme: type %q with %d bits: the KV caches known are fp8 (type \"float\", num_bits 8)", kind, bits)
	}
	strategy, err := kv.str("strategy", "tensor")
	if err != nil {
		return "", "", false, err
	}
	switch strategy {
	case "tensor":
		return FP8, KVScalesTensor, true, nil
	case "attn_head":
		return FP8, KVScalesHead, true, nil
	}
	return "", "", false, c.errorf("quantization_config.kv_cache_scheme: strategy %q: the fp8 KV scales known are \"tensor\" (one a layer) and \"attn_head\" (one a KV head)", strategy)
}

// kvCacheOnly reports a compressed-tensors quantization_config that quantizes the KV cache
// alone (a kv_cache_scheme and no config_groups of weights): the projections stay WeightDType.
func (c hfConfig) kvCacheOnly() bool {
	if !c.has("quantization_config") {
		return false
	}
	q, err := c.sub("quantization_config", c.typeName())
	if err != nil {
		return false
	}
	method, _ := q.str("quant_method", "")
	groups := strings.TrimSpace(string(q.fields["config_groups"]))
	return method == "compressed-tensors" && q.has("kv_cache_scheme") && (groups == "" || groups == "null" || groups == "{}")
}

// The scale layouts of an fp8 KV cache (Shape.KVScales).
const (
	KVScalesTensor = "tensor"
	KVScalesHead   = "head"
)
