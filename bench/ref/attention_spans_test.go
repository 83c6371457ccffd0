package ref

import (
	"math"
	"testing"
)

// The span starts of db_attention_params' header comment, at the boundaries.
func TestSpanStart(t *testing.T) {
	for _, c := range []struct {
		window, chunk, context, want int
	}{
		{0, 0, 100, 0}, {1, 0, 100, 99}, {100, 0, 100, 0}, {101, 0, 100, 0}, {13, 0, 50, 37},
		{0, 32, 1, 0}, {0, 32, 32, 0}, {0, 32, 33, 32}, {0, 32, 64, 32}, {0, 32, 65, 64}, {0, 48, 97, 96},
	} {
		s := AttentionShape{Window: c.window, Chunk: c.chunk}
		if got := s.SpanStart(c.context); got != c.want {
			t.Errorf("window %d chunk %d context %d: span starts at %d, want %d", c.window, c.chunk, c.context, got, c.want)
		}
	}
	s := AttentionShape{Batch: 3, QHeads: 1, KVHeads: 1, HeadDim: 64, Context: []int{10, 300, 65}, Chunk: 64}
	if got := s.MaxSpan(); got != 44 {
		t.Errorf("max span %d, want 44 (300 - 256)", got)
	}
	for _, bad := range []AttentionShape{{Window: -1}, {Chunk: -1}, {Window: 4, Chunk: 8}} {
		bad.Batch, bad.QHeads, bad.KVHeads, bad.HeadDim, bad.Context = 1, 1, 1, 64, []int{4}
		if bad.WithDefaults().Validate() == nil {
			t.Errorf("window %d chunk %d accepted", bad.Window, bad.Chunk)
		}
	}
}

// A window's reference is the whole-context reference of a cache that holds only the window's
// tokens; a chunk's, of the chunk's tokens. Paged, with the pages before the span left out of
// the page table (-1): they are never read.
func TestAttentionSpanIsTheCutContext(t *testing.T) {
	for _, span := range []AttentionShape{{Window: 21}, {Chunk: 16}} {
		s := AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{70, 9}, Layout: KVPaged, PageSize: 16,
			Window: span.Window, Chunk: span.Chunk}.WithDefaults()
		table := s.ShuffledPageTable(3)
		q := Fill(BF16, 1, 1, s.QElements())
		k, v := logicalCaches(s, table, hashed(4))
		for b, n := range s.Context {
			for p := 0; p < s.SpanStart(n)/s.PageSize; p++ {
				table[b*s.PagesPerSeq+p] = -1
			}
		}
		got, err := Attention(s, table, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		for b, n := range s.Context {
			start := s.SpanStart(n)
			cut := AttentionShape{Batch: 1, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{n - start}}.WithDefaults()
			ck, cv := logicalCaches(cut, nil, func(_, h, t, i int) float32 { return hashed(4)(b, h, start+t, i) })
			want, err := Attention(cut, nil, q[b*4*64:][:4*64], ck, cv)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(got.Want[b*4*64:][:4*64], want.Want); d != 0 {
				t.Errorf("window %d chunk %d, sequence %d: off the cut context's reference by %g", s.Window, s.Chunk, b, d)
			}
			if got.Context[b] != n-start {
				t.Errorf("sequence %d: %d tokens summed, want the span's %d", b, got.Context[b], n-start)
			}
		}
	}
}

// A sink is a token of logit sink and value zero: with one token of score s, the output is
// v e^s / (e^s + e^sink), and a sink far below every score changes nothing.
func TestAttentionSinks(t *testing.T) {
	s := AttentionShape{Batch: 1, QHeads: 2, KVHeads: 1, HeadDim: 64, Context: []int{1}, Scale: 0.5}.WithDefaults()
	q := make([]float32, 2*64)
	q[0], q[64] = 1, 2
	k, v := logicalCaches(s, nil, func(_, _, _, i int) float32 {
		switch i {
		case 0:
			return 3 // scores 1.5 and 3
		case 1000:
			return 8
		}
		return 0
	})
	sinks := []float64{1.5, -2}
	got, err := AttentionWithSinks(s, nil, q, k, v, sinks)
	if err != nil {
		t.Fatal(err)
	}
	for g, score := range []float64{1.5, 3} {
		want := 8 * math.Exp(score) / (math.Exp(score) + math.Exp(sinks[g]))
		if math.Abs(got.Want[g*64]-want) > 1e-12 || got.Want[g*64+1] != 0 {
			t.Errorf("head %d: out[0:2] = %v, want [%v 0]", g, got.Want[g*64:g*64+2], want)
		}
	}
	if got.ScoreAbs[0] != 1.5 || got.ScoreAbs[1] != 3 {
		t.Errorf("ScoreAbs %v: want the larger of each score and its sink's magnitude", got.ScoreAbs)
	}
	none, _ := Attention(s, nil, q, k, v)
	low, _ := AttentionWithSinks(s, nil, q, k, v, []float64{-1e4, -1e4})
	if d := maxAbsDiff(none.Want, low.Want); d != 0 {
		t.Errorf("a sink of -1e4 moved the output by %g", d)
	}
	high, _ := AttentionWithSinks(s, nil, q, k, v, []float64{1e4, 1e4})
	for i, x := range high.Want {
		if x != 0 {
			t.Fatalf("a sink of 1e4: out[%d] = %g, want 0", i, x)
		}
	}
	if _, err := AttentionWithSinks(s, nil, q, k, v, []float64{1}); err == nil {
		t.Error("one sink for two query heads accepted")
	}
}
