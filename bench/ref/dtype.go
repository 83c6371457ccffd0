package ref

import (
	"fmt"
	"math"
)

// DType is an element type of device buffers. The values are those of the DB_DTYPE_* enum in
// kernels/decodebench.h, so a DType converts to the C value without a table.
type DType int32

const (
	F32  DType = 0 // IEEE binary32
	BF16 DType = 1 // bfloat16: 8 exponent bits, 7 stored significand bits
	FP16 DType = 2 // IEEE binary16: 5 exponent bits, 10 stored significand bits
	U32  DType = 3 // raw 32-bit words (bandwidth probes)
)

// String gives the name the command line uses: f32, bf16, fp16, u32.
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case FP16:
		return "fp16"
	case U32:
		return "u32"
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Bytes is the size of one element.
func (d DType) Bytes() int {
	switch d {
	case BF16, FP16:
		return 2
	case F32, U32:
		return 4
	}
	return 0
}

// ParseDType accepts the names String gives (and fp32/float32/float16/bfloat16/uint32).
func ParseDType(s string) (DType, error) {
	switch s {
	case "f32", "fp32", "float32":
		return F32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp16", "f16", "float16", "half":
		return FP16, nil
	case "u32", "uint32":
		return U32, nil
	}
	return 0, fmt.Errorf("unknown dtype %q (want f32, bf16, fp16 or u32)", s)
}

// UnitRoundoff is the largest relative error of rounding a float32 to d to nearest:
// 2^-p for a significand of p bits (the implicit bit included). bf16 has p = 8, fp16 p = 11,
// f32 p = 24. (Subnormal results can be off by more, relatively: half their spacing.)
func (d DType) UnitRoundoff() float64 {
	switch d {
	case BF16:
		return 0x1p-8
	case FP16:
		return 0x1p-11
	case F32:
		return 0x1p-24
	}
	return 0
}

// Quiet NaNs keep the sign and the top bits of the payload and set the quiet bit, as x86's
// F16C and AVX512-BF16 conversions and gcc's _Float16 do. Hash fills never produce a NaN; the
// choice only matters for the conversion tests.

// BF16FromFloat32 rounds f to bfloat16, to nearest, ties to even. Values beyond the largest
// bfloat16 round to infinity; float32 subnormals round like any other value (bfloat16 has
// float32's exponent range, so its subnormals are float32's with a shorter significand).
func BF16FromFloat32(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7FFFFFFF > 0x7F800000 { // NaN
		return uint16(bits>>16) | 0x0040
	}
	// Adding 0x7FFF plus the lowest kept bit rounds half to even; a carry out of the
	// significand bumps the exponent, and out of the largest finite value gives infinity.
	bits += 0x7FFF + (bits>>16)&1
	return uint16(bits >> 16)
}

// BF16ToFloat32 widens a bfloat16 exactly.
func BF16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// FP16FromFloat32 rounds f to IEEE binary16, to nearest, ties to even: values from 65520 up
// (half-way past the largest finite 65504) become infinity, values under 2^-14 become
// subnormals (multiples of 2^-24), and values at most 2^-25 become (signed) zero.
func FP16FromFloat32(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	abs := bits & 0x7FFFFFFF
	switch {
	case abs > 0x7F800000: // NaN: keep the top 10 payload bits, set the quiet bit
		return sign | 0x7E00 | uint16(abs>>13)&0x03FF
	case abs >= 0x477FF000: // >= 65520 (and infinity): rounds to infinity
		return sign | 0x7C00
	case abs >= 0x38800000: // >= 2^-14: normal
		// Rebias the exponent (127 -> 15), then round the 13 dropped bits half to even.
		// A carry out of the significand moves to the next exponent, which is what rounding
		// should do; 0x477FF000 above keeps it from reaching infinity unexpectedly.
		abs -= (127 - 15) << 23
		abs += 0x0FFF + (abs>>13)&1
		return sign | uint16(abs>>13)
	case abs > 0x33000000: // (2^-25, 2^-14): subnormal, a multiple of 2^-24
		// Make the implicit bit explicit and shift so that 2^-24 is the unit of the result.
		exp := abs >> 23
		mant := abs&0x007FFFFF | 0x00800000
		shift := 126 - exp // value = mant * 2^(exp-150); unit 2^-24 => shift by 126-exp (14..24)
		half := uint32(1) << (shift - 1)
		q := mant >> shift
		rem := mant & (uint32(1)<<shift - 1)
		if rem > half || (rem == half && q&1 == 1) {
			q++ // may carry into 0x0400, the smallest normal: also right
		}
		return sign | uint16(q)
	default: // <= 2^-25: ties to even give zero at exactly 2^-25
		return sign
	}
}

// FP16ToFloat32 widens a binary16 exactly.
func FP16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	mant := uint32(h) & 0x03FF
	switch {
	case exp == 0x1F: // infinity or NaN; the payload moves to the top of float32's
		return math.Float32frombits(sign | 0x7F800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant * 2^-24, exact in float32.
	f := float32(mant) * 0x1p-24
	if sign != 0 {
		f = -f
	}
	return f
}

// Round rounds f to d and widens it back: the value a buffer of d holds after storing f.
// F32 and U32 return f unchanged.
func Round(d DType, f float32) float32 {
	switch d {
	case BF16:
		return BF16ToFloat32(BF16FromFloat32(f))
	case FP16:
		return FP16ToFloat32(FP16FromFloat32(f))
	}
	return f
}
