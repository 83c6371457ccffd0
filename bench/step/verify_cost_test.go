package step

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
)

// TestVerifyReferenceCost measures the float64 forward pass of the check of real presets
// (VerifyConfig at batch 8, context 1024): wall and CPU seconds to fill and to run its steps,
// the numbers README's "Whole decode steps" gives. Minutes on a small machine: it runs only
// when DECODEBENCH_VERIFY_COST names the presets (e.g. Llama-3-8B,Llama-3-70B).
func TestVerifyReferenceCost(t *testing.T) {
	names := os.Getenv("DECODEBENCH_VERIFY_COST")
	if names == "" {
		t.Skip("set DECODEBENCH_VERIFY_COST=Llama-3-8B,Llama-3-70B to measure the check's forward pass on real shapes")
	}
	for _, name := range strings.Split(names, ",") {
		s, err := model.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		s.Quant, s.WeightDType, s.KVDType = nil, model.BF16, model.BF16
		c := Config{Model: s, Batch: 8, Context: 1024, Steps: 32, Seed: 1}
		vc, seqs := VerifyConfig(c)
		cpu := func() float64 {
			var ru syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)*1e-6
		}
		c0 := cpu()
		t0 := time.Now()
		f, err := ref.NewForward(vc.Model, 1, seqs, vc.Context, vc.Steps, ref.BF16)
		if err != nil {
			t.Fatal(err)
		}
		fill, fillCPU := time.Since(t0), cpu()-c0
		tok := ref.FirstTokens(1, seqs, s.Vocab)
		for i := 0; i < vc.Steps; i++ {
			l, _, err := f.Step(tok)
			if err != nil {
				t.Fatal(err)
			}
			tok = ref.Greedy(l, s.Vocab)
		}
		t.Logf("%s: %d of %d layers, %d sequences, context %d, %d steps: fill %.1f s (%.1f CPU s), total %.1f s (%.1f CPU s)", name, vc.Model.Layers, s.Layers, seqs, vc.Context, vc.Steps, fill.Seconds(), fillCPU, time.Since(t0).Seconds(), cpu()-c0)
	}
}
