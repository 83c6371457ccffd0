package ref

import (
	"fmt"
	"math"
)

// The fp8 e4m3 KV cache (DB_DTYPE_FP8_E4M3): one byte a element, S.EEEE.MMM with exponent bias
// 7, no infinities, S.1111.111 the only NaN; the largest magnitude is 448 (0x7e), the smallest
// subnormal 2^-9 (0x01). An element's value is its code's times the tensor's scale (k_scale for
// K, v_scale for V). The appends quantise x to the code of float32(x / scale), rounded to nearest
// even and saturated to +-448, as vLLM's fp8 cache does.
//
// Codes decode with E4M3 (quant.go), the one e4m3 decoder of the references, weights and caches
// alike; the encoder here is a search over the magnitudes, independent of the kernels' bits.

// E4M3MaxCode is the code of 448, the largest finite e4m3 value.
const E4M3MaxCode = 0x7e

// e4m3Values are the values of the codes 0..E4M3MaxCode, ascending.
var e4m3Values = func() [E4M3MaxCode + 1]float64 {
	var t [E4M3MaxCode + 1]float64
	for c := range t {
		t[c] = E4M3(uint8(c))
	}
	return t
}()

// E4M3Encode is x's e4m3 code: the nearest value (a tie to the even code, the one whose
// mantissa's last bit is 0), saturated to +-448; NaN gives 0x7f (with x's sign bit), an
// infinity +-448. A search over the 127 magnitudes, independent of the kernels' bit arithmetic.
func E4M3Encode(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	if x != x {
		return sign | 0x7f
	}
	a := math.Abs(float64(x))
	if a >= e4m3Values[E4M3MaxCode] {
		return sign | E4M3MaxCode
	}
	// the first code whose value is >= a; a lies in [values[c-1], values[c]]
	c := 1
	for e4m3Values[c] < a {
		c++
	}
	lo, hi := e4m3Values[c-1], e4m3Values[c]
	switch {
	case a-lo < hi-a:
		c--
	case a-lo == hi-a && (c-1)%2 == 0:
		c--
	}
	return sign | uint8(c)
}

// E4M3Quantize is the code db_kv_append writes for x in a cache of scale s: E4M3Encode of the
// float32 quotient x / s.
func E4M3Quantize(x, s float32) uint8 { return E4M3Encode(x / s) }

// ValidateE4M3Scale refuses a scale the fp8 cache cannot use (NaN, an infinity, <= 0).
func ValidateE4M3Scale(name string, s float32) error {
	if !(s > 0) || math.IsInf(float64(s), 0) {
		return fmt.Errorf("fp8 cache %s %g must be finite and > 0", name, s)
	}
	return nil
}

// E4M3Dequantize is the float32 values code * s the reference attention reads from an fp8 cache
// (the product rounded once to float32, 2^-24 relatively: far under the bounds' fp32 terms).
func E4M3Dequantize(codes []byte, s float32) []float32 {
	out := make([]float32, len(codes))
	for i, c := range codes {
		out[i] = float32(E4M3(c) * float64(s))
	}
	return out
}

// AppendKVE4M3 is AppendKV for an fp8 cache: each sequence's new K and V rows (kNew, vNew, the
// activations' values) are quantised with kScale and vScale into the code caches k and v.
func AppendKVE4M3(s AttentionShape, pageTable []int32, positions []int, k, v []byte, kNew, vNew []float32,
	kScale, vScale float32) error {
	if len(positions) != s.Batch {
		return fmt.Errorf("%d positions for a batch of %d", len(positions), s.Batch)
	}
	for b, p := range positions {
		if p < 0 || p >= s.SeqCapacity() {
			return fmt.Errorf("position %d of sequence %d outside the cache (capacity %d)", p, b, s.SeqCapacity())
		}
	}
	d := s.HeadDim
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.KVHeads; h++ {
			off := s.KVOffset(pageTable, b, h, positions[b])
			src := (b*s.KVHeads + h) * d
			for e := 0; e < d; e++ {
				k[off+e] = E4M3Quantize(kNew[src+e], kScale)
				v[off+e] = E4M3Quantize(vNew[src+e], vScale)
			}
		}
	}
	return nil
}

// E4M3Codes are n pseudo-random e4m3 codes from seed (ref.Hash64), none of them NaN: every
// finite code, both signs, subnormals and +-448 included, about equally often.
func E4M3Codes(seed uint64, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = E4M3Code(seed, uint64(i))
	}
	return out
}

// E4M3Code is element i of E4M3Codes(seed, ...).
func E4M3Code(seed, i uint64) uint8 {
	c := byte(Hash64(seed, i) >> 24)
	if c&0x7f == 0x7f {
		c ^= 1 // the NaN codes become +-448 (0x7e, 0xfe)
	}
	return c
}

// E4M3Within says whether code, in a cache of scale s, is what the quantisation of some value
// in [lo, hi] gives: the appended token's reference is a value with a bound (a rotated k), and
// the quantisation (float32 division, then the nearest code) is monotonic, so the code's value
// lies between those of lo's and hi's codes. A NaN code is never within.
func E4M3Within(code uint8, lo, hi float64, s float32) bool {
	v := E4M3(code)
	return v >= E4M3(E4M3Quantize(float32(lo), s)) && v <= E4M3(E4M3Quantize(float32(hi), s))
}
