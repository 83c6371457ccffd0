package ref

import (
	"math"
	"os"
	"sort"
	"testing"
)

// slowRound is an independent reference for rounding float32 to a 16-bit type: among the
// finite values of the type (given sorted and non-negative, with the bit pattern of each),
// pick the nearest; on a tie pick the one whose pattern is even. The value one step past the
// largest finite one stands for infinity, as IEEE's rule for overflow says (a value rounds to
// infinity when it is at least half a step past the largest finite value).
func slowRound(values []float64, patterns []uint16, f float32) uint16 {
	x := math.Abs(float64(f))
	sign := uint16(0)
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	i := sort.SearchFloat64s(values, x) // values[i-1] < x <= values[i]
	if i == len(values) {
		return sign | patterns[len(patterns)-1] // beyond the stand-in for infinity
	}
	if values[i] == x || i == 0 {
		return sign | patterns[i]
	}
	lo, hi := values[i-1], values[i]
	switch dlo, dhi := x-lo, hi-x; {
	case dlo < dhi:
		return sign | patterns[i-1]
	case dhi < dlo:
		return sign | patterns[i]
	case patterns[i-1]&1 == 0:
		return sign | patterns[i-1]
	default:
		return sign | patterns[i]
	}
}

// table16 lists the non-negative finite values of a 16-bit type in order, then infinity's
// pattern standing for the value one step past the largest finite one.
func table16(toFloat func(uint16) float32, inf uint16, pastMax float64) ([]float64, []uint16) {
	var values []float64
	var patterns []uint16
	for p := uint16(0); p < inf; p++ {
		values = append(values, float64(toFloat(p)))
		patterns = append(patterns, p)
	}
	return append(values, pastMax), append(patterns, inf)
}

var (
	fp16Values, fp16Patterns = table16(FP16ToFloat32, 0x7C00, 65536)
	bf16Values, bf16Patterns = table16(BF16ToFloat32, 0x7F80, 0x1p128)
)

// interestingFloat32s gives every midpoint between neighbouring values of a 16-bit type (the
// ties), one float32 step either side of it, and the type's own values.
func interestingFloat32s(values []float64) []float32 {
	var out []float32
	for i := 0; i+1 < len(values); i++ {
		v := float32(values[i])
		mid := float32((values[i] + values[i+1]) / 2) // exact: one more bit than the type
		out = append(out, v, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))))
	}
	return out
}

func checkAgainstSlow(t *testing.T, name string, fast func(float32) uint16, values []float64, patterns []uint16, inputs []float32) {
	t.Helper()
	bad := 0
	for _, f := range inputs {
		for _, x := range []float32{f, -f} {
			if math.IsNaN(float64(x)) {
				continue
			}
			if got, want := fast(x), slowRound(values, patterns, x); got != want {
				if bad++; bad <= 10 {
					t.Errorf("%s(%g [%#08x]) = %#04x, want %#04x", name, x, math.Float32bits(x), got, want)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
}

// stridedFloat32s samples the whole float32 bit space, NaNs included, with an odd stride.
func stridedFloat32s(stride uint32) []float32 {
	var out []float32
	for b := uint64(0); b < 1<<32; b += uint64(stride) {
		out = append(out, math.Float32frombits(uint32(b)))
	}
	return out
}

func TestFP16FromFloat32AgainstSlowReference(t *testing.T) {
	inputs := append(interestingFloat32s(fp16Values), stridedFloat32s(4099)...)
	checkAgainstSlow(t, "FP16FromFloat32", FP16FromFloat32, fp16Values, fp16Patterns, inputs)
}

func TestBF16FromFloat32AgainstSlowReference(t *testing.T) {
	inputs := append(interestingFloat32s(bf16Values), stridedFloat32s(4099)...)
	checkAgainstSlow(t, "BF16FromFloat32", BF16FromFloat32, bf16Values, bf16Patterns, inputs)
}

func TestSixteenBitRoundTrip(t *testing.T) {
	// Every non-NaN value of either type widens to float32 and rounds back to itself.
	for p := 0; p < 1<<16; p++ {
		h := uint16(p)
		if f := FP16ToFloat32(h); !math.IsNaN(float64(f)) {
			if back := FP16FromFloat32(f); back != h {
				t.Errorf("fp16 %#04x -> %g -> %#04x", h, f, back)
			}
		}
		if f := BF16ToFloat32(h); !math.IsNaN(float64(f)) {
			if back := BF16FromFloat32(f); back != h {
				t.Errorf("bf16 %#04x -> %g -> %#04x", h, f, back)
			}
		}
	}
}

func TestConversionEdgeCases(t *testing.T) {
	inf := float32(math.Inf(1))
	cases := []struct {
		desc string
		in   float32
		fp16 uint16
		bf16 uint16
	}{
		{"zero", 0, 0x0000, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{"one", 1, 0x3C00, 0x3F80},
		{"one third", 1.0 / 3, 0x3555, 0x3EAB},
		{"minus two", -2, 0xC000, 0xC000},
		{"fp16 max", 65504, 0x7BFF, 0x4780},
		{"just under fp16 overflow threshold", math.Nextafter32(65520, 0), 0x7BFF, 0x4780},
		{"fp16 overflow threshold 65520 (tie, to even = infinity)", 65520, 0x7C00, 0x4780},
		{"1e5 overflows fp16", 1e5, 0x7C00, 0x47C3},
		{"infinity", inf, 0x7C00, 0x7F80},
		{"minus infinity", -inf, 0xFC00, 0xFF80},
		{"float32 max overflows bf16", math.MaxFloat32, 0x7C00, 0x7F80},
		{"bf16 max", BF16ToFloat32(0x7F7F), 0x7C00, 0x7F7F},
		{"smallest fp16 normal 2^-14", 0x1p-14, 0x0400, 0x3880},
		{"largest fp16 subnormal", 1023 * 0x1p-24, 0x03FF, 0x3880},
		{"rounds up into the smallest fp16 normal", 1023.5 * 0x1p-24, 0x0400, 0x3880},
		{"smallest fp16 subnormal 2^-24", 0x1p-24, 0x0001, 0x3380},
		{"2^-25 ties to zero in fp16", 0x1p-25, 0x0000, 0x3300},
		{"just over 2^-25 rounds up to 2^-24", math.Nextafter32(0x1p-25, 1), 0x0001, 0x3300},
		{"1.5 * 2^-24 ties to even 2^-23", 1.5 * 0x1p-24, 0x0002, 0x33C0},
		{"2.5 * 2^-24 ties to even 2^-23", 2.5 * 0x1p-24, 0x0002, 0x3420},
		{"fp16 tie 1 + 2^-11 to even", 1 + 0x1p-11, 0x3C00, 0x3F80},
		{"fp16 tie 1 + 3*2^-11 to even", 1 + 3*0x1p-11, 0x3C02, 0x3F80},
		{"bf16 tie 1 + 2^-8 to even", 1 + 0x1p-8, 0x3C04, 0x3F80},
		{"bf16 tie 1 + 3*2^-8 to even", 1 + 3*0x1p-8, 0x3C0C, 0x3F82},
		{"float32 subnormal 2^-130 (bf16 subnormal 8 * 2^-133)", 0x1p-130, 0x0000, 0x0008},
		{"float32 subnormal under half bf16's smallest", 0x1p-135, 0x0000, 0x0000},
		{"float32 subnormal tie 1.5 * 2^-133 to even", 1.5 * 0x1p-133, 0x0000, 0x0002},
		{"smallest float32 subnormal", 0x1p-149, 0x0000, 0x0000},
	}
	for _, c := range cases {
		if got := FP16FromFloat32(c.in); got != c.fp16 {
			t.Errorf("%s: FP16FromFloat32(%g) = %#04x, want %#04x", c.desc, c.in, got, c.fp16)
		}
		if got := BF16FromFloat32(c.in); got != c.bf16 {
			t.Errorf("%s: BF16FromFloat32(%g) = %#04x, want %#04x", c.desc, c.in, got, c.bf16)
		}
	}
}

func TestNaNStaysNaN(t *testing.T) {
	for _, bits := range []uint32{0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF} {
		f := math.Float32frombits(bits)
		if h := FP16FromFloat32(f); h&0x7C00 != 0x7C00 || h&0x03FF == 0 || h&0x0200 == 0 || h>>15 != uint16(bits>>31) {
			t.Errorf("FP16FromFloat32(NaN %#08x) = %#04x, want a quiet NaN of the same sign", bits, h)
		}
		if h := BF16FromFloat32(f); h&0x7F80 != 0x7F80 || h&0x0040 == 0 || h>>15 != uint16(bits>>31) {
			t.Errorf("BF16FromFloat32(NaN %#08x) = %#04x, want a quiet NaN of the same sign", bits, h)
		}
		if !math.IsNaN(float64(FP16ToFloat32(FP16FromFloat32(f)))) || !math.IsNaN(float64(BF16ToFloat32(BF16FromFloat32(f)))) {
			t.Errorf("NaN %#08x does not survive a round trip", bits)
		}
	}
}

// TestFP16ExhaustiveAgainstGCC converts all 2^32 float32 bit patterns and compares an FNV-1a
// digest of the results with the one gcc 12's _Float16 conversion (libgcc __truncsfhf2,
// round to nearest even, quiet NaNs keeping their payload) gave on x86-64: a C loop
// `h = (h ^ (uint16_t)(_Float16)f) * 1099511628211` from h = 1469598103934665603, which took
// 4 minutes there. Here it takes about 12 s, so it runs only when DECODEBENCH_EXHAUSTIVE=1.
func TestFP16ExhaustiveAgainstGCC(t *testing.T) {
	if os.Getenv("DECODEBENCH_EXHAUSTIVE") != "1" {
		t.Skip("set DECODEBENCH_EXHAUSTIVE=1 to convert all 2^32 float32 values")
	}
	h := uint64(1469598103934665603)
	for b := uint64(0); b < 1<<32; b++ {
		h = (h ^ uint64(FP16FromFloat32(math.Float32frombits(uint32(b))))) * 1099511628211
	}
	const want = 0xf206fdd6a2280383
	if h != want {
		t.Errorf("digest of all conversions = %016x, gcc's = %016x", h, uint64(want))
	}
}
