package ref

import (
	"math"
	"testing"
)

// Known values of kernels/dbhash.h, computed once with gcc 12 (Debian 12.2.0) on x86-64 by a
// ten-line C program that includes dbhash.h and prints db_hash64 and the bits of
// db_hash_uniform for these (seed, index) pairs. The last index wraps the counter to zero.
var hashVectors = []struct {
	seed, index uint64
	hash        uint64
	uniform     uint32 // float32 bits
}{
	{0, 0, 0x5692161d100b05e5, 0xbea5b7a8},
	{0, 0x1, 0xdbd238973a2b148a, 0x3f37a470},
	{0, 0x2, 0x1e535eede31428f0, 0xbf435944},
	{0, 0x3e8, 0x7139bb2427627383, 0xbdec6450},
	{0, 0xffffffffffffffff, 0, 0xbf800000},
	{0x1, 0, 0x910a2dec89025cc1, 0x3e085168},
	{0x1, 0x1, 0x975835de1c9756ce, 0x3e3ac1a8},
	{0x1, 0x2, 0x1d0b14e4db018fed, 0xbf45e9d8},
	{0x1, 0x3e8, 0x533e00f7f3c606d4, 0xbeb30800},
	{0x1, 0xffffffffffffffff, 0xe220a8397b1dcdaf, 0x3f444150},
	{0x2a, 0, 0xb54b3c40881e2907, 0x3ed52cf0},
	{0x2a, 0x1, 0x2b3757448c2f7e6a, 0xbf299152},
	{0x2a, 0x2, 0x820c624f75598130, 0x3c831880},
	{0x2a, 0x3e8, 0x4c5001524bff659f, 0xbecebffc},
	{0x2a, 0xffffffffffffffff, 0x134f7096918175ce, 0xbf596120},
	{0xdeadbeefcafef00d, 0, 0xf1e3131019404b6f, 0x3f63c626},
	{0xdeadbeefcafef00d, 0x1, 0x1c3b2cf09325197a, 0xbf4789a8},
	{0xdeadbeefcafef00d, 0x2, 0x1ae67725c8775565, 0xbf4a3312},
	{0xdeadbeefcafef00d, 0x3e8, 0xebb5a3680435ea49, 0x3f576b46},
	{0xdeadbeefcafef00d, 0xffffffffffffffff, 0x0b2d9a9fefe259a1, 0xbf69a4cc},
}

func TestHashKnownValues(t *testing.T) {
	for _, v := range hashVectors {
		if got := Hash64(v.seed, v.index); got != v.hash {
			t.Errorf("Hash64(%#x, %#x) = %#016x, want %#016x", v.seed, v.index, got, v.hash)
		}
		if got := math.Float32bits(HashUniform(v.seed, v.index)); got != v.uniform {
			t.Errorf("HashUniform(%#x, %#x) bits = %#08x, want %#08x", v.seed, v.index, got, v.uniform)
		}
		if got := HashWord(v.seed, v.index); got != uint32(v.hash>>32) {
			t.Errorf("HashWord(%#x, %#x) = %#x, want %#x", v.seed, v.index, got, uint32(v.hash>>32))
		}
	}
}

func TestHashUniformRange(t *testing.T) {
	// Every value is m * 2^-23 for an integer m in [-2^23, 2^23): in [-1, 1) and exact.
	var sum float64
	const n = 1 << 16
	for i := uint64(0); i < n; i++ {
		u := HashUniform(7, i)
		if u < -1 || u >= 1 {
			t.Fatalf("HashUniform(7, %d) = %v, outside [-1, 1)", i, u)
		}
		if m := float64(u) * (1 << 23); m != math.Trunc(m) {
			t.Fatalf("HashUniform(7, %d) = %v is not a multiple of 2^-23", i, u)
		}
		sum += float64(u)
	}
	// A uniform variable on [-1, 1) has standard deviation 1/sqrt(3); the mean of n of them
	// has 0.577/256 = 0.0023. Five of those is a bug, not bad luck.
	if mean := sum / n; math.Abs(mean) > 5*0.0023 {
		t.Errorf("mean of %d uniforms = %v, want about 0", n, mean)
	}
}
