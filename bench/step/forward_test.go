//go:build forwardpass

// The engine against bench/ref's float64 forward pass, every step of every tiny family. It
// needs ref.NewForward (another branch): build with -tags forwardpass until that merges, then
// drop the tag.

package step

import (
	"fmt"
	"math"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestEngineMatchesForwardPass(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	shapes := append(Tiny(), TinyMoE(), TinySliding())
	for _, s := range shapes {
		for _, batch := range []int{1, 3} {
			c := Config{Model: s, Batch: batch, Context: 37, Steps: 4, Seed: 21}
			t.Run(fmt.Sprintf("%s/b%d", s.Name, batch), func(t *testing.T) {
				tr := trace(t, dev, c, Eager) // skips where the library lacks a kernel
				f, err := ref.NewForward(s, c.Seed, c.Batch, c.Context, c.Steps)
				if err != nil {
					t.Fatal(err)
				}
				V := s.Vocab
				for i := range tr.Tokens {
					want, bounds, err := f.Step(tr.Tokens[i])
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					got := LogitsOf(dtypeOf(s), tr.Logits[i])
					bad := 0
					for j := range got {
						if d := math.Abs(got[j] - want[j]); !(d <= bounds[j]) {
							if bad++; bad <= 5 {
								t.Errorf("step %d sequence %d logit %d: %g, reference %g (bound %g)", i, j/V, j%V, got[j], want[j], bounds[j])
							}
						}
					}
					// The greedy token agrees wherever the reference's top two differ by more
					// than their bounds.
					for b := 0; b < batch; b++ {
						row, rb := want[b*V:(b+1)*V], bounds[b*V:(b+1)*V]
						first, second := 0, -1
						for j := 1; j < V; j++ {
							switch {
							case row[j] > row[first]:
								first, second = j, first
							case second < 0 || row[j] > row[second]:
								second = j
							}
						}
						if row[first]-row[second] > rb[first]+rb[second] && int(tr.Next[i][b]) != first {
							t.Errorf("step %d sequence %d: the device chose %d, the reference %d by a margin past the bounds", i, b, tr.Next[i][b], first)
						}
					}
				}
			})
		}
	}
}
