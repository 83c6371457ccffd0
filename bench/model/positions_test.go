package model

import (
	"path/filepath"
	"testing"
)

// TestMaxPositions: config.json's max_position_embeddings is read; a config without it leaves
// 0 (unknown, nothing refused).
func TestMaxPositions(t *testing.T) {
	for file, want := range map[string]int{"Meta-Llama-3-8B.json": 8192, "Mistral-7B-v0.1.json": 32768} {
		s, err := LoadHFConfig(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if s.MaxPositions != want {
			t.Errorf("%s: MaxPositions %d, want %d", file, s.MaxPositions, want)
		}
	}
	s, err := ParseHFConfig([]byte(`{"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 100}`), "inline")
	if err != nil || s.MaxPositions != 0 {
		t.Errorf("no max_position_embeddings: %d, %v", s.MaxPositions, err)
	}
	if _, err := ParseHFConfig([]byte(`{"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 100, "max_position_embeddings": -1}`), "inline"); err == nil {
		t.Error("max_position_embeddings -1: accepted")
	}
}
