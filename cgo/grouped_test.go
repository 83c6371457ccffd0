package cgo_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// db_grouped_linear against bench/ref's float64 reference on the emulator: fresh hash inputs,
// odd and round shapes, empty experts, every row in one expert, both dtypes, with and without
// bias, the output poisoned (NaN) before every run. A row no expert takes must stay poisoned.

type groupedCase struct {
	name       string
	counts     []int // rows per expert; the offsets are their prefix sums
	uncovered  int   // rows after the last expert's, which no expert takes
	n, k       int
	dtype      ref.DType
	bias       bool
	shortW     bool // W holds only the experts up to the last one with rows: reading past faults
	seedOffset uint64
}

// groupedCounts spreads rows over experts by the hash, leaving the experts in empty with none.
func groupedCounts(experts, rows int, seed uint64, empty ...int) []int {
	counts := make([]int, experts)
	skip := map[int]bool{}
	for _, e := range empty {
		skip[e] = true
	}
	var live []int
	for e := range experts {
		if !skip[e] {
			live = append(live, e)
		}
	}
	for r := range rows {
		counts[live[ref.Hash64(seed, uint64(r))%uint64(len(live))]]++
	}
	return counts
}

func oneExpert(experts, at, rows int) []int {
	c := make([]int, experts)
	c[at] = rows
	return c
}

func groupedCases() []groupedCase {
	bf, fp := ref.BF16, ref.FP16
	return []groupedCase{
		{name: "experts1 rows1 n1 k8", counts: []int{1}, n: 1, k: 8, dtype: bf},
		{name: "experts3 rows7x2 n7 k136 empty1", counts: groupedCounts(3, 14, 1, 1), n: 7, k: 136, dtype: fp, bias: true},
		{name: "experts8 rows33x2 n130 k4104", counts: groupedCounts(8, 66, 2), n: 130, k: 4104, dtype: bf, bias: true},
		{name: "experts8 rows33x2 n130 k4104 fp16", counts: groupedCounts(8, 66, 2), n: 130, k: 4104, dtype: fp},
		{name: "experts128 rows256x8 n7 k136", counts: groupedCounts(128, 2048, 3, 0, 5, 127), n: 7, k: 136, dtype: fp, shortW: true},
		{name: "experts128 rows256x8 n7 k8 bias", counts: groupedCounts(128, 2048, 4), n: 7, k: 8, dtype: bf, bias: true},
		{name: "experts8 rows7x2 all in one n4099 k8", counts: oneExpert(8, 3, 14), n: 4099, k: 8, dtype: bf, shortW: true},
		{name: "experts1 rows1 n4099 k4104", counts: []int{1}, n: 4099, k: 4104, dtype: fp, bias: true},
		{name: "experts128 rows256 all in one n130 k136", counts: oneExpert(128, 126, 256), n: 130, k: 136, dtype: bf, bias: true, shortW: true},
		{name: "experts3 rows33 uncovered n130 k136", counts: groupedCounts(3, 30, 5), uncovered: 3, n: 130, k: 136, dtype: fp},
		{name: "experts8 rows1 one expert n130 k136", counts: oneExpert(8, 7, 1), n: 130, k: 136, dtype: bf, bias: true},
		// Kimi-K2's 384: experts past 255 need the chunk's 9-bit expert field
		{name: "experts384 rows40 n7 k136", counts: groupedCounts(384, 40, 8), n: 7, k: 136, dtype: bf, bias: true},
		{name: "experts384 rows9 all in 383 n130 k8", counts: oneExpert(384, 383, 9), n: 130, k: 8, dtype: fp},
		// 8 rows or more a touched expert on average: the tensor-core kernel (the ones above with
		// 33x2 rows over 8 experts, 256x8 over 128 and 33 over 3 run it too).
		{name: "mma experts3 rows40 all in one n4099 k136", counts: oneExpert(3, 2, 40), n: 4099, k: 136, dtype: fp, bias: true},
		{name: "mma experts8 rows70 empty n7 k8", counts: groupedCounts(8, 70, 6, 0, 6, 7), n: 7, k: 8, dtype: bf, bias: true, shortW: true},
		{name: "mma experts2 rows256 n130 k4104", counts: groupedCounts(2, 256, 7), n: 130, k: 4104, dtype: bf},
	}
}

func TestGroupedLinearMatchesReference(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, c := range groupedCases() {
		t.Run(c.name, func(t *testing.T) { runGroupedCase(t, dev, c, uint64(100+10*i)) })
	}
	// Under the hazard schedules: threads reversed, and blocks interleaved with the cross-block
	// write check (two blocks writing one element of y fail the launch).
	for _, schedule := range []string{"reverse", "interleave:2"} {
		for _, i := range []int{1, 5, 9, 12} {
			c := groupedCases()[i]
			t.Run(schedule+" "+c.name, func(t *testing.T) {
				t.Setenv("DB_EMU_SCHEDULE", schedule)
				runGroupedCase(t, dev, c, uint64(500+i))
			})
		}
	}
}

func runGroupedCase(t *testing.T, dev *cgo.Device, c groupedCase, seed uint64) {
	experts := len(c.counts)
	offsets := ref.ExpertOffsets(c.counts)
	rows := int(offsets[experts]) + c.uncovered
	in := ref.GroupedLinearInputs{DType: c.dtype, Rows: rows, Experts: experts, N: c.n, K: c.k, Offsets: offsets,
		SeedX: seed, SeedW: seed + 1, SeedBias: seed + 2, ScaleX: 1, ScaleW: 0.5, ScaleBias: 1, HasBias: c.bias}
	want, err := ref.GroupedLinear(in)
	if err != nil {
		t.Fatal(err)
	}
	wExperts := experts
	if c.shortW {
		for wExperts > 0 && c.counts[wExperts-1] == 0 {
			wExperts--
		}
	}
	x, _ := soFilled(t, dev, c.dtype, rows*c.k, in.SeedX)
	wElems := wExperts * c.n * c.k
	w := mustAlloc(t, dev, uint64(wElems*c.dtype.Bytes()))
	if err := w.FillHash(cgo.DType(c.dtype), uint64(wElems), in.SeedW, in.ScaleW); err != nil {
		t.Fatal(err)
	}
	var biasPtr uint64
	if c.bias {
		b, _ := soFilled(t, dev, c.dtype, experts*c.n, in.SeedBias)
		biasPtr = b.Ptr
	}
	off := soInts(t, dev, offsets)
	y := soPoisoned(t, dev, rows*c.n*c.dtype.Bytes())
	if err := dev.GroupedLinear(cgo.GroupedLinearParams{X: x.Ptr, W: w.Ptr, Bias: biasPtr, Y: y.Ptr, ExpertOffsets: off.Ptr,
		Rows: rows, Experts: experts, N: c.n, K: c.k, DType: cgo.DType(c.dtype)}); err != nil {
		t.Fatal(err)
	}
	got := soReadFloats(t, y, c.dtype, rows*c.n)
	covered := int(offsets[experts]) * c.n
	cmp := ref.Compare(got[:covered], want.Want[:covered], want.Bound[:covered], ref.LinearTolerance(c.dtype))
	if !cmp.Passed {
		t.Fatalf("%s: %s", c.name, cmp.Reason())
	}
	for i := covered; i < len(got); i++ {
		if got[i] == got[i] { // not NaN: written
			t.Fatalf("row %d is taken by no expert but element %d was written (%v)", i/c.n, i%c.n, got[i])
		}
	}
}

// Graph safety: the offsets are read on the device, so one captured call follows a routing
// that changes between replays.
func TestGroupedLinearReplayFollowsOffsets(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	// 12 rows over 4 experts run the CUDA-core kernel, 40 the tensor-core one.
	for _, rows := range []int{12, 40} {
		t.Run(fmt.Sprintf("rows%d", rows), func(t *testing.T) {
			const experts, n, k = 4, 24, 64
			d := ref.BF16
			x, _ := soFilled(t, dev, d, rows*k, 71)
			w := mustAlloc(t, dev, uint64(experts*n*k*d.Bytes()))
			if err := w.FillHash(cgo.DType(d), uint64(experts*n*k), 72, 0.5); err != nil {
				t.Fatal(err)
			}
			off := soInts(t, dev, make([]int32, experts+1))
			y := soPoisoned(t, dev, rows*n*d.Bytes())
			mustGraph(t, dev.BeginGraph())
			mustGraph(t, dev.GroupedLinear(cgo.GroupedLinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, ExpertOffsets: off.Ptr,
				Rows: rows, Experts: experts, N: n, K: k, DType: cgo.DType(d)}))
			g, err := dev.EndGraph()
			mustGraph(t, err)
			defer g.Close()
			q := rows / 4
			for i, counts := range [][]int{{q, 0, rows - q, 0}, {0, rows, 0, 0}, {1, 2, q, rows - q - 3}} {
				offsets := ref.ExpertOffsets(counts)
				if err := cgo.Write(off, offsets); err != nil {
					t.Fatal(err)
				}
				mustGraph(t, y.Memset(0xFF))
				mustGraph(t, g.Launch())
				want, err := ref.GroupedLinear(ref.GroupedLinearInputs{DType: d, Rows: rows, Experts: experts, N: n, K: k,
					Offsets: offsets, SeedX: 71, SeedW: 72, ScaleX: 1, ScaleW: 0.5})
				if err != nil {
					t.Fatal(err)
				}
				if c := ref.Compare(soReadFloats(t, y, d, rows*n), want.Want, want.Bound, ref.LinearTolerance(d)); !c.Passed {
					t.Fatalf("replay %d (counts %v): %s", i, counts, c.Reason())
				}
			}
		})
	}
}

func TestGroupedLinearBadParams(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 1<<16)
	ok := cgo.GroupedLinearParams{X: buf.Ptr, W: buf.Ptr, Y: buf.Ptr, ExpertOffsets: buf.Ptr, Rows: 4, Experts: 2, N: 8, K: 16, DType: cgo.DTypeBF16}
	cases := []struct {
		name string
		edit func(*cgo.GroupedLinearParams)
		want string
	}{
		{"rows 0", func(p *cgo.GroupedLinearParams) { p.Rows = 0 }, "rows=0 out of range 1..16384"},
		{"rows past the limit", func(p *cgo.GroupedLinearParams) { p.Rows = 16385 }, "rows=16385 out of range"},
		{"experts 0", func(p *cgo.GroupedLinearParams) { p.Experts = 0 }, "experts=0 out of range 1..384"},
		{"experts 385", func(p *cgo.GroupedLinearParams) { p.Experts = 385 }, "experts=385 out of range"},
		{"n 0", func(p *cgo.GroupedLinearParams) { p.N = 0 }, "n=0 out of range"},
		{"k 12", func(p *cgo.GroupedLinearParams) { p.K = 12 }, "k=12 must be a positive multiple of 8"},
		{"k 0", func(p *cgo.GroupedLinearParams) { p.K = 0 }, "k=0 must be a positive multiple of 8"},
		{"dtype f32", func(p *cgo.GroupedLinearParams) { p.DType = cgo.DTypeF32 }, "dtype=0 unsupported"},
		{"x null", func(p *cgo.GroupedLinearParams) { p.X = 0 }, "must be device addresses"},
		{"x misaligned", func(p *cgo.GroupedLinearParams) { p.X += 2 }, "x=0x"},
		{"w misaligned", func(p *cgo.GroupedLinearParams) { p.W += 8 }, "is not 16-byte aligned"},
		{"bias odd", func(p *cgo.GroupedLinearParams) { p.Bias = buf.Ptr + 1 }, "bias=0x"},
		{"offsets misaligned", func(p *cgo.GroupedLinearParams) { p.ExpertOffsets += 2 }, "is not 4-byte aligned"},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		err := dev.GroupedLinear(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if err := dev.GroupedLinear(cgo.GroupedLinearParams{X: buf.Ptr, W: buf.Ptr, Y: buf.Ptr, ExpertOffsets: buf.Ptr,
		Rows: 1, Experts: 1, N: 1, K: 1 << 40, DType: cgo.DTypeBF16}); err == nil {
		t.Errorf("k 2^40: no error")
	}
	p := ok
	p.K = 12
	if err := dev.GroupedLinear(p); !errors.Is(err, cgo.ErrUnsupportedShape) {
		t.Errorf("k 12: %v does not match ErrUnsupportedShape", err)
	}
	p = ok
	p.X = 0
	if err := dev.GroupedLinear(p); !errors.Is(err, cgo.ErrInvalidArgument) {
		t.Errorf("x null: %v does not match ErrInvalidArgument", err)
	}
}

// Without offsets: Experts groups (heads) of Rows rows (sequences) each, at strides that are
// not the dense ones, as MLA's absorbed projections read a head's slice of a wider row and
// write into another. Every element of Y the call does not own must stay poisoned.
type stridedCase struct {
	name                     string
	groups, rows, n, k       int
	xRow, xGroup, yRow, yGrp int
	dtype                    ref.DType
	bias                     bool
}

func stridedCases() []stridedCase {
	bf, fp := ref.BF16, ref.FP16
	return []stridedCase{
		{name: "heads1 rows1 dense n7 k8", groups: 1, rows: 1, n: 7, k: 8, dtype: bf},
		// q_absorb-like: q_nope (k 16) of a head's 24 in a row of 3 heads; y the latent (n 40) of a 48-wide q head.
		{name: "heads3 rows5 q_absorb-like", groups: 3, rows: 5, n: 40, k: 16, xRow: 72, xGroup: 24, yRow: 144, yGrp: 48, dtype: bf},
		{name: "heads3 rows5 q_absorb-like fp16 bias", groups: 3, rows: 5, n: 40, k: 16, xRow: 72, xGroup: 24, yRow: 144, yGrp: 48, dtype: fp, bias: true},
		// v_absorb-like: 128 heads, x the heads' latent [rows, heads, 32], y [rows, heads * 24] with a gap.
		{name: "heads128 rows3 v_absorb-like", groups: 128, rows: 3, n: 24, k: 32, xRow: 128 * 32, xGroup: 32, yRow: 128*24 + 8, yGrp: 24, dtype: bf},
		// 8 rows a group or more: the tensor-core kernel.
		{name: "mma heads16 rows9 n130 k24", groups: 16, rows: 9, n: 130, k: 24, xRow: 16 * 40, xGroup: 40, yRow: 16 * 136, yGrp: 136, dtype: bf, bias: true},
		{name: "mma heads3 rows17 groups outer", groups: 3, rows: 17, n: 72, k: 136, xRow: 144, xGroup: 17 * 144, yRow: 80, yGrp: 17*80 + 16, dtype: fp},
		// DeepSeek's q_absorb at 16 of its heads: q_nope 128 of 192, latent 512 of 576.
		{name: "heads16 rows3 deepseek q_absorb", groups: 16, rows: 3, n: 512, k: 128, xRow: 16 * 192, xGroup: 192, yRow: 16 * 576, yGrp: 576, dtype: bf},
	}
}

func TestGroupedLinearStridedMatchesReference(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, c := range stridedCases() {
		t.Run(c.name, func(t *testing.T) { runStridedCase(t, dev, c, uint64(900+10*i)) })
	}
	for _, schedule := range []string{"reverse", "interleave:2"} {
		for _, i := range []int{1, 4} {
			c := stridedCases()[i]
			t.Run(schedule+" "+c.name, func(t *testing.T) {
				t.Setenv("DB_EMU_SCHEDULE", schedule)
				runStridedCase(t, dev, c, uint64(1300+i))
			})
		}
	}
}

func runStridedCase(t *testing.T, dev *cgo.Device, c stridedCase, seed uint64) {
	in := ref.GroupedLinearInputs{DType: c.dtype, Rows: c.rows, Experts: c.groups, N: c.n, K: c.k,
		SeedX: seed, SeedW: seed + 1, SeedBias: seed + 2, ScaleX: 1, ScaleW: 0.5, ScaleBias: 1, HasBias: c.bias,
		XRowStride: c.xRow, XGroupStride: c.xGroup, YRowStride: c.yRow, YGroupStride: c.yGrp}
	want, err := ref.GroupedLinear(in)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := soFilled(t, dev, c.dtype, in.XElements(), in.SeedX)
	w := mustAlloc(t, dev, uint64(c.groups*c.n*c.k*c.dtype.Bytes()))
	if err := w.FillHash(cgo.DType(c.dtype), uint64(c.groups*c.n*c.k), in.SeedW, in.ScaleW); err != nil {
		t.Fatal(err)
	}
	var biasPtr uint64
	if c.bias {
		b, _ := soFilled(t, dev, c.dtype, c.groups*c.n, in.SeedBias)
		biasPtr = b.Ptr
	}
	yElems := in.YElements() + 8 // and a tail no row reaches
	y := soPoisoned(t, dev, yElems*c.dtype.Bytes())
	if err := dev.GroupedLinear(cgo.GroupedLinearParams{X: x.Ptr, W: w.Ptr, Bias: biasPtr, Y: y.Ptr,
		Rows: c.rows, Experts: c.groups, N: c.n, K: c.k, DType: cgo.DType(c.dtype),
		XRowStride: c.xRow, XGroupStride: c.xGroup, YRowStride: c.yRow, YGroupStride: c.yGrp}); err != nil {
		t.Fatal(err)
	}
	raw := soReadFloats(t, y, c.dtype, yElems)
	got := make([]float32, len(want.Want))
	owned := make([]bool, yElems)
	for r := 0; r < in.LogicalRows(); r++ {
		for j := 0; j < c.n; j++ {
			at := in.YIndex(r, j)
			got[r*c.n+j], owned[at] = raw[at], true
		}
	}
	if cmp := ref.Compare(got, want.Want, want.Bound, ref.LinearTolerance(c.dtype)); !cmp.Passed {
		t.Fatalf("%s: %s", c.name, cmp.Reason())
	}
	for i, v := range raw {
		if !owned[i] && v == v {
			t.Fatalf("%s: y element %d belongs to no (group, row, column) but was written (%v)", c.name, i, v)
		}
	}
}

func TestGroupedLinearBadStrides(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 1<<16)
	ok := cgo.GroupedLinearParams{X: buf.Ptr, W: buf.Ptr, Y: buf.Ptr, Rows: 4, Experts: 2, N: 8, K: 16, DType: cgo.DTypeBF16,
		XRowStride: 48, XGroupStride: 16, YRowStride: 24, YGroupStride: 8}
	if err := dev.GroupedLinear(ok); err != nil {
		t.Fatalf("the valid strided call: %v", err)
	}
	cases := []struct {
		name string
		edit func(*cgo.GroupedLinearParams)
		want string
	}{
		{"x row stride 20", func(p *cgo.GroupedLinearParams) { p.XRowStride = 20 }, "x_row_stride=20 and x_group_stride=16 must be multiples of 8"},
		{"x group stride 4", func(p *cgo.GroupedLinearParams) { p.XGroupStride = 4 }, "must be multiples of 8"},
		{"x row stride under k", func(p *cgo.GroupedLinearParams) { p.XRowStride = 8 }, "x_row_stride=8 and y_row_stride=24 must be at least k=16 and n=8"},
		{"y row stride under n", func(p *cgo.GroupedLinearParams) { p.YRowStride = 7 }, "must be at least"},
		{"negative", func(p *cgo.GroupedLinearParams) { p.YGroupStride = -8 }, "y_group_stride=-8 out of range"},
		{"past int32", func(p *cgo.GroupedLinearParams) { p.XGroupStride = 1 << 31 }, "x_group_stride=2147483648 out of range"},
		{"group stride with offsets", func(p *cgo.GroupedLinearParams) { p.ExpertOffsets = buf.Ptr }, "with expert_offsets: rows in expert order have no group strides"},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		err := dev.GroupedLinear(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
