package ref

import (
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
)

// The MLA reference against a direct sum written out here: scores over all 576 elements of a
// row, values its first 512, each head its own softmax; a paged, ragged batch.
func TestMLAMatchesADirectSum(t *testing.T) {
	s := MLAShape{Batch: 2, QHeads: 3, Context: []int{5, 17}, Layout: KVPaged, PageSize: 16, Scale: 0.07}.WithDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	table := s.ShuffledPageTable(3)
	q := Fill(BF16, 1, 1, s.QElements())
	cache := Fill(BF16, 2, 1, s.CacheElements())
	got, err := MLA(s, table, q, cache)
	if err != nil {
		t.Fatal(err)
	}
	d, v := cgo.MLAQKDim, cgo.MLAVDim
	if len(got.Want) != s.OutElements() {
		t.Fatalf("%d outputs, want %d", len(got.Want), s.OutElements())
	}
	for b := range s.Batch {
		for h := range s.QHeads {
			qh := q[(b*s.QHeads+h)*d:][:d]
			n := s.Context[b]
			w := make([]float64, n)
			m, sum := math.Inf(-1), 0.0
			for tok := range n {
				row := cache[s.RowOffset(table, b, tok):][:d]
				for i := range d {
					w[tok] += float64(qh[i]) * float64(row[i])
				}
				w[tok] *= s.Scale
				m = math.Max(m, w[tok])
			}
			for tok := range n {
				w[tok] = math.Exp(w[tok] - m)
				sum += w[tok]
			}
			for i := range v {
				want := 0.0
				for tok := range n {
					want += w[tok] / sum * float64(cache[s.RowOffset(table, b, tok)+i])
				}
				if g := got.Want[(b*s.QHeads+h)*v+i]; math.Abs(g-want) > 1e-12 {
					t.Fatalf("sequence %d head %d dim %d: %g, want %g", b, h, i, g, want)
				}
			}
		}
	}
	bounds := got.ElementBounds(BF16, 2)
	if len(bounds) != len(got.Want) {
		t.Fatalf("%d bounds for %d outputs", len(bounds), len(got.Want))
	}
	for i, b := range bounds {
		if !(b > 0) || b > 0.05 {
			t.Fatalf("bound %d = %g: want a small positive number", i, b)
		}
	}
}

func TestMLAShapeValidate(t *testing.T) {
	for _, tc := range []struct {
		s    MLAShape
		text string
	}{
		{MLAShape{Batch: 1, QHeads: 16, Context: []int{4}}, "scale 0 must be finite and > 0"},
		{MLAShape{Batch: 1, QHeads: 129, Context: []int{4}, Scale: 1}, "q_heads 129 out of range 1..128"},
		{MLAShape{Batch: 2, QHeads: 16, Context: []int{4}, Scale: 1}, "1 context lengths for a batch of 2"},
		{MLAShape{Batch: 1, QHeads: 16, Context: []int{4}, Layout: KVPaged, PageSize: 12, Scale: 1}, "page size 12"},
		{MLAShape{Batch: 1, QHeads: 16, Context: []int{40}, Capacity: 30, Scale: 1}, "capacity 30 is less than the longest context 40"},
	} {
		if err := tc.s.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%+v: %v, want an error naming %q", tc.s, err, tc.text)
		}
	}
}
