package cgo_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// forEachQuantLibrary runs test on the libraries that build the quantized formats: the
// emulator (and CUDA where there is one); the fake library does not export db_fill_quantized,
// which TestLinearQuantFakeNotExported checks.
func forEachQuantLibrary(t *testing.T, test func(t *testing.T, dev *cgo.Device)) {
	for _, l := range []struct {
		name string
		open func(t testing.TB) *cgo.Library
	}{{"emu", cgotest.Emu}, {"cuda", cgotest.CUDA}} {
		t.Run(l.name, func(t *testing.T) {
			dev, err := l.open(t).OpenDevice(0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dev.Close() })
			test(t, dev)
		})
	}
}

// quantBuffers allocates W, scales and zeros of a layout (zeros only where the format has them).
func quantBuffers(t *testing.T, dev *cgo.Device, l cgo.QuantLayout) (w, scales, zeros *cgo.Buffer) {
	t.Helper()
	w, scales = mustAlloc(t, dev, max(l.WBytes, 16)), mustAlloc(t, dev, max(l.ScaleBytes, 16))
	if l.ZeroBytes > 0 {
		zeros = mustAlloc(t, dev, l.ZeroBytes)
	}
	return w, scales, zeros
}

func ptrOf(b *cgo.Buffer) uint64 {
	if b == nil {
		return 0
	}
	return b.Ptr
}

func refDType(dt cgo.DType) ref.DType {
	if dt == cgo.DTypeFP16 {
		return ref.FP16
	}
	return ref.BF16
}

// runQuantLinear runs Y = X W^T with W given by rows (already on the device at w, scales,
// zeros), X filled from the hash at scaleX and Y poisoned, and compares every output with the
// float64 reference. It returns the outputs.
func runQuantLinear(t *testing.T, dev *cgo.Device, dt cgo.DType, f cgo.WeightFormat, batch, n, k, group int, variant cgo.LinearVariant, w, scales, zeros *cgo.Buffer, rows ref.WeightRows, scaleX float32) []float32 {
	t.Helper()
	x, y := mustAlloc(t, dev, uint64(2*batch*k)), mustAlloc(t, dev, uint64(2*batch*n))
	if err := x.FillHash(dt, uint64(batch*k), 11, scaleX); err != nil {
		t.Fatal(err)
	}
	if err := y.Memset(0xFF); err != nil {
		t.Fatal(err)
	}
	p := cgo.LinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, Batch: batch, N: n, K: k, DType: dt, Variant: variant,
		Scales: scales.Ptr, Zeros: ptrOf(zeros), WeightFormat: f, GroupSize: group}
	resolved, workspace, err := dev.LinearPlan(p)
	if err != nil {
		t.Fatalf("LinearPlan: %v", err)
	}
	if workspace != 0 || (variant != cgo.LinearAuto && resolved.Variant != variant) {
		t.Errorf("plan of %s: %s with %d bytes of workspace", variant, resolved.Variant, workspace)
	}
	if err := dev.Linear(resolved); err != nil {
		t.Fatal(err)
	}
	raw := make([]uint16, batch*n)
	if err := cgo.Read(y, raw); err != nil {
		t.Fatal(err)
	}
	rdt := refDType(dt)
	got := make([]float32, len(raw))
	for i, h := range raw {
		if rdt == ref.BF16 {
			got[i] = ref.BF16ToFloat32(h)
		} else {
			got[i] = ref.FP16ToFloat32(h)
		}
	}
	want := ref.Linear(ref.LinearInputs{DType: rdt, Batch: batch, N: n, K: k, SeedX: 11, ScaleX: scaleX, Weights: rows})
	if c := ref.Compare(got, want.Want, want.ElementBounds(rdt, k), ref.LinearTolerance(rdt)); !c.Passed {
		t.Errorf("%v %s batch %d n %d k %d group %d (%s): %s", f, dt, batch, n, k, group, resolved.Variant, c.Reason())
	}
	return got
}

// fillQuant fills a format's buffers on the device from seed.
func fillQuant(t *testing.T, dev *cgo.Device, f cgo.WeightFormat, n, k, group int, seed uint64, scale float32) (ref.QuantFill, *cgo.Buffer, *cgo.Buffer, *cgo.Buffer) {
	t.Helper()
	w, scales, zeros := quantBuffers(t, dev, f.Layout(n, k, group))
	q := ref.QuantFill{Format: f, N: n, K: k, GroupSize: group, Seed: seed, Scale: scale}
	if err := dev.FillQuantized(cgo.QuantFill{W: w.Ptr, Scales: scales.Ptr, Zeros: ptrOf(zeros), Format: f, N: n, K: k, GroupSize: group, Seed: seed, Scale: scale}); err != nil {
		t.Fatalf("FillQuantized(%v n %d k %d group %d): %v", f, n, k, group, err)
	}
	return q, w, scales, zeros
}

// The device fill writes exactly the bytes bench/ref regenerates, for every format.
func TestLinearQuantFill(t *testing.T) {
	forEachQuantLibrary(t, func(t *testing.T, dev *cgo.Device) {
		for _, c := range []struct {
			f       cgo.WeightFormat
			n, k, g int
			scale   float32
		}{
			{cgo.WeightFP8, 7, 48, 0, 0.5}, {cgo.WeightFP8Tensor, 3, 32, 0, 2}, {cgo.WeightINT8, 5, 16, 0, 0.01},
			{cgo.WeightINT4, 3, 128, 64, 0.1}, {cgo.WeightINT4ZeroPt, 6, 96, 32, 3}, {cgo.WeightMXFP4, 5, 64, 0, 0.06},
			{cgo.WeightFP8Block, 130, 144, 0, 0.25}, // 2 x 2 tiles, the last of each partial
		} {
			q, w, scales, zeros := fillQuant(t, dev, c.f, c.n, c.k, c.g, 99, c.scale)
			want := q.Weights()
			for _, part := range []struct {
				name string
				buf  *cgo.Buffer
				want []byte
			}{{"w", w, want.W}, {"scales", scales, want.Scales}, {"zeros", zeros, want.Zeros}} {
				if part.buf == nil {
					continue
				}
				got := make([]byte, len(part.want))
				if err := part.buf.CopyToHost(got); err != nil {
					t.Fatal(err)
				}
				if string(got) != string(part.want) {
					t.Errorf("%v %s: device bytes differ from bench/ref's", c.f, part.name)
				}
			}
		}
	})
}

// Every format through the GEMV and the tensor-core kernel at the awkward shapes:
// batch 1, 3, 12, 17, 100, 256 (12 and 17 the tensor-core kernel's batch tiles of 16 and 32, k
// 4128 their staging rings wrapped); n 1, 7 and 4099 (one round of row pairs plus one); k from
// 32 to 4128 with groups that end exactly at k.
func TestLinearQuantFormats(t *testing.T) {
	forEachQuantLibrary(t, func(t *testing.T, dev *cgo.Device) {
		type shape struct {
			batch, n, k, g int
			variant        cgo.LinearVariant
		}
		small := []shape{{1, 7, 160, 32, cgo.LinearGEMV}, {3, 1, 32, 32, cgo.LinearAuto}, {17, 7, 4128, 32, cgo.LinearTiled},
			{12, 7, 4128, 32, cgo.LinearTiled}, // the batch tile of 16: a deeper ring, wrapped 2-3 times
			{100, 7, 192, 64, cgo.LinearTiled}, {256, 1, 256, 128, cgo.LinearAuto},
			// the GEMV with 2 warps a row pair (few pairs, k of several 32-vector columns): an odd
			// column count, a pair slot past the last pair, two batch tiles of 4
			{1, 7, 4128, 32, cgo.LinearGEMV}, {6, 13, 2080, 32, cgo.LinearGEMV}}
		formats := []cgo.WeightFormat{cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightINT8, cgo.WeightINT4, cgo.WeightINT4ZeroPt, cgo.WeightMXFP4, cgo.WeightFP8Block}
		for i, f := range formats {
			for j, s := range small {
				n, g := s.n, s.g
				if f == cgo.WeightINT4ZeroPt && n%2 == 1 {
					n++ // zero points come in row pairs
				}
				if !f.Grouped() {
					g = 0
				} else if f == cgo.WeightMXFP4 {
					g = 32
				}
				dt := cgo.DTypeBF16
				if (i+j)%2 == 1 {
					dt = cgo.DTypeFP16
				}
				if err := f.CheckShape(n, s.k, g); err != nil {
					t.Errorf("CheckShape refuses a shape the kernels take: %v", err)
				}
				t.Run(fmt.Sprintf("%v_%v_b%d_n%d_k%d_g%d_%s", f, dt, s.batch, n, s.k, g, s.variant), func(t *testing.T) {
					q, w, scales, zeros := fillQuant(t, dev, f, n, s.k, g, uint64(100+i*10+j), float32(1/math.Sqrt(float64(s.k))))
					got := runQuantLinear(t, dev, dt, f, s.batch, n, s.k, g, s.variant, w, scales, zeros, q, 1)
					// K split inside a block (the GEMV's warps of a pair, the tensor-core kernel's
					// warps) adds its sums in a fixed order: a second run is the same to the bit.
					again := runQuantLinear(t, dev, dt, f, s.batch, n, s.k, g, s.variant, w, scales, zeros, q, 1)
					for e := range got {
						if math.Float32bits(got[e]) != math.Float32bits(again[e]) {
							t.Fatalf("output %d is %g in one run, %g in the next", e, got[e], again[e])
						}
					}
				})
			}
		}
		// fp8-block across tiles of rows and of k: every tile whole (n 256, k 256 / 1024) or the
		// last of a row or a column partial (n 130, 4099; k 144, 272, 4128), through both kernels.
		for _, c := range []struct {
			batch, n, k int
			variant     cgo.LinearVariant
		}{{1, 130, 272, cgo.LinearGEMV}, {3, 256, 256, cgo.LinearGEMV}, {12, 130, 4128, cgo.LinearTiled},
			{17, 256, 1024, cgo.LinearTiled}, {100, 7, 144, cgo.LinearTiled}, {1, 4099, 4128, cgo.LinearGEMV}} {
			t.Run(fmt.Sprintf("fp8-block_b%d_n%d_k%d_%s", c.batch, c.n, c.k, c.variant), func(t *testing.T) {
				q, w, scales, zeros := fillQuant(t, dev, cgo.WeightFP8Block, c.n, c.k, 0, uint64(c.n+c.k), float32(1/math.Sqrt(float64(c.k))))
				runQuantLinear(t, dev, cgo.DTypeFP16, cgo.WeightFP8Block, c.batch, c.n, c.k, 0, c.variant, w, scales, zeros, q, 1)
			})
		}
		// The large n: row pairs past a round of resident warps, once per kernel family.
		for _, c := range []struct {
			f       cgo.WeightFormat
			batch   int
			k, g    int
			variant cgo.LinearVariant
		}{{cgo.WeightINT4, 1, 4096, 128, cgo.LinearGEMV}, {cgo.WeightFP8, 3, 1024, 0, cgo.LinearGEMV}, {cgo.WeightMXFP4, 17, 256, 32, cgo.LinearTiled}} {
			t.Run(fmt.Sprintf("%v_b%d_n4099_k%d", c.f, c.batch, c.k), func(t *testing.T) {
				q, w, scales, zeros := fillQuant(t, dev, c.f, 4099, c.k, c.g, 7, 0.03)
				runQuantLinear(t, dev, cgo.DTypeBF16, c.f, c.batch, 4099, c.k, c.g, c.variant, w, scales, zeros, q, 1)
			})
		}
	})
}

// extremes: hand-written bytes with every code of each format, the largest and smallest scales
// it has and, for int4 with zero points, zero points 0 and 15 (so that u - z runs from -15 to
// 15), through both kernels.
func TestLinearQuantExtremes(t *testing.T) {
	forEachQuantLibrary(t, func(t *testing.T, dev *cgo.Device) {
		const n, k = 4, 256
		put := func(b *cgo.Buffer, bytes []byte) {
			if err := b.CopyFromHost(bytes); err != nil {
				t.Fatal(err)
			}
		}
		f32s := func(v ...float32) []byte {
			out := []byte{}
			for _, x := range v {
				b := math.Float32bits(x)
				out = append(out, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
			}
			return out
		}
		type extreme struct {
			name   string
			q      ref.QuantWeights
			scaleX float32
		}
		var cases []extreme
		// fp8: row r holds every code (from r), the NaN codes 0x7F/0xFF replaced by -0 and +-448.
		fp8 := ref.QuantWeights{Format: cgo.WeightFP8, N: n, K: k, W: make([]byte, n*k), Scales: f32s(1, 0x1p-20, 3.5, -1)}
		for r := range n {
			for c := range k {
				b := byte(c + 64*r)
				if b&0x7F == 0x7F {
					b = []byte{0x80, 0x7E, 0xFE, 0x01}[r]
				}
				fp8.W[r*k+c] = b
			}
		}
		cases = append(cases, extreme{"fp8 every code", fp8, 1})
		// fp8-block: the same codes under one scale per 128 x 128 tile (here 1 x 2 tiles), a large
		// and a tiny negative one, so that a scale taken from the wrong tile shows.
		block := fp8
		block.Format, block.Scales = cgo.WeightFP8Block, f32s(0x1p10, -0x1p-12)
		cases = append(cases, extreme{"fp8-block every code", block, 1})
		int8w := ref.QuantWeights{Format: cgo.WeightINT8, N: n, K: k, W: make([]byte, n*k), Scales: f32s(1, 1e-6, 100, -0.5)}
		for i := range int8w.W {
			int8w.W[i] = byte(i * 7)
		}
		cases = append(cases, extreme{"int8 every code", int8w, 1})
		// int4 with zero points: fp16 scales up to 65504 and down to 2^-24 (the smallest subnormal).
		zp := ref.QuantWeights{Format: cgo.WeightINT4ZeroPt, N: n, K: k, GroupSize: 32, W: make([]byte, n*k/2)}
		for i := range zp.W {
			zp.W[i] = byte(i*37) ^ byte(i>>3)
		}
		fp16s := []uint16{ref.FP16FromFloat32(65504), 0x0001, ref.FP16FromFloat32(-1), ref.FP16FromFloat32(0.25)}
		for j := 0; j < n*k/32; j++ {
			s := fp16s[(j/(k/32)+j)%4]
			zp.Scales = append(zp.Scales, byte(s), byte(s>>8))
		}
		for j := 0; j < n/2*k/32; j++ {
			zp.Zeros = append(zp.Zeros, []byte{0x0F, 0xF0, 0x00, 0xFF, 0x87}[j%5])
		}
		cases = append(cases, extreme{"int4-zp zero points 0 and 15", zp, 0x1p-6})
		// mxfp4: every code, scales 2^-127 (e8m0 0), 2^0 and 2^127 (254) in separate calls, each
		// with activations that keep the outputs finite.
		for _, e := range []struct {
			byte   byte
			scaleX float32
		}{{0, 0x1p100}, {127, 1}, {254, 0x1p-120}} {
			mx := ref.QuantWeights{Format: cgo.WeightMXFP4, N: n, K: k, W: make([]byte, n*k/2), Scales: make([]byte, n*k/32)}
			for i := range mx.W {
				mx.W[i] = byte(i) | byte(i*3)<<4
			}
			for j := range mx.Scales {
				mx.Scales[j] = e.byte
			}
			cases = append(cases, extreme{fmt.Sprintf("mxfp4 every code, e8m0 %d", e.byte), mx, e.scaleX})
		}
		for _, c := range cases {
			for _, variant := range []cgo.LinearVariant{cgo.LinearGEMV, cgo.LinearTiled} {
				t.Run(fmt.Sprintf("%s_%s", c.name, variant), func(t *testing.T) {
					l := c.q.Format.Layout(n, k, c.q.GroupSize)
					w, scales, zeros := quantBuffers(t, dev, l)
					put(w, c.q.W)
					put(scales, c.q.Scales)
					if zeros != nil {
						put(zeros, c.q.Zeros)
					}
					runQuantLinear(t, dev, cgo.DTypeBF16, c.q.Format, 3, n, k, c.q.GroupSize, variant, w, scales, zeros, c.q, c.scaleX)
				})
			}
		}
	})
}

// NaN never passes: a NaN e8m0 scale (255) makes NaN outputs that the comparison fails, and the
// fill refuses a NaN, infinite or zero scale (and fp16 overflow) before writing anything.
func TestLinearQuantNaN(t *testing.T) {
	forEachQuantLibrary(t, func(t *testing.T, dev *cgo.Device) {
		const n, k, batch = 2, 64, 1
		l := cgo.WeightMXFP4.Layout(n, k, 32)
		w, scales, _ := quantBuffers(t, dev, l)
		if err := w.CopyFromHost(make([]byte, l.WBytes)); err != nil {
			t.Fatal(err)
		}
		if err := scales.CopyFromHost([]byte{127, 255, 127, 127}); err != nil {
			t.Fatal(err)
		}
		x, y := mustAlloc(t, dev, 2*batch*k), mustAlloc(t, dev, 2*batch*n)
		if err := x.FillHash(cgo.DTypeBF16, batch*k, 1, 1); err != nil {
			t.Fatal(err)
		}
		for _, variant := range []cgo.LinearVariant{cgo.LinearGEMV, cgo.LinearTiled} {
			if err := y.Memset(0); err != nil {
				t.Fatal(err)
			}
			p := cgo.LinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, Batch: batch, N: n, K: k, DType: cgo.DTypeBF16, Variant: variant,
				Scales: scales.Ptr, WeightFormat: cgo.WeightMXFP4, GroupSize: 32}
			if err := dev.Linear(p); err != nil {
				t.Fatal(err)
			}
			raw := make([]uint16, n)
			if err := cgo.Read(y, raw); err != nil {
				t.Fatal(err)
			}
			if got := ref.BF16ToFloat32(raw[0]); !math.IsNaN(float64(got)) {
				t.Errorf("%s: row 0 (a NaN scale in its second group) = %v, want NaN", variant, got)
			}
			if got := ref.BF16ToFloat32(raw[1]); got != 0 {
				t.Errorf("%s: row 1 (zero weights) = %v, want 0", variant, got)
			}
			want := ref.Linear(ref.LinearInputs{DType: ref.BF16, Batch: batch, N: n, K: k, SeedX: 1, ScaleX: 1,
				Weights: ref.QuantWeights{Format: cgo.WeightMXFP4, N: n, K: k, W: make([]byte, l.WBytes), Scales: []byte{127, 255, 127, 127}}})
			got := []float32{ref.BF16ToFloat32(raw[0]), ref.BF16ToFloat32(raw[1])}
			if c := ref.Compare(got, want.Want, want.ElementBounds(ref.BF16, k), 1); c.Passed {
				t.Errorf("%s: a NaN output passed the comparison", variant)
			}
		}
		for _, c := range []struct {
			f     cgo.WeightFormat
			scale float32
			want  string
		}{
			{cgo.WeightFP8, float32(math.NaN()), "scale=nan"}, {cgo.WeightINT8, float32(math.Inf(1)), "scale=inf"},
			{cgo.WeightINT4, 0, "scale=0"}, {cgo.WeightINT4, 1e5, "65504"}, {cgo.WeightMXFP4, 0x1p127, "outside 0..254"},
		} {
			wq, sq, zq := quantBuffers(t, dev, c.f.Layout(2, 128, c.f.DefaultGroupSize()))
			err := dev.FillQuantized(cgo.QuantFill{W: wq.Ptr, Scales: sq.Ptr, Zeros: ptrOf(zq), Format: c.f, N: 2, K: 128, GroupSize: c.f.DefaultGroupSize(), Seed: 1, Scale: c.scale})
			if !errors.Is(err, cgo.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("FillQuantized(%v, scale %v) = %v, want an invalid argument naming %q", c.f, c.scale, err, c.want)
			}
		}
	})
}

// Shapes a format does not take are refused by db_linear_plan, naming the format and the value.
func TestLinearQuantRefusals(t *testing.T) {
	forEachQuantLibrary(t, func(t *testing.T, dev *cgo.Device) {
		buf := mustAlloc(t, dev, 1<<16)
		for _, c := range []struct {
			f       cgo.WeightFormat
			n, k, g int
			variant cgo.LinearVariant
			splitK  int
			want    []string
		}{
			{cgo.WeightINT4, 8, 4128, 64, cgo.LinearAuto, 0, []string{"k=4128", "group_size 64", "int4"}},
			{cgo.WeightINT4, 8, 4128, 128, cgo.LinearAuto, 0, []string{"k=4128", "group_size 128"}},
			{cgo.WeightINT4ZeroPt, 7, 64, 32, cgo.LinearAuto, 0, []string{"n=7", "zero points"}},
			{cgo.WeightINT4, 8, 64, 48, cgo.LinearAuto, 0, []string{"group_size 32, 64 or 128, not 48"}},
			{cgo.WeightMXFP4, 8, 64, 64, cgo.LinearAuto, 0, []string{"mxfp4", "group_size 64"}},
			{cgo.WeightFP8Block, 8, 64, 64, cgo.LinearAuto, 0, []string{"128x128", "group_size 64"}},
			{cgo.WeightFP8Block, 8, 200, 0, cgo.LinearAuto, 0, []string{"k=200", "multiple of 16"}},
			{cgo.WeightFP8, 8, 24, 0, cgo.LinearAuto, 0, []string{"k=24", "multiple of 16"}},
			{cgo.WeightINT4, 8, 48, 32, cgo.LinearAuto, 0, []string{"k=48", "multiple of 32"}},
			{cgo.WeightINT8, 8, 64, 32, cgo.LinearAuto, 0, []string{"group_size=32"}},
			{cgo.WeightFP8, 8, 64, 0, cgo.LinearMMA, 0, []string{"variant mma", "fp8"}},
			{cgo.WeightFP8, 8, 64, 0, cgo.LinearGEMV, 2, []string{"split_k=2"}},
		} {
			zeros := uint64(0)
			if c.f == cgo.WeightINT4ZeroPt {
				zeros = buf.Ptr
			}
			p := cgo.LinearParams{X: buf.Ptr, W: buf.Ptr, Y: buf.Ptr, Scales: buf.Ptr, Zeros: zeros, Batch: 1, N: c.n, K: c.k,
				DType: cgo.DTypeBF16, Variant: c.variant, SplitK: c.splitK, WeightFormat: c.f, GroupSize: c.g}
			_, _, err := dev.LinearPlan(p)
			if goErr := c.f.CheckShape(c.n, c.k, c.g); (goErr == nil) != (c.variant != cgo.LinearAuto || c.splitK != 0) {
				t.Errorf("CheckShape(%v n %d k %d group %d) = %v: Go and db_linear_plan disagree on the shape", c.f, c.n, c.k, c.g, goErr)
			}
			if !errors.Is(err, cgo.ErrUnsupportedShape) {
				t.Errorf("LinearPlan(%v n %d k %d group %d) = %v, want ErrUnsupportedShape", c.f, c.n, c.k, c.g, err)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LinearPlan(%v n %d k %d group %d) = %q, want it to name %q", c.f, c.n, c.k, c.g, err, w)
				}
			}
		}
	})
}

// The fake library predates the formats: FillQuantized says what it lacks.
func TestLinearQuantFakeNotExported(t *testing.T) {
	lib, err := cgo.OpenPath(buildFake(t, fakeEmu))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := lib.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := dev.FillQuantized(cgo.QuantFill{Format: cgo.WeightFP8, N: 1, K: 16, Scale: 1}); !errors.Is(err, cgo.ErrNotExported) {
		t.Errorf("FillQuantized on the fake library = %v, want ErrNotExported", err)
	}
}
