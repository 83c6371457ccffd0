package ref

import (
	"math"
	"testing"
)

func TestProbeReferences(t *testing.T) {
	var sum uint32
	for _, w := range FillWords(5, 1000) {
		sum += w
	}
	if got := ReadSum(5, 1000); got != sum {
		t.Errorf("ReadSum = %#x, want %#x", got, sum)
	}
	b, c := Fill(F32, 1, 1, 100), Fill(F32, 2, 1, 100)
	for i, a := range Triad(b, c, 2) {
		// With a power-of-two scalar the product is exact: fused and unfused agree.
		if unfused := float32(b[i] + float32(2*c[i])); a != unfused {
			t.Errorf("triad element %d = %v, unfused %v", i, a, unfused)
		}
	}
}

func TestFMA32(t *testing.T) {
	cases := []struct {
		desc    string
		x, y, z float32
		want    float32
	}{
		{"exact", 2, 3, 1, 7},
		{"one rounding, not two: 1 + 2^-24 + 2^-48", 1 + 0x1p-23, 0x1p-24, 1, 1 + 0x1p-23},
		// (1 + 2^-23)(64 - 2^-17) = 64 - 2^-40. Added to z = 2^30 + 128 (an odd float32), the
		// float64 sum rounds to the float32 midpoint z + 64, and rounding that to even would give
		// z + 128; the exact value is below the midpoint, so fmaf gives z.
		{"double rounding trap", 1 + 0x1p-23, 64 - 0x1p-17, 0x1p30 + 128, 0x1p30 + 128},
		{"subnormal result", 0x1p-100, 0x1p-40, 0, 0x1p-140},
		{"overflow", math.MaxFloat32, 2, 0, float32(math.Inf(1))},
		{"cancellation", 1 + 0x1p-23, 1 - 0x1p-23, -1, -0x1p-46},
	}
	for _, c := range cases {
		if got := FMA32(c.x, c.y, c.z); got != c.want {
			t.Errorf("%s: FMA32(%g, %g, %g) = %g, want %g", c.desc, c.x, c.y, c.z, got, c.want)
		}
	}
	naive := float32(math.FMA(1+0x1p-23, 64-0x1p-17, 0x1p30+128))
	if naive == 0x1p30+128 {
		t.Error("the double rounding trap does not trap: the test proves nothing")
	}
}

func TestComputeProbeReferences(t *testing.T) {
	// The FMA chains converge to add / (1 - mul) = 1 each: 8 in all, whatever the thread.
	for _, tid := range []int{0, 31, 255} {
		if got := FMAProbeResult(tid, 1000); math.Abs(float64(got)-8) > 1e-3 {
			t.Errorf("FMAProbeResult(%d, 1000) = %v, want about 8", tid, got)
		}
	}
	// One iteration: 8 mma of 16 products of about 2^-16 per accumulator, 16 accumulators.
	got, exact := MMAProbeResult(5, 1)
	if !exact || math.Abs(float64(got)-16*8*16*0x1p-16) > 0.1*16*8*16*0x1p-16 {
		t.Errorf("MMAProbeResult(5, 1) = %v (exact %v), want about %v", got, exact, 16*8*16*0x1p-16)
	}
	if _, exact := MMAProbeResult(5, 100); exact {
		t.Error("800 mma per accumulator claims to be exact")
	}
	// Lanes differ (lane%8 picks the fragment values), and lanes 32 apart agree.
	a, _ := MMAProbeResult(0, 1)
	b, _ := MMAProbeResult(7, 1)
	c, _ := MMAProbeResult(32, 1)
	if a == b || a != c {
		t.Errorf("lane 0 %v, lane 7 %v, thread 32 %v", a, b, c)
	}
}
