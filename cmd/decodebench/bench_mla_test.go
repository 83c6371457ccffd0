package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo/cgotest"
)

// bench linear --model of a bf16 MLA model measures its absorbed per-head projections on the
// grouped linear (records of kernel linear_grouped, verified first), beside its linears.
func TestBenchLinearMeasuresMLAAbsorbed(t *testing.T) {
	benchEnv(t, cgotest.EmuPath(t))
	config := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"model_type": "deepseek_v3", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
	  "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 200, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
	  "qk_nope_head_dim": 32, "v_head_dim": 32, "q_lora_rank": 64, "n_routed_experts": 4, "num_experts_per_tok": 2,
	  "moe_intermediate_size": 64, "n_shared_experts": 1, "first_k_dense_replace": 1}`
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.jsonl")
	stdout, stderr, code, msg := runBench(t, append([]string{"bench", "linear", "--backend", "emu", "--model-config", config,
		"--batch", "3", "--read-ceiling-gbps", "1", "--out", out}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s\n%s", code, msg, stdout, stderr)
	}
	grouped := map[string]bool{}
	for _, r := range readRecords(t, readFile(t, out)) {
		name, _ := r["kernel"].(string)
		if name != "q_absorb" && name != "v_absorb" {
			continue
		}
		checkRecord(t, r, "linear")
		if r["groups"] != 2.0 {
			t.Errorf("%s: groups %v, want the model's 2 heads", name, r["groups"])
		}
		grouped[name] = true
	}
	if !grouped["q_absorb"] || !grouped["v_absorb"] {
		t.Errorf("records for q_absorb and v_absorb: %v\n%s", grouped, stdout)
	}
	if strings.Contains(stdout, "no kernel yet") {
		t.Errorf("a bf16 MLA model's linears are named missing:\n%s", stdout)
	}
}
