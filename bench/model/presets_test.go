package model

import (
	"math"
	"strings"
	"testing"
)

// Presets without a published count to check, and why.
var unpublished = map[string]string{
	"Qwen2.5-14B":   "model card says 14.7B; its config.json holds 14.77B",
	"Qwen2.5-32B":   "model card says 32.5B; its config.json holds 32.76B",
	"Llama-4-Scout": "Meta's 109B counts the vision tower, which the text model leaves out: checked with a hand count of the tower in TestLlama4ScoutTotalWithVisionTower; its 17B active in TestPublishedCountsByConvention",
	"Gemma-3-27B":   "the technical report's 27B counts the vision tower; its 25.6B besides embeddings is checked in TestPublishedCountsByConvention",
	"Kimi-K2":       "published only as 1T in all and 32B activated: checked to those figures' precision in TestPublishedCountsByConvention",
}

func TestPresetsMatchPublishedCounts(t *testing.T) {
	for _, s := range Presets() {
		if err := s.Validate(); err != nil {
			t.Errorf("preset %s: %v", s.Name, err)
			continue
		}
		if s.Source != "preset" || s.TP != 1 || s.WeightDType != BF16 || s.KVDType != BF16 {
			t.Errorf("preset %s: Source %q, TP %d, dtypes %s/%s; want preset, 1, bf16/bf16", s.Name, s.Source, s.TP, s.WeightDType, s.KVDType)
		}
		if s.PublishedParams == 0 {
			if unpublished[s.Name] == "" {
				t.Errorf("preset %s has no published parameter count to check", s.Name)
			}
			continue
		}
		got := float64(s.ParamsTotal())
		if off := math.Abs(got/s.PublishedParams - 1); off > 0.005 {
			t.Errorf("preset %s: %.4g parameters, published %.4g (%.2f%% off)", s.Name, got, s.PublishedParams, 100*off)
		}
	}
}

func TestPublishedActiveCounts(t *testing.T) {
	for name, published := range map[string]float64{"Mixtral-8x7B": 12.9e9, "Mixtral-8x22B": 39e9} {
		s := mustLookup(t, name)
		if got := float64(s.ParamsActive()); math.Abs(got/published-1) > 0.005 {
			t.Errorf("%s: %.4g active parameters, published %.4g", name, got, published)
		}
	}
}

func TestPresetNamesAreUnambiguous(t *testing.T) {
	owner := map[string]string{}
	for _, p := range presets {
		for _, k := range presetKeys(p.shape.Name, p.aliases) {
			if other, ok := owner[k]; ok && other != p.shape.Name {
				t.Errorf("lookup key %q names both %s and %s", k, other, p.shape.Name)
			}
			owner[k] = p.shape.Name
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct{ in, want string }{
		{"llama3-8b", "Llama-3-8B"},
		{"Llama-3-8B", "Llama-3-8B"},
		{"meta-llama/Meta-Llama-3-8B", "Llama-3-8B"},
		{"meta-llama/Meta-Llama-3-8B-Instruct", "Llama-3-8B"},
		{"LLAMA_3_70B", "Llama-3-70B"},
		{"llama 3.1 8b", "Llama-3.1-8B"},
		{"meta-llama/Llama-3.3-70B-Instruct", "Llama-3.1-70B"},
		{"meta-llama/Llama-2-7b-chat-hf", "Llama-2-7B"},
		{"mistralai/Mistral-7B-Instruct-v0.2", "Mistral-7B"},
		{"mistral-7b-v0.3", "Mistral-7B-v0.3"},
		{"mistralai/Mistral-Nemo-Base-2407", "Mistral-Nemo-12B"},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"},
		{"Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B"},
		{"qwen2.5_72b", "Qwen2.5-72B"},
		{"google/gemma-2-9b-it", "Gemma-2-9B"},
		{"gemma-7b", "Gemma-7B"},
		{"microsoft/Phi-3-mini-4k-instruct", "Phi-3-mini"},
		{"phi3.5-mini", "Phi-3-mini-128k"},
	}
	for _, tc := range tests {
		s, err := Lookup(tc.in)
		if err != nil || s.Name != tc.want {
			t.Errorf("Lookup(%q) = %q, %v; want %s", tc.in, s.Name, err, tc.want)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"llama-3-9b", []string{`"llama-3-9b"`, "Llama-3-8B", "decodebench model list"}},
		{"mixtral-8x8b", []string{"Mixtral-8x7B"}},
		{"gemma2-7b", []string{"Gemma-7B", "Gemma-2-2B"}},
		{"", []string{"decodebench model list"}},
	}
	for _, tc := range tests {
		_, err := Lookup(tc.in)
		if err == nil {
			t.Errorf("Lookup(%q) succeeded", tc.in)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Lookup(%q) error %q does not mention %s", tc.in, err, w)
			}
		}
	}
}
