package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// step --plan is a summary a configuration (Llama-3-8B: 293 calls a step in 14 lines, not
// 293); --out DIR writes every call in launch order to DIR/plan.txt.
func TestStepPlanIsConcise(t *testing.T) {
	testEnv(t, "")
	stdout, _, code, msg := runApp(t, "step", "--model", "llama3-8b", "--batch", "1,16", "--plan")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if lines := strings.Count(stdout, "\n"); lines > 2*20 {
		t.Errorf("--plan printed %d lines for 2 configurations, want a summary of each:\n%s", lines, stdout)
	}
	for _, want := range []string{"32 x layers 0-31 qkv_proj (linear) [16 x 4096] . [6144 x 4096]^T", "1 x step lm_head (linear)", "--out DIR"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--plan lacks %q:\n%s", want, stdout)
		}
	}
	dir := filepath.Join(t.TempDir(), "plan")
	stdout, _, code, msg = runApp(t, "step", "--model", "llama3-8b", "--batch", "1,16", "--plan", "--out", dir)
	if code != 0 {
		t.Fatalf("--out: exit %d: %s", code, msg)
	}
	full, err := os.ReadFile(filepath.Join(dir, PlanFile))
	if err != nil || !strings.Contains(stdout, filepath.Join(dir, PlanFile)) {
		t.Fatalf("--plan --out: %v; stdout names no %s:\n%s", err, PlanFile, stdout)
	}
	for _, want := range []string{"  292 step advance (add_i32)", "layer 31 down_proj (linear) [16 x 14336] . [4096 x 14336]^T"} {
		if !strings.Contains(string(full), want) {
			t.Errorf("%s lacks %q", PlanFile, want)
		}
	}
}

func TestLayersText(t *testing.T) {
	for _, tc := range []struct {
		layers []int
		want   string
	}{
		{[]int{-1}, "step"}, {[]int{3}, "layer 3"}, {[]int{0, 1, 2}, "layers 0-2"}, {[]int{0, 1, 2, 5, 6, 9}, "layers 0-2, 5-6, 9"},
		{[]int{0, 2, 4, 6, 8}, "5 layers, 0 to 8"},
	} {
		if got := layersText(tc.layers); got != tc.want {
			t.Errorf("layersText(%v) = %q, want %q", tc.layers, got, tc.want)
		}
	}
}
