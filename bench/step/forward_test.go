// The engine against bench/ref's float64 forward pass: every step of every tiny model, every
// logit inside the reference's bound, the greedy token the reference's wherever its choice is
// decided past the bounds.

package step

import (
	"fmt"
	"math"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestEngineMatchesForwardPass(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	type tiny struct {
		s                     model.Shape
		batch, context, steps int
	}
	var models []tiny
	for _, m := range ref.TinyModels() {
		models = append(models, tiny{m.Shape, m.Batch, m.Context, m.Steps})
	}
	for _, s := range append(Tiny(), TinyMoE(), TinySliding()) {
		models = append(models, tiny{s, 3, 37, 4})
	}
	for _, m := range models {
		s := m.s
		c := Config{Model: s, Batch: m.batch, Context: m.context, Steps: m.steps, Seed: 21}
		t.Run(fmt.Sprintf("%s/b%d", s.Name, c.Batch), func(t *testing.T) {
			if _, err := ref.ArchOf(s); err != nil {
				t.Skipf("the reference refuses it: %v", err)
			}
			tr := trace(t, dev, c, Eager) // skips where the library lacks a kernel
			rd := ref.BF16
			if dtypeOf(s) == cgo.DTypeFP16 {
				rd = ref.FP16
			}
			f, err := ref.NewForward(s, c.Seed, c.Batch, c.Context, c.Steps, rd)
			if err != nil {
				t.Fatal(err)
			}
			V := s.Vocab
			checked, decided := 0, 0
			for i := range tr.Tokens {
				var want, bounds []float64
				var err error
				if i < len(tr.Routes) {
					want, bounds, err = f.StepRouted(tr.Tokens[i], tr.Routes[i])
				} else {
					want, bounds, err = f.Step(tr.Tokens[i])
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				got := LogitsOf(dtypeOf(s), tr.Logits[i])
				bad := 0
				for j := range got {
					if math.IsInf(bounds[j], 1) {
						continue // a routing decision too close to call: the reference lost the sequence
					}
					checked++
					if d := math.Abs(got[j] - want[j]); !(d <= bounds[j]) {
						if bad++; bad <= 5 {
							t.Errorf("step %d sequence %d logit %d: %g, reference %g (bound %g)", i, j/V, j%V, got[j], want[j], bounds[j])
						}
					}
				}
				greedy := ref.Greedy(want, V)
				for b, ok := range ref.Decided(want, bounds, V) {
					if !ok {
						continue
					}
					decided++
					if tr.Next[i][b] != greedy[b] {
						t.Errorf("step %d sequence %d: the device chose %d, the reference %d by a margin past the bounds", i, b, tr.Next[i][b], greedy[b])
					}
				}
			}
			if checked == 0 {
				t.Fatalf("no logit was checked: the reference lost every sequence")
			}
			t.Logf("%d logits inside their bounds, %d of %d greedy choices decided and equal", checked, decided, len(tr.Tokens)*c.Batch)
		})
	}
}
