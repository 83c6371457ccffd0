package model

import (
	"path/filepath"
	"strings"
	"testing"
)

// Each family's routing as its config.json states it.
func TestRoutingFromConfigs(t *testing.T) {
	for _, tc := range []struct {
		file           string
		scoring        string
		groups, kept   int
		raw            bool
		scaling, limit float64
	}{
		{"DeepSeek-V3.json", "sigmoid", 8, 4, false, 2.5, 0},
		{"Kimi-K2-Instruct.json", "sigmoid", 0, 0, false, 2.827, 0}, // n_group 1: no limit
		{"GLM-4.5-Air.json", "sigmoid", 0, 0, false, 1, 0},
		{"Qwen3-30B-A3B.json", "", 0, 0, false, 0, 0}, // norm_topk_prob true
		{"Llama-4-Scout-17B-16E-Instruct.json", "sigmoid", 0, 0, true, 0, 0},
		{"gpt-oss-20b.json", "", 0, 0, false, 0, 7},
		{"Mixtral-8x7B-v0.1.json", "", 0, 0, false, 0, 0},
	} {
		s, err := LoadHFConfig(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if s.RouterScoring != tc.scoring || s.ExpertGroups != tc.groups || s.GroupsKept != tc.kept || s.RawTopKWeights != tc.raw ||
			s.RoutedScaling != tc.scaling || s.SwiGLULimit != tc.limit {
			t.Errorf("%s: scoring %q groups %d kept %d raw %v scaling %g limit %g, want %+v", tc.file, s.RouterScoring, s.ExpertGroups,
				s.GroupsKept, s.RawTopKWeights, s.RoutedScaling, s.SwiGLULimit, tc)
		}
	}
}

func TestRoutingConfigErrors(t *testing.T) {
	ds := `{"model_type": "deepseek_v3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
		"num_attention_heads": 8, "kv_lora_rank": 64, "q_lora_rank": 0, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
		"v_head_dim": 32, "vocab_size": 1000, "n_routed_experts": 16, "n_shared_experts": 1, "num_experts_per_tok": 4,
		"moe_intermediate_size": 128, "first_k_dense_replace": 1%s}`
	with := func(extra string) string { return strings.Replace(ds, "%s", extra, 1) }
	s, err := ParseHFConfig([]byte(with(`, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 1.5, "norm_topk_prob": false`)), "ds.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.ExpertGroups != 4 || s.GroupsKept != 2 || s.RoutedScaling != 1.5 || !s.RawTopKWeights || s.RouterScoring != "sigmoid" {
		t.Errorf("small DeepSeek routing: %+v", s)
	}
	for _, tc := range []struct{ desc, json, want string }{
		{"softmax scoring", with(`, "scoring_func": "softmax"`), `scoring_func = "softmax"`},
		{"greedy top k", with(`, "topk_method": "greedy"`), `topk_method = "greedy"`},
		{"groups that do not divide", with(`, "n_group": 3, "topk_group": 1`), "ExpertGroups = 3"},
		{"too few kept", with(`, "n_group": 8, "topk_group": 1`), "GroupsKept = 1"}, // 2 experts kept, top 4
		{"more kept than groups", with(`, "n_group": 4, "topk_group": 5`), "GroupsKept = 5"},
		{"negative scaling", with(`, "routed_scaling_factor": -1`), "routed_scaling_factor = -1"},
		{"scaling not a number", with(`, "routed_scaling_factor": "big"`), `routed_scaling_factor = "big"`},
	} {
		if _, err := ParseHFConfig([]byte(tc.json), "ds.json"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.desc, err, tc.want)
		}
	}
	gptOSS := `{"model_type": "gpt_oss", "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "num_local_experts": 8,
		"num_experts_per_tok": 2, "swiglu_limit": 0}`
	if _, err := ParseHFConfig([]byte(gptOSS), "oss.json"); err == nil || !strings.Contains(err.Error(), "swiglu_limit = 0") {
		t.Errorf("swiglu_limit 0: %v", err)
	}
	bad := mustLookup(t, "DeepSeek-V3")
	bad.RouterScoring = "relu"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `RouterScoring = "relu"`) {
		t.Errorf("RouterScoring relu: %v", err)
	}
}
