package ref

import (
	"fmt"
	"math"
)

// The fp8 e4m3 KV cache (DB_DTYPE_FP8_E4M3): one byte a element, S.EEEE.MMM with exponent bias
// 7, no infinities, S.1111.111 the only NaN; the largest magnitude is 448 (0x7e), the smallest
// subnormal 2^-9 (0x01). An element's value is its code's times the tensor's scale (k_scale for
// K, v_scale for V), or its KV head's where the cache has per-head scales (E4M3HeadScales). The
// appends quantise x to the code of float32(x / scale), rounded to nearest
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

// E4M3HeadScales is the scale each of kvHeads KV heads of an fp8 cache uses: its entry of
// perHead (db_kv_cache.k_scales or v_scales), or the tensor's scale where perHead is nil or the
// entry is 0.
func E4M3HeadScales(kvHeads int, tensor float32, perHead []float32) []float32 {
	out := make([]float32, kvHeads)
	for h := range out {
		out[h] = tensor
		if perHead != nil && perHead[h] != 0 {
			out[h] = perHead[h]
		}
	}
	return out
}

// ValidateE4M3HeadScales refuses per-head scales the fp8 cache cannot use: one a KV head, each
// 0 (the tensor's scale) or finite and > 0. The kernels do not read them on the host, so this
// is the callers' check.
func ValidateE4M3HeadScales(name string, kvHeads int, perHead []float32) error {
	if len(perHead) != kvHeads {
		return fmt.Errorf("fp8 cache %s: %d scales for %d KV heads (want one a KV head)", name, len(perHead), kvHeads)
	}
	for h, s := range perHead {
		if s != 0 {
			if err := ValidateE4M3Scale(fmt.Sprintf("%s[%d]", name, h), s); err != nil {
				return err
			}
		}
	}
	return nil
}

// E4M3SpreadScales are per-KV-head scales of very different sizes around base, for tests and
// verification: head h's is base * 2^((3h mod 5) - 2) (base/4 .. 4 base, neighbours a factor
// of 2 to 16 apart), except every head h = 2 mod 4, whose entry is 0 (it takes the tensor's
// scale). Reading a head's codes with another head's scale (the query head's index, K's and
// V's swapped, the next head's) moves its output far outside the bounds.
func E4M3SpreadScales(base float32, kvHeads int) []float32 {
	out := make([]float32, kvHeads)
	for h := range out {
		if h%4 != 2 {
			out[h] = base * float32(math.Ldexp(1, (3*h)%5-2))
		}
	}
	return out
}

// E4M3DequantizeHeads is E4M3Dequantize of a whole K or V cache of shape s whose KV head h has
// the scale scales[h] (E4M3HeadScales): the head of an element follows from the layout (rows
// of Capacity tokens a (sequence, head) contiguous, of PageSize tokens a (page, head) paged).
func E4M3DequantizeHeads(s AttentionShape, codes []byte, scales []float32) []float32 {
	rows := s.Capacity
	if s.Layout == KVPaged {
		rows = s.PageSize
	}
	block := rows * s.HeadDim
	out := make([]float32, len(codes))
	for i, c := range codes {
		out[i] = float32(E4M3(c) * float64(scales[(i/block)%s.KVHeads]))
	}
	return out
}

// AppendKVE4M3 is AppendKV for an fp8 cache: each sequence's new K and V rows (kNew, vNew, the
// activations' values) are quantised with kScale and vScale into the code caches k and v.
func AppendKVE4M3(s AttentionShape, pageTable []int32, positions []int, k, v []byte, kNew, vNew []float32,
	kScale, vScale float32) error {
	return AppendKVE4M3Heads(s, pageTable, positions, k, v, kNew, vNew,
		E4M3HeadScales(s.KVHeads, kScale, nil), E4M3HeadScales(s.KVHeads, vScale, nil))
}

// AppendKVE4M3Heads is AppendKVE4M3 with a scale a KV head (E4M3HeadScales): head h's rows are
// quantised with kScales[h] and vScales[h].
func AppendKVE4M3Heads(s AttentionShape, pageTable []int32, positions []int, k, v []byte, kNew, vNew []float32,
	kScales, vScales []float32) error {
	if len(kScales) != s.KVHeads || len(vScales) != s.KVHeads {
		return fmt.Errorf("%d K and %d V scales for %d KV heads", len(kScales), len(vScales), s.KVHeads)
	}
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
				k[off+e] = E4M3Quantize(kNew[src+e], kScales[h])
				v[off+e] = E4M3Quantize(vNew[src+e], vScales[h])
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
