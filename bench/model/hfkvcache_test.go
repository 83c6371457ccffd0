package model

import (
	"os"
	"strings"
	"testing"
)

// A compressed-tensors checkpoint's kv_cache_scheme sets an fp8 cache with its scales: per
// tensor, or per KV head ("attn_head", vLLM's per-attention-head quantization); anything else
// is refused naming what is known. The scales are static: no bytes per token.
func TestHFConfigKVCacheScheme(t *testing.T) {
	base, err := os.ReadFile("testdata/Meta-Llama-3-8B.json")
	if err != nil {
		t.Fatal(err)
	}
	with := func(q string) []byte {
		return []byte(strings.Replace(string(base), "{", `{"quantization_config": `+q+`,`, 1))
	}
	plain, err := ParseHFConfig(base, "base.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q      string
		scales string
	}{
		{`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false, "symmetric": true}}`, KVScalesTensor},
		{`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "attn_head", "dynamic": false, "symmetric": true}}`, KVScalesHead},
	} {
		s, err := ParseHFConfig(with(tc.q), "kv.json")
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if s.KVDType != FP8 || s.KVScales != tc.scales {
			t.Errorf("%s: KV %s scales %q, want fp8 %q", tc.q, s.KVDType, s.KVScales, tc.scales)
		}
		if got, want := s.KVBytesPerToken(), plain.KVBytesPerToken()/2; got != want {
			t.Errorf("%s: %g KV bytes a token, want %g (one byte an element, static scales)", tc.q, got, want)
		}
	}
	for _, tc := range []struct{ q, want string }{
		{`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "channel"}}`, `strategy "channel"`},
		{`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "int"}}`, `type "int" with 8 bits`},
	} {
		if _, err := ParseHFConfig(with(tc.q), "kv.json"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.q, err, tc.want)
		}
	}
	if s, err := ParseHFConfig(with(`{"quant_method": "fbgemm_fp8", "kv_cache_scheme": null}`), "kv.json"); err != nil || s.KVScales != "" || s.KVDType != plain.KVDType {
		t.Errorf("a null kv_cache_scheme: %v, KV %s %q", err, s.KVDType, s.KVScales)
	}
}
