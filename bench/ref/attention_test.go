package ref

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
)

// logicalCaches fills k and v of shape s so that token t of (sequence b, head h) holds
// f(b, h, t, i), whatever the layout: the layouts can then be checked against each other.
func logicalCaches(s AttentionShape, table []int32, f func(b, h, t, i int) float32) (k, v []float32) {
	k = make([]float32, s.CacheElements())
	v = make([]float32, s.CacheElements())
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.KVHeads; h++ {
			for t := 0; t < s.Context[b]; t++ {
				off := s.KVOffset(table, b, h, t)
				for i := 0; i < s.HeadDim; i++ {
					k[off+i] = f(b, h, t, i)
					v[off+i] = f(b, h, t, i+1000)
				}
			}
		}
	}
	return k, v
}

func hashed(seed uint64) func(b, h, t, i int) float32 {
	return func(b, h, t, i int) float32 {
		return Round(BF16, HashUniform(seed, uint64(((b*64+h)*8192+t)*2048+i)))
	}
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func maxAbsDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

func TestAttentionContextOneIsV(t *testing.T) {
	s := AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{1, 1}}.WithDefaults()
	q := Fill(BF16, 1, 1, s.QElements())
	k, v := logicalCaches(s, nil, hashed(2))
	ref, err := Attention(s, nil, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 2; b++ {
		for hq := 0; hq < 4; hq++ {
			want := widen(v[s.KVOffset(nil, b, hq/2, 0):][:64])
			got := ref.Want[(b*4+hq)*64:][:64]
			if d := maxAbsDiff(got, want); d != 0 {
				t.Fatalf("b %d hq %d: one token should give v exactly, off by %g", b, hq, d)
			}
		}
	}
}

func TestAttentionEqualKeysAverageV(t *testing.T) {
	s := AttentionShape{Batch: 1, QHeads: 1, KVHeads: 1, HeadDim: 64, Context: []int{5}}.WithDefaults()
	q := Fill(FP16, 3, 1, s.QElements())
	k, v := logicalCaches(s, nil, func(b, h, tok, i int) float32 {
		if i >= 1000 {
			return float32(tok) // v = token index in every dim
		}
		return 0.25
	})
	ref, err := Attention(s, nil, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range ref.Want {
		if math.Abs(o-2) > 1e-12 {
			t.Fatalf("out[%d] = %v, want the mean token index 2", i, o)
		}
	}
}

// A two-pass softmax written out by hand for one head.
func TestAttentionMatchesHandSoftmax(t *testing.T) {
	s := AttentionShape{Batch: 1, QHeads: 1, KVHeads: 1, HeadDim: 64, Context: []int{3}, Scale: 0.5}.WithDefaults()
	q := make([]float32, 64)
	q[0] = 1
	k, v := logicalCaches(s, nil, func(b, h, tok, i int) float32 {
		switch {
		case i == 0:
			return float32(tok) // score = 0.5*t
		case i == 1000:
			return float32(10 * (tok + 1))
		}
		return 0
	})
	ref, err := Attention(s, nil, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	e0, e1, e2 := 1.0, math.Exp(0.5), math.Exp(1)
	want := (10*e0 + 20*e1 + 30*e2) / (e0 + e1 + e2)
	if math.Abs(ref.Want[0]-want) > 1e-12 || ref.Want[1] != 0 {
		t.Fatalf("out[0:2] = %v, want [%v 0]", ref.Want[:2], want)
	}
	if ref.ScoreAbs[0] != 1 || math.Abs(ref.AbsWeighted[0]-want) > 1e-12 {
		t.Fatalf("ScoreAbs %v (want 0.5*2), AbsWeighted %v (want %v)", ref.ScoreAbs[0], ref.AbsWeighted[0], want)
	}
}

func TestAttentionLayoutsAndGroupsAgree(t *testing.T) {
	ctx := []int{1, 17, 40, 33}
	for _, tc := range []struct {
		name          string
		qHeads, group int
	}{
		{"multi-head", 4, 1}, {"group 4", 8, 4}, {"group 7", 14, 7}, {"multi-query", 6, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kvHeads := tc.qHeads / tc.group
			cont := AttentionShape{Batch: 4, QHeads: tc.qHeads, KVHeads: kvHeads, HeadDim: 80, Context: ctx}.WithDefaults()
			q := Fill(BF16, 9, 1, cont.QElements())
			kc, vc := logicalCaches(cont, nil, hashed(4))
			want, err := Attention(cont, nil, q, kc, vc)
			if err != nil {
				t.Fatal(err)
			}

			paged := AttentionShape{Batch: 4, QHeads: tc.qHeads, KVHeads: kvHeads, HeadDim: 80, Context: ctx,
				Layout: KVPaged, PageSize: 16, NumPages: 19}.WithDefaults()
			table := paged.ShuffledPageTable(5)
			kp, vp := logicalCaches(paged, table, hashed(4))
			got, err := Attention(paged, table, q, kp, vp)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(got.Want, want.Want); d != 0 {
				t.Fatalf("paged differs from contiguous by %g", d)
			}

			// Multi-head with each KV head repeated for its group gives the same output.
			mha := cont
			mha.KVHeads = tc.qHeads
			km, vm := logicalCaches(mha, nil, func(b, h, tok, i int) float32 { return hashed(4)(b, h/tc.group, tok, i) })
			got, err = Attention(mha, nil, q, km, vm)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(got.Want, want.Want); d != 0 {
				t.Fatalf("GQA differs from repeated-KV multi-head by %g", d)
			}
		})
	}
}

func TestMergeSoftmaxPartialsMatchesOnePass(t *testing.T) {
	const n, d = 50, 3
	scores := make([]float64, n)
	vals := make([][]float64, n)
	for i := range scores {
		scores[i] = 8 * float64(HashUniform(11, uint64(i)))
		vals[i] = []float64{float64(HashUniform(12, uint64(i))), float64(i), 1}
	}
	partial := func(lo, hi int) SoftmaxPartial {
		p := SoftmaxPartial{Max: math.Inf(-1), Acc: make([]float64, d)}
		for i := lo; i < hi; i++ {
			p.Max = math.Max(p.Max, scores[i])
		}
		for i := lo; i < hi; i++ {
			w := math.Exp(scores[i] - p.Max)
			p.Sum += w
			for j := range p.Acc {
				p.Acc[j] += w * vals[i][j]
			}
		}
		return p
	}
	want := MergeSoftmaxPartials([]SoftmaxPartial{partial(0, n)}, d)
	for _, bounds := range [][]int{{0, 7, 7, 30, 50}, {0, 1, 2, 50, 50, 50}, {0, 25, 50}} {
		var parts []SoftmaxPartial
		for i := 0; i+1 < len(bounds); i++ {
			parts = append(parts, partial(bounds[i], bounds[i+1]))
		}
		got := MergeSoftmaxPartials(parts, d)
		if diff := maxAbsDiff(got, want); diff > 1e-12 {
			t.Fatalf("splits %v: merge differs from one pass by %g", bounds, diff)
		}
	}
	if got := MergeSoftmaxPartials([]SoftmaxPartial{partial(3, 3)}, d); maxAbsDiff(got, make([]float64, d)) != 0 {
		t.Fatalf("no tokens at all should give zeros, got %v", got)
	}
	if math.Abs(want[2]-1) > 1e-12 {
		t.Fatalf("softmax weights should sum to 1, got %v", want[2])
	}
}

func TestAppendKVThenAttentionSeesToken(t *testing.T) {
	for _, layout := range []KVLayout{KVContiguous, KVPaged} {
		t.Run(layout.String(), func(t *testing.T) {
			s := AttentionShape{Batch: 2, QHeads: 2, KVHeads: 1, HeadDim: 64, Context: []int{16, 3},
				Layout: layout, Capacity: 17, PageSize: 16}.WithDefaults()
			table := s.ShuffledPageTable(1)
			k, v := logicalCaches(s, table, func(b, h, tok, i int) float32 { return 0 })
			kNew := make([]float32, 2*64)
			vNew := make([]float32, 2*64)
			for i := range vNew {
				kNew[i], vNew[i] = 100, 7 // a huge score: the new token takes all the weight
			}
			if err := AppendKV(s, table, s.Context, k, v, kNew, vNew); err != nil {
				t.Fatal(err)
			}
			after := s
			after.Context = []int{17, 4}
			q := make([]float32, s.QElements())
			for i := range q {
				q[i] = 1
			}
			ref, err := Attention(after, table, q, k, v)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range ref.Want {
				if math.Abs(o-7) > 1e-9 {
					t.Fatalf("out[%d] = %v, want the appended token's 7", i, o)
				}
			}
			if err := AppendKV(s, table, []int{s.SeqCapacity(), 0}, k, v, kNew, vNew); err == nil {
				t.Fatal("append past the capacity accepted")
			}
		})
	}
}

func TestAttentionShapeValidate(t *testing.T) {
	good := AttentionShape{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 128, Context: []int{5, 9}}
	for _, tc := range []struct {
		name string
		edit func(*AttentionShape)
		want string // "" = valid
	}{
		{"valid contiguous", func(s *AttentionShape) {}, ""},
		{"valid paged", func(s *AttentionShape) { s.Layout, s.PageSize = KVPaged, 256 }, ""},
		{"zero batch", func(s *AttentionShape) { s.Batch, s.Context = 0, nil }, "batch 0"},
		{"group not integral", func(s *AttentionShape) { s.KVHeads = 3 }, "not a multiple of kv_heads 3"},
		{"head dim 112", func(s *AttentionShape) { s.HeadDim = 112 }, "head_dim 112 unsupported"},
		{"context count", func(s *AttentionShape) { s.Context = []int{5} }, "1 context lengths for a batch of 2"},
		{"context zero", func(s *AttentionShape) { s.Context = []int{5, 0} }, "context length 0 of sequence 1"},
		{"capacity short", func(s *AttentionShape) { s.Capacity = 8 }, "capacity 8 is less than the longest context 9"},
		{"page 8", func(s *AttentionShape) { s.Layout, s.PageSize = KVPaged, 8 }, "page size 8 unsupported"},
		{"page 48", func(s *AttentionShape) { s.Layout, s.PageSize = KVPaged, 48 }, "page size 48 unsupported"},
		{"page 512", func(s *AttentionShape) { s.Layout, s.PageSize = KVPaged, 512 }, "page size 512 unsupported"},
		{"negative scale", func(s *AttentionShape) { s.Scale = -1 }, "scale -1"},
		{"layout", func(s *AttentionShape) { s.Layout = 7 }, "unknown KV layout 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.Context = append([]int(nil), good.Context...)
			tc.edit(&s)
			err := s.WithDefaults().Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestValidatePageTable(t *testing.T) {
	s := AttentionShape{Batch: 2, QHeads: 1, KVHeads: 1, HeadDim: 64, Context: []int{20, 5},
		Layout: KVPaged, PageSize: 16, PagesPerSeq: 2, NumPages: 4}.WithDefaults()
	if err := s.ValidatePageTable([]int32{3, 0, 1, -1}, s.Context); err != nil {
		t.Fatalf("a good table refused: %v", err)
	}
	if err := s.ValidatePageTable([]int32{3, 0, 3, -1}, s.Context); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("a shared page accepted: %v", err)
	}
	if err := s.ValidatePageTable([]int32{3, 4, 1, -1}, s.Context); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("a page past the cache accepted: %v", err)
	}
	if err := s.ValidatePageTable([]int32{3, 0, -1, 2}, s.Context); err == nil {
		t.Fatal("a -1 page where a token lives accepted")
	}
}

func TestShuffledPageTableIsAPermutation(t *testing.T) {
	s := AttentionShape{Batch: 3, QHeads: 1, KVHeads: 1, HeadDim: 64, Context: []int{40, 40, 40},
		Layout: KVPaged, PageSize: 16}.WithDefaults()
	table := s.ShuffledPageTable(42)
	if err := s.ValidatePageTable(table, []int{48, 48, 48}); err != nil {
		t.Fatal(err)
	}
	identity := true
	for i, p := range table {
		identity = identity && int(p) == i
	}
	if identity {
		t.Fatal("the shuffle left the identity")
	}
}

// The bounds must pass what fp32 arithmetic in any order gives and catch a single wrong token.
func TestAttentionElementBounds(t *testing.T) {
	s := AttentionShape{Batch: 1, QHeads: 2, KVHeads: 1, HeadDim: 128, Context: []int{300}}.WithDefaults()
	for _, d := range []DType{BF16, FP16} {
		q := Fill(d, 1, 1, s.QElements())
		k := Fill(d, 2, 1, s.CacheElements())
		v := Fill(d, 3, 1, s.CacheElements())
		ref, err := Attention(s, nil, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		bounds, mmaBounds := ref.ElementBounds(d, 1), ref.ElementBoundsMMA(d, 1)
		for i := range bounds {
			if !(mmaBounds[i] >= bounds[i]) {
				t.Fatalf("%v: element %d: the mma bound %g is tighter than the simt one %g", d, i, mmaBounds[i], bounds[i])
			}
		}
		got := float32Attention(s, d, q, k, v, false)
		// The tensor-core kernel's arithmetic: p rounded to d before P.V (fp16 scaled by 2^15
		// first), the sum of the unrounded p.
		if c := Compare(float32Attention(s, d, q, k, v, true), ref.Want, mmaBounds, AttentionTolerance(d)); !c.Passed {
			t.Fatalf("%v: a float32 kernel with p rounded to %v fails the mma bounds: %s", d, d, c.Reason())
		}
		c := Compare(got, ref.Want, bounds, AttentionTolerance(d))
		if !c.Passed {
			t.Fatalf("%v: a float32 kernel fails: %s", d, c.Reason())
		}
		// Drop token 7 from head 0: the comparison must fail.
		dropped := append([]float32(nil), got...)
		s2 := s
		s2.Context = []int{299}
		k2 := append(append([]float32(nil), k[:7*128]...), k[8*128:]...)
		v2 := append(append([]float32(nil), v[:7*128]...), v[8*128:]...)
		k2 = append(k2, make([]float32, 128)...)
		v2 = append(v2, make([]float32, 128)...)
		wrong, err := Attention(s2, nil, q, k2, v2)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 128; i++ {
			dropped[i] = Round(d, float32(wrong.Want[i]))
		}
		if c := Compare(dropped, ref.Want, bounds, AttentionTolerance(d)); c.Passed {
			t.Fatalf("%v: a dropped token passes (rel error %g)", d, c.RelError)
		}
		if c := Compare(dropped, ref.Want, mmaBounds, AttentionTolerance(d)); c.Passed {
			t.Fatalf("%v: a dropped token passes the mma bounds (rel error %g)", d, c.RelError)
		}
	}
}

// float32Attention is a float32 kernel for TestAttentionElementBounds' shape (one KV head,
// head dim 128, 300 tokens): two-pass softmax in float32, rounded to d; with roundP the
// probabilities are rounded to d before P.V as the tensor-core kernel does.
func float32Attention(s AttentionShape, d DType, q, k, v []float32, roundP bool) []float32 {
	pScale := float32(1)
	if d == FP16 {
		pScale = 32768
	}
	got := make([]float32, s.QElements())
	for hq := 0; hq < s.QHeads; hq++ {
		scores := make([]float32, 300)
		m := float32(math.Inf(-1))
		for tok := range scores {
			var dot float32
			for i := 0; i < 128; i++ {
				dot += q[hq*128+i] * k[tok*128+i]
			}
			scores[tok] = dot * float32(s.SoftmaxScale())
			m = max(m, scores[tok])
		}
		var sum float32
		acc := make([]float32, 128)
		for tok, sc := range scores {
			p := float32(math.Exp(float64(sc - m)))
			sum += p
			if roundP {
				p = Round(d, p*pScale) / pScale
			}
			for i := range acc {
				acc[i] += p * v[tok*128+i]
			}
		}
		for i := range acc {
			got[hq*128+i] = Round(d, acc[i]/sum)
		}
	}
	return got
}

// Validate refuses exactly what the kernels refuse: the head dims, page sizes and batch limit
// of kernels/decodebench.h (through cgo), not a copy of them.
func TestAttentionShapeTakesTheKernelsLimits(t *testing.T) {
	shape := func(batch, headDim, page int) AttentionShape {
		s := AttentionShape{Batch: batch, QHeads: 2, KVHeads: 1, HeadDim: headDim, Context: make([]int, batch)}
		for i := range s.Context {
			s.Context[i] = 1
		}
		if page > 0 {
			s.Layout, s.PageSize = KVPaged, page
		}
		return s.WithDefaults()
	}
	for d := 1; d <= 2*slices.Max(cgo.AttentionHeadDims); d++ {
		if err := shape(1, d, 0).Validate(); (err == nil) != cgo.IsAttentionHeadDim(d) {
			t.Errorf("head dim %d: Validate says %v, cgo.AttentionHeadDims %v", d, err, cgo.AttentionHeadDims)
		}
	}
	for p := 1; p <= 2*cgo.MaxPageSize; p++ {
		if err := ValidatePageSize(p); (err == nil) != cgo.ValidPageSize(p) {
			t.Errorf("page size %d: ValidatePageSize says %v, cgo.ValidPageSize %v", p, err, cgo.ValidPageSize(p))
		}
	}
	d := cgo.AttentionHeadDims[0]
	if err := shape(cgo.MaxBatch, d, 0).Validate(); err != nil {
		t.Errorf("batch %d (cgo.MaxBatch): %v", cgo.MaxBatch, err)
	}
	if err := shape(cgo.MaxBatch+1, d, 0).Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprint(cgo.MaxBatch)) {
		t.Errorf("batch %d (past cgo.MaxBatch): %v, want an error naming %d", cgo.MaxBatch+1, err, cgo.MaxBatch)
	}
}
