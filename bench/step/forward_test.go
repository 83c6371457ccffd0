// The engine against bench/ref's float64 forward pass: every step of every tiny model, every
// logit inside the reference's bound, the greedy token the reference's wherever its choice is
// decided past the bounds.

package step

import (
	"fmt"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
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
			var v Verification
			ok, err := newChecker(c, dtypeOf(s), c.Batch, &v).check(tr)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("the engine disagrees with the forward pass: %s", v.Reason)
			}
			if v.Logits == 0 {
				t.Fatalf("no logit was checked: the reference lost every sequence")
			}
			t.Logf("%d logits inside their bounds (max error %.3g, %.0f%% of its bound at most), %d of %d greedy choices decided and equal",
				v.Logits, v.MaxError, 100*v.MaxBoundShare, v.Greedy, len(tr.Tokens)*c.Batch)
		})
	}
}
