package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// Tiny Qwen3-MoE-, gpt-oss- and DeepSeek-like configs through the emulated sweep: the
// Qwen3-MoE steps need only the library's kernels (QK-norm is a small op) and the gpt-oss steps
// its MXFP4 linears and attention with sinks, so both are measured; the DeepSeek steps need MLA
// attention of another width, grouped linears and fp8 weights with block scales, which the
// library lacks, so that sweep, of which nothing can run, is refused before any device work
// (exit 2) with a reason naming each.
func TestSweepNewModelTypesOnTheEmulator(t *testing.T) {
	testtier.Slow(t, "a sweep per new model type")
	emu := cgotest.EmuPath(t)
	sweepHermetic(t, emu)
	configs := map[string]string{
		"qwen3_moe": `{"model_type": "qwen3_moe", "hidden_size": 128, "intermediate_size": 256, "moe_intermediate_size": 64,
			"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "num_experts": 4,
			"num_experts_per_tok": 2, "vocab_size": 512}`,
		"gpt_oss": `{"model_type": "gpt_oss", "hidden_size": 128, "intermediate_size": 64, "num_hidden_layers": 2,
			"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "num_local_experts": 4, "num_experts_per_tok": 2,
			"vocab_size": 512, "sliding_window": 32, "quantization_config": {"quant_method": "mxfp4",
			"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}`,
		"deepseek_v3": `{"model_type": "deepseek_v3", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
			"num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 512, "kv_lora_rank": 64, "qk_rope_head_dim": 32,
			"qk_nope_head_dim": 64, "v_head_dim": 64, "q_lora_rank": 64, "n_routed_experts": 4, "num_experts_per_tok": 2,
			"moe_intermediate_size": 64, "n_shared_experts": 1, "first_k_dense_replace": 1,
			"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`,
	}
	want := map[string][]string{
		"deepseek_v3": {"MLA attention (QK width 96, V width 64) (attention)", "grouped linear with fp8 (128x128 block scales) weights (q_absorb, v_absorb)"},
	}
	// DeepSeek-V3's dense projections run in their own format (fp8-block): not named missing.
	notMissing := map[string]string{"deepseek_v3": "weights (q_a_proj"}
	for name, config := range configs {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		out := "run-" + name
		args := []string{"sweep", "--backend", "emu", "--out", out, "--progress", "lines", "--model-config", path,
			"--batch", "1,2", "--context", "64",
			"--warmup", "1", "--min-samples", "3", "--min-time", "0s", "--max-time", "50ms", "--target-spread", "0.5", "--max-samples", "5",
			"--max-rotate-bytes", "1048576", "--gpu", "h200"}
		stdout, code, msg := runSweepCLI(t, args...)
		runs := name == "qwen3_moe" || name == "gpt_oss"
		if code != 0 && runs {
			t.Errorf("%s: exit %d: %s\n%s", name, code, msg, stdout)
			continue
		}
		if !runs {
			// Nothing of the sweep can run: refused before the probes (exit 2), naming why,
			// with no run directory left behind.
			if code != 2 {
				t.Errorf("%s: exit %d, want 2: %s", name, code, msg)
			}
			for _, w := range append([]string{"nothing in this sweep can run on the CPU emulator"}, want[name]...) {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: %q does not say %q", name, msg, w)
				}
			}
			if w := notMissing[name]; w != "" && strings.Contains(msg, w) {
				t.Errorf("%s: %q names a kernel the library has: %q", name, msg, w)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s: %s was left behind", name, out)
			}
			continue
		}
		records := readSweepRecords(t, out)
		if len(records) != 2 {
			t.Errorf("%s: %d records, want 2 (exit %d: %s)", name, len(records), code, msg)
			continue
		}
		for _, r := range records {
			if r.Status != measure.StatusOK || !r.Emulated {
				t.Errorf("%s: record %s %s: %s", name, r.Key, r.Status, r.Reason)
			}
		}
	}
}
