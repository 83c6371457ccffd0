package cgo_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// db_grouped_linear over quantized experts against bench/ref's float64 reference (each expert's
// W dequantised exactly from db_fill_quantized's bytes) on the emulator: ragged top-k routings,
// an expert with no rows whose W, scales and zeros are not allocated (a read of them faults),
// odd and gpt-oss shapes (n and k 2880), the output poisoned (NaN) before every run.

type groupedQuantCase struct {
	format cgo.WeightFormat
	group  int
	counts []int
	n, k   int
	dtype  ref.DType
	bias   bool
	shortW bool // the trailing experts without rows have no W, scales or zeros
}

func (c groupedQuantCase) name() string {
	return fmt.Sprintf("%v g%d experts%d rows%d n%d k%d %v bias%v", c.format, c.group, len(c.counts),
		int(ref.ExpertOffsets(c.counts)[len(c.counts)]), c.n, c.k, c.dtype, c.bias)
}

func groupedQuantCases() []groupedQuantCase {
	bf, fp := ref.BF16, ref.FP16
	// gpt-oss-20b decodes 32 experts top-4: batch 3 is 12 rows; the last expert gets none.
	gptoss := groupedCounts(32, 12, 11, 31)
	return []groupedQuantCase{
		{format: cgo.WeightMXFP4, counts: groupedCounts(4, 3*2, 1, 3), n: 7, k: 64, dtype: bf, bias: true, shortW: true},
		{format: cgo.WeightMXFP4, counts: gptoss, n: 2880, k: 64, dtype: bf, bias: true, shortW: true},
		{format: cgo.WeightMXFP4, counts: groupedCounts(4, 3, 2), n: 7, k: 2880, dtype: fp},
		{format: cgo.WeightMXFP4, counts: groupedCounts(128, 17*8, 3, 0, 127), n: 7, k: 64, dtype: fp, bias: true, shortW: true},
		{format: cgo.WeightMXFP4, counts: oneExpert(4, 1, 20), n: 36, k: 96, dtype: bf}, // 20 rows: 3 chunks, one partial
		{format: cgo.WeightFP8, counts: groupedCounts(4, 6, 4, 3), n: 7, k: 64, dtype: bf, bias: true, shortW: true},
		{format: cgo.WeightFP8, counts: gptoss, n: 2880, k: 64, dtype: fp},
		{format: cgo.WeightFP8, counts: groupedCounts(32, 9, 5), n: 7, k: 2880, dtype: bf},
		{format: cgo.WeightFP8Tensor, counts: groupedCounts(4, 6, 6, 3), n: 7, k: 64, dtype: fp, shortW: true},
		{format: cgo.WeightINT8, counts: groupedCounts(32, 12, 7), n: 7, k: 2880, dtype: bf, bias: true},
		{format: cgo.WeightINT4, group: 64, counts: groupedCounts(4, 6, 8, 3), n: 7, k: 2880, dtype: fp, shortW: true},
		{format: cgo.WeightINT4, group: 32, counts: groupedCounts(128, 17, 9), n: 7, k: 64, dtype: bf, bias: true},
		{format: cgo.WeightINT4ZeroPt, group: 32, counts: groupedCounts(4, 6, 10, 3), n: 8, k: 2880, dtype: bf, shortW: true},
		{format: cgo.WeightINT4ZeroPt, group: 64, counts: groupedCounts(32, 12, 12), n: 2880, k: 64, dtype: fp, bias: true},
		{format: cgo.WeightFP8Block, counts: groupedCounts(4, 6, 13, 3), n: 7, k: 2880, dtype: bf, shortW: true},
		{format: cgo.WeightFP8Block, counts: groupedCounts(4, 5, 14), n: 200, k: 144, dtype: fp, bias: true},
	}
}

func TestGroupedLinearQuantizedMatchesReference(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, c := range groupedQuantCases() {
		t.Run(c.name(), func(t *testing.T) { runGroupedQuantCase(t, dev, c, uint64(700+10*i)) })
	}
	for _, schedule := range []string{"reverse", "interleave:2"} {
		for _, i := range []int{0, 4, 12} {
			c := groupedQuantCases()[i]
			t.Run(schedule+" "+c.name(), func(t *testing.T) {
				t.Setenv("DB_EMU_SCHEDULE", schedule)
				runGroupedQuantCase(t, dev, c, uint64(900+i))
			})
		}
	}
}

// groupedQuantExperts allocates and fills the experts' W, scales and zeros (experts of them, one
// layout each, as db_grouped_linear reads them).
func groupedQuantExperts(t *testing.T, dev *cgo.Device, in ref.GroupedLinearInputs, experts int) (w, scales, zeros uint64, sb *cgo.Buffer) {
	t.Helper()
	l := in.Format.Layout(in.N, in.K, in.GroupSize)
	wb := mustAlloc(t, dev, uint64(experts)*l.WBytes)
	sb = mustAlloc(t, dev, uint64(experts)*l.ScaleBytes)
	w, scales = wb.Ptr, sb.Ptr
	if l.ZeroBytes > 0 {
		zeros = mustAlloc(t, dev, uint64(experts)*l.ZeroBytes).Ptr
	}
	for e := range experts {
		q := in.ExpertQuantFill(e)
		f := cgo.QuantFill{W: w + uint64(e)*l.WBytes, Scales: scales + uint64(e)*l.ScaleBytes, Format: q.Format,
			N: q.N, K: q.K, GroupSize: q.GroupSize, Seed: q.Seed, Scale: q.Scale}
		if zeros != 0 {
			f.Zeros = zeros + uint64(e)*l.ZeroBytes
		}
		if err := dev.FillQuantized(f); err != nil {
			t.Fatal(err)
		}
	}
	return w, scales, zeros, sb
}

func runGroupedQuantCase(t *testing.T, dev *cgo.Device, c groupedQuantCase, seed uint64) {
	experts := len(c.counts)
	offsets := ref.ExpertOffsets(c.counts)
	rows := int(offsets[experts])
	in := ref.GroupedLinearInputs{DType: c.dtype, Rows: rows, Experts: experts, N: c.n, K: c.k, Offsets: offsets,
		SeedX: seed, SeedW: seed + 1, SeedBias: seed + 2, ScaleX: 1, ScaleW: ref.QuantWeightScale(c.format, c.k),
		ScaleBias: 1, HasBias: c.bias, Format: c.format, GroupSize: c.group}
	want, err := ref.GroupedLinear(in)
	if err != nil {
		t.Fatal(err)
	}
	wExperts := experts
	if c.shortW {
		for wExperts > 0 && c.counts[wExperts-1] == 0 {
			wExperts--
		}
		if wExperts == experts {
			t.Fatalf("%s: shortW with no trailing empty expert", c.name())
		}
	}
	w, scales, zeros, _ := groupedQuantExperts(t, dev, in, wExperts)
	x, _ := soFilled(t, dev, c.dtype, rows*c.k, in.SeedX)
	var biasPtr uint64
	if c.bias {
		b, _ := soFilled(t, dev, c.dtype, experts*c.n, in.SeedBias)
		biasPtr = b.Ptr
	}
	off := soInts(t, dev, offsets)
	y := soPoisoned(t, dev, rows*c.n*c.dtype.Bytes())
	if err := dev.GroupedLinear(cgo.GroupedLinearParams{X: x.Ptr, W: w, Bias: biasPtr, Y: y.Ptr, ExpertOffsets: off.Ptr,
		Rows: rows, Experts: experts, N: c.n, K: c.k, DType: cgo.DType(c.dtype),
		Scales: scales, Zeros: zeros, Format: c.format, GroupSize: c.group}); err != nil {
		t.Fatal(err)
	}
	got := soReadFloats(t, y, c.dtype, rows*c.n)
	cmp := ref.Compare(got, want.Want, want.Bound, ref.LinearTolerance(c.dtype))
	if !cmp.Passed {
		t.Fatalf("%s: %s", c.name(), cmp.Reason())
	}
}

// A NaN scale (mxfp4's e8m0 code 255) in one expert makes that expert's rows NaN, and the
// comparison with the reference (which has no NaN) fails: NaN never passes.
func TestGroupedLinearQuantizedNaNScaleFails(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	counts := []int{2, 3, 1}
	offsets := ref.ExpertOffsets(counts)
	in := ref.GroupedLinearInputs{DType: ref.BF16, Rows: 6, Experts: 3, N: 7, K: 64, Offsets: offsets,
		SeedX: 1, SeedW: 2, ScaleX: 1, ScaleW: ref.QuantWeightScale(cgo.WeightMXFP4, 64), Format: cgo.WeightMXFP4}
	want, err := ref.GroupedLinear(in)
	if err != nil {
		t.Fatal(err)
	}
	w, scales, _, sb := groupedQuantExperts(t, dev, in, 3)
	l := in.Format.Layout(in.N, in.K, 0)
	host := make([]byte, 3*l.ScaleBytes)
	if err := sb.CopyToHost(host); err != nil {
		t.Fatal(err)
	}
	host[l.ScaleBytes+4*2+1] = 255 // expert 1, W row 4, group 1
	if err := sb.CopyFromHost(host); err != nil {
		t.Fatal(err)
	}
	x, _ := soFilled(t, dev, in.DType, 6*64, in.SeedX)
	off := soInts(t, dev, offsets)
	y := soPoisoned(t, dev, 6*7*2)
	if err := dev.GroupedLinear(cgo.GroupedLinearParams{X: x.Ptr, W: w, Y: y.Ptr, ExpertOffsets: off.Ptr,
		Rows: 6, Experts: 3, N: 7, K: 64, DType: cgo.DType(ref.BF16), Scales: scales, Format: cgo.WeightMXFP4}); err != nil {
		t.Fatal(err)
	}
	got := soReadFloats(t, y, in.DType, 6*7)
	for r := range 6 {
		isNaN := math.IsNaN(float64(got[r*7+4]))
		if isNaN != (r >= 2 && r < 5) {
			t.Errorf("row %d (expert 1: rows 2..4) column 4 = %v", r, got[r*7+4])
		}
	}
	if cmp := ref.Compare(got, want.Want, want.Bound, ref.LinearTolerance(in.DType)); cmp.Passed {
		t.Fatal("a NaN scale's rows passed the comparison")
	}
}

// Bad quantized params are refused with the value named, before any launch.
func TestGroupedLinearQuantizedBadParams(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	x := mustAlloc(t, dev, 1<<16)
	base := cgo.GroupedLinearParams{X: x.Ptr, W: x.Ptr, Y: x.Ptr, Scales: x.Ptr, Rows: 2, Experts: 2, N: 8, K: 64,
		DType: cgo.DType(ref.BF16), Format: cgo.WeightMXFP4}
	cases := []struct {
		name string
		edit func(*cgo.GroupedLinearParams)
		want string
	}{
		{"mxfp4 k 48", func(p *cgo.GroupedLinearParams) { p.K = 48 }, "k a multiple of 32"},
		{"mxfp4 group 64", func(p *cgo.GroupedLinearParams) { p.GroupSize = 64 }, "group_size 64"},
		{"int4 group 48", func(p *cgo.GroupedLinearParams) { p.Format, p.GroupSize = cgo.WeightINT4, 48 }, "group_size 32, 64 or 128"},
		{"int4 k not a group multiple", func(p *cgo.GroupedLinearParams) { p.Format, p.GroupSize, p.K = cgo.WeightINT4, 128, 96 }, "k=96"},
		{"int4-zp odd n", func(p *cgo.GroupedLinearParams) {
			p.Format, p.GroupSize, p.N, p.Zeros = cgo.WeightINT4ZeroPt, 32, 7, x.Ptr
		}, "n=7 is odd"},
		{"int4-zp no zeros", func(p *cgo.GroupedLinearParams) { p.Format, p.GroupSize = cgo.WeightINT4ZeroPt, 32 }, "need zeros"},
		{"mxfp4 zeros", func(p *cgo.GroupedLinearParams) { p.Zeros = x.Ptr }, "zeros="},
		{"no scales", func(p *cgo.GroupedLinearParams) { p.Scales = 0 }, "need scales"},
		{"fp8 scales unaligned", func(p *cgo.GroupedLinearParams) { p.Format, p.Scales = cgo.WeightFP8, x.Ptr+2 }, "4-byte aligned"},
		{"unknown format", func(p *cgo.GroupedLinearParams) { p.Format = 9 }, "weight_format=9"},
		{"dense with scales", func(p *cgo.GroupedLinearParams) { p.Format = cgo.WeightDense }, "dense"},
	}
	for _, c := range cases {
		p := base
		c.edit(&p)
		err := dev.GroupedLinear(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %q", c.name, err, c.want)
		}
	}
}
