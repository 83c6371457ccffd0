package measure

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
)

func TestCopiesFor(t *testing.T) {
	const mb, l2 = 1e6, 60e6
	cases := []struct {
		desc                string
		bytes, factor, cap_ float64
		want                int
	}{
		{"a copy far above 4x L2 needs no rotation", 1000 * mb, 4, 1e12, 1},
		{"exactly 4x L2 in one copy", 240 * mb, 4, 1e12, 1},
		{"just under: two copies", 239 * mb, 4, 1e12, 2},
		{"50 MB qkv weights: 5 copies reach 250 MB", 50 * mb, 4, 1e12, 5},
		{"8 kB row: 29297 copies", 8192, 4, 1e12, 29297},
		{"tiny operand: capped at maxCopies", 16, 4, 1e12, maxCopies},
		{"memory cap wins", 50 * mb, 4, 120 * mb, 2},
		{"a cap below one copy still gives one", 50 * mb, 4, 10 * mb, 1},
		{"zero bytes", 0, 4, 1e12, 1},
		{"factor 1", 25 * mb, 1, 1e12, 3},
		{"no L2 reported", 25 * mb, 4, 1e12, 1},
	}
	for _, c := range cases {
		l2Bytes := float64(l2)
		if strings.HasPrefix(c.desc, "no L2") {
			l2Bytes = 0
		}
		if got := copiesFor(c.bytes, l2Bytes, c.factor, c.cap_); got != c.want {
			t.Errorf("%s: copiesFor(%g, %g, %g, %g) = %d, want %d", c.desc, c.bytes, l2Bytes, c.factor, c.cap_, got, c.want)
		}
	}
}

func TestDescribeRotation(t *testing.T) {
	l2 := float64(60 << 20)
	cases := []struct {
		desc            string
		bytes, alloc    float64
		cap_            uint64
		copies          int
		method, absent  string
		workingSetBytes float64
	}{
		{"rotation", 50e6, 50e6, 1 << 40, 6, "rotate 6 copies, 300.00 MB working set = 4.77x L2 (62.91 MB)", "below", 300e6},
		{"single copy", 2e9, 2e9, 1 << 40, 1, "single copy, working set 2.00 GB = 31.8x L2 (62.91 MB)", "below", 2e9},
		{"capped", 50e6, 50e6, 120e6, 2, "rotate 2 copies, 100.00 MB working set = 1.59x L2 (62.91 MB), below the 4x asked (capped by 120.00 MB for rotated copies)", "may come", 100e6},
		{"capped under L2", 10e6, 10e6, 30e6, 3, "below the 4x asked (capped by 30.00 MB for rotated copies): operands may come from L2", "", 30e6},
		// A ragged cache allocates more than a call reads: the cap counts the allocation.
		{"allocation counts against the cap", 10e6, 40e6, 400e6, 10, "rotate 10 copies, 100.00 MB working set", "", 100e6},
	}
	for _, c := range cases {
		r := planRotation(c.bytes, c.alloc, l2, 4, c.cap_)
		if r.Copies != c.copies || !strings.Contains(r.Method, c.method) || (c.absent != "" && strings.Contains(r.Method, c.absent)) {
			t.Errorf("%s: %d copies, %q; want %d copies and %q without %q", c.desc, r.Copies, r.Method, c.copies, c.method, c.absent)
		}
		if r.WorkingSetBytes != c.workingSetBytes || r.L2Bytes != l2 {
			t.Errorf("%s: working set %g, L2 %g", c.desc, r.WorkingSetBytes, r.L2Bytes)
		}
	}
}

func TestSampleIndices(t *testing.T) {
	if got := sampleIndices(5, 64, 1); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("n <= max should give every index: %v", got)
	}
	for _, n := range []int{65, 300, 128256} {
		got := sampleIndices(n, 64, 7)
		if len(got) != 64 || got[0] != 0 || got[len(got)-1] != n-1 || !slices.IsSorted(got) {
			t.Fatalf("n %d: %d indices from %d to %d (sorted %v), want 64 from 0 to n-1", n, len(got), got[0], got[len(got)-1], slices.IsSorted(got))
		}
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("n %d: repeated indices %v", n, got)
		}
	}
	// The hashed half moves with the seed; the spread half does not.
	if slices.Equal(sampleIndices(128256, 64, 1), sampleIndices(128256, 64, 2)) {
		t.Error("the seed does not change the sample")
	}
}

func TestAttentionReferencePairsMatchesFull(t *testing.T) {
	cases := []struct {
		desc  string
		shape ref.AttentionShape
	}{
		{"contiguous GQA ragged", ref.AttentionShape{Batch: 3, QHeads: 8, KVHeads: 2, HeadDim: 64, Context: []int{1, 70, 33}}},
		{"paged MQA", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 1, HeadDim: 80, Context: []int{40, 17}, Layout: ref.KVPaged, PageSize: 16}},
		{"multi-head fp16", ref.AttentionShape{Batch: 2, QHeads: 3, KVHeads: 3, HeadDim: 64, Context: []int{5, 9}}},
	}
	for _, c := range cases {
		s := c.shape.WithDefaults()
		dt := ref.BF16
		if strings.Contains(c.desc, "fp16") {
			dt = ref.FP16
		}
		seeds := ref.NewAttentionSeeds(5)
		var table []int32
		if s.Layout == ref.KVPaged {
			table = s.ShuffledPageTable(seeds.PageTable)
		}
		q := ref.Fill(dt, seeds.Q, 1, s.QElements())
		k, v := ref.Fill(dt, seeds.K, 1, s.CacheElements()), ref.Fill(dt, seeds.V, 1, s.CacheElements())
		full, err := ref.Attention(s, table, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, pairs := range [][]int{sampleIndices(s.Batch*s.KVHeads, 64, 1), {s.Batch*s.KVHeads - 1}} {
			sub, elems := attentionReferencePairs(s, dt, seeds, table, nil, false, pairs, nil)
			if len(elems) != len(pairs)*s.Group()*s.HeadDim {
				t.Fatalf("%s: %d elements for %d pairs", c.desc, len(elems), len(pairs))
			}
			for i, e := range elems {
				if sub.Want[i] != full.Want[e] || sub.AbsWeighted[i] != full.AbsWeighted[e] {
					t.Fatalf("%s pairs %v: element %d (output %d) = %g/%g, full reference %g/%g",
						c.desc, pairs, i, e, sub.Want[i], sub.AbsWeighted[i], full.Want[e], full.AbsWeighted[e])
				}
				row := e / s.HeadDim
				if sub.ScoreAbs[i/s.HeadDim] != full.ScoreAbs[row] || sub.Context[i/s.HeadDim] != s.Context[row/s.QHeads] {
					t.Fatalf("%s: row %d score scale %g context %d, want %g %d", c.desc, row,
						sub.ScoreAbs[i/s.HeadDim], sub.Context[i/s.HeadDim], full.ScoreAbs[row], s.Context[row/s.QHeads])
				}
			}
			// The bounds of the sampled rows are the full reference's.
			fullBounds, subBounds := full.ElementBounds(dt, 3), sub.ElementBounds(dt, 3)
			for i, e := range elems {
				if subBounds[i] != fullBounds[e] {
					t.Fatalf("%s: bound of element %d = %g, full %g", c.desc, e, subBounds[i], fullBounds[e])
				}
			}
		}
	}
}

func TestAttentionPairsStayWithinBudget(t *testing.T) {
	s := ref.AttentionShape{Batch: 64, QHeads: 32, KVHeads: 8, HeadDim: 128, Context: []int{131072}}
	s.Context = slices.Repeat(s.Context, 64)
	s = s.WithDefaults()
	pairs := attentionPairs(s, 1)
	if work := float64(len(pairs)) * 2 * 131072 * 128; work > maxAttentionRefElements || len(pairs) < 1 {
		t.Errorf("%d pairs at 128k tokens: %g elements, budget %d", len(pairs), work, maxAttentionRefElements)
	}
	small := ref.AttentionShape{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 64, Context: []int{10, 10}}.WithDefaults()
	if got := attentionPairs(small, 1); len(got) != 4 {
		t.Errorf("a small shape should check every pair: %v", got)
	}
}

func TestCompareCatchesWrongOutputs(t *testing.T) {
	in := ref.LinearInputs{DType: ref.BF16, Batch: 3, N: 200, K: 64, SeedX: 1, SeedW: 2, ScaleX: 1, ScaleW: 0.125}
	full := ref.Linear(in)
	got := make([]float32, len(full.Want))
	for i, w := range full.Want {
		got[i] = ref.Round(ref.BF16, float32(w))
	}
	rows := sampleIndices(in.N, 64, 1)
	if v := compareLinear(got, in, rows); !v.Passed || v.Checked != 3*64 || !strings.Contains(v.Reason, "64 of 200 output features") {
		t.Fatalf("a correctly rounded output fails: %+v", v)
	}
	wrong := slices.Clone(got)
	wrong[2*in.N+rows[10]] += 1 // one sampled element far off
	if v := compareLinear(wrong, in, rows); v.Passed || !strings.Contains(v.Reason, "sequence 2") {
		t.Errorf("one wrong sampled element passes: %+v", v)
	}
	nan := slices.Clone(got)
	nan[5] = float32(math.NaN()) // not a sampled row: the NaN scan covers every output
	if v := compareLinear(nan, in, []int{0}); v.Passed || !strings.Contains(v.Reason, "1 of 600 outputs are NaN") {
		t.Errorf("an unwritten output outside the sample passes: %+v", v)
	}

	s := ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{30, 50}}.WithDefaults()
	seeds := ref.NewAttentionSeeds(3)
	q := ref.Fill(ref.BF16, seeds.Q, 1, s.QElements())
	k, v := ref.Fill(ref.BF16, seeds.K, 1, s.CacheElements()), ref.Fill(ref.BF16, seeds.V, 1, s.CacheElements())
	full2, _ := ref.Attention(s, nil, q, k, v)
	out := make([]float32, len(full2.Want))
	for i, w := range full2.Want {
		out[i] = ref.Round(ref.BF16, float32(w))
	}
	pairs := attentionPairs(s, 1)
	if ver := compareAttention(out, s, ref.BF16, seeds, nil, nil, false, 1, false, pairs, nil); !ver.Passed {
		t.Fatalf("a correctly rounded attention output fails: %+v", ver)
	}
	// A corrupted reference (other seeds) must not pass.
	if ver := compareAttention(out, s, ref.BF16, ref.NewAttentionSeeds(4), nil, nil, false, 1, false, pairs, nil); ver.Passed {
		t.Errorf("the output passes against another input's reference: %+v", ver)
	}
}
