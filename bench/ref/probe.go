package ref

import (
	"math"
	"math/big"
)

// References of the probes of kernels/bandwidth.cu (db_probe in decodebench.h). The memory
// probes move or combine words, so they are checked exactly; the compute probes run fixed
// chains that are computed here exactly as the kernels define them.

// ReadSum is what the READ probe writes to result[0] after reading words words of a buffer
// filled by db_fill_hash with DB_DTYPE_U32 and seed: the uint32 wrap-around sum of
// HashWord(seed, i), which is exact in any order.
func ReadSum(seed uint64, words uint64) uint32 {
	var sum uint32
	for i := uint64(0); i < words; i++ {
		sum += HashWord(seed, i)
	}
	return sum
}

// WriteWord is the WRITE probe's word i (db_write_word in kernels/dbhash.h): a Weyl sequence,
// one multiply-add a word, so that the probe measures stores and not integer arithmetic.
func WriteWord(seed, i uint64) uint32 { return uint32(seed) + uint32(i)*0x9E3779B9 }

// WriteWords is what the WRITE probe leaves in a buffer of n words.
func WriteWords(seed uint64, n int) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = WriteWord(seed, uint64(i))
	}
	return w
}

// FMA32 is C's fmaf: x·y + z rounded once to float32, to nearest even.
func FMA32(x, y, z float32) float32 {
	// x·y is exact in float64, so math.FMA rounds only once, to float64; rounding that to
	// float32 again is right unless the float64 result is itself a float32 midpoint (a tie that
	// the exact value may not be), or lies where float32 is subnormal. Those few go through
	// big.Float, exactly.
	r := math.FMA(float64(x), float64(y), float64(z))
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return float32(r)
	}
	const dropped = 52 - 23 // float64 significand bits that float32 drops
	if math.Abs(r) >= 0x1p-126 && math.Float64bits(r)&(1<<dropped-1) != 1<<(dropped-1) {
		return float32(r)
	}
	var p, s big.Float
	p.SetPrec(1024).SetFloat64(float64(x)).Mul(&p, new(big.Float).SetFloat64(float64(y)))
	s.SetPrec(1024).Add(&p, new(big.Float).SetFloat64(float64(z)))
	f, _ := s.Float32()
	return f
}

// TriadElement is the TRIAD probe's a[i] = b[i] + scalar·c[i], computed as the kernel does:
// fmaf(scalar, c, b), one rounding.
func TriadElement(b, c, scalar float32) float32 { return FMA32(scalar, c, b) }

// Triad applies TriadElement to every element.
func Triad(b, c []float32, scalar float32) []float32 {
	out := make([]float32, len(b))
	for i := range out {
		out[i] = TriadElement(b[i], c[i], scalar)
	}
	return out
}

// The compute probes' chains, as kernels/bandwidth.cu defines them (keep in step):
const (
	FMAChains = 8  // kFmaChains: independent chains per thread
	FMASteps  = 16 // kFmaSteps: chain steps per loop trip
	MMAChains = 4  // kMmaChains: accumulators per warp
	MMASteps  = 8  // kMmaSteps: mma.sync per accumulator per loop trip
)

// FMAProbeResult is what the FMA_F32 probe writes for the thread with index threadIdx in its
// block: chain j starts at float32(threadIdx + j) · 1e-3, takes iterations·FMASteps steps of
// x = fmaf(x, 0.999, 0.001), and the chains are summed in float32 in order. Both the GPU and the
// emulator round every step the same way, so this is exact.
func FMAProbeResult(threadIdx, iterations int) float32 {
	const mul, add float32 = 0.999, 0.001
	var total float32
	for j := 0; j < FMAChains; j++ {
		x := float32(float32(threadIdx+j) * float32(1e-3))
		for range iterations * FMASteps {
			x = FMA32(x, mul, add)
		}
		total = float32(total + x)
	}
	return total
}

// MMAProbeResult is what the MMA_BF16 probe writes for the thread with index threadIdx in its
// block (a multiple of 32 threads per block). Each lane fills its A and B fragments with the
// bf16 value e(lane) = (128 + lane%8)·2^-15; by the m16n8k16 fragment layouts,
//
//	A[m][k] = e(4·(m%8) + (k%8)/2),  B[k][n] = e(4·n + (k%8)/2),
//
// and the lane's four accumulators are D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1] with
// g = lane/4, t = lane%4, each grown by (A·B)[m][n] per mma, iterations·MMASteps times. The
// thread writes Σ over the MMAChains accumulator sets of (((c0 + c1) + c2) + c3), in float32.
//
// Every product is a multiple of 2^-30 and, while an accumulator stays under 2^-6 (under 64
// mma), every partial sum is exact in float32 whatever order or rounding the tensor core uses:
// exact reports whether the result is therefore exact. Past that the hardware's accumulation
// (which truncates) and the emulator's may differ from this float64 value in the last bits.
func MMAProbeResult(threadIdx, iterations int) (result float32, exact bool) {
	lane := threadIdx % 32
	e := func(l int) float64 { return float64(128+l%8) * 0x1p-15 }
	dot := func(m, n int) float64 {
		var s float64
		for k := 0; k < 16; k++ {
			s += e(4*(m%8)+(k%8)/2) * e(4*n+(k%8)/2)
		}
		return s
	}
	mmas := iterations * MMASteps
	g, t := lane/4, lane%4
	acc := [4]float32{
		float32(float64(mmas) * dot(g, 2*t)),
		float32(float64(mmas) * dot(g, 2*t+1)),
		float32(float64(mmas) * dot(g+8, 2*t)),
		float32(float64(mmas) * dot(g+8, 2*t+1)),
	}
	var total float32
	for range MMAChains {
		total = float32(total + float32(float32(float32(acc[0]+acc[1])+acc[2])+acc[3]))
	}
	maxDot := 16 * e(7) * e(7)
	return total, float64(mmas)*maxDot < 0x1p-6
}
