package ref

import (
	"encoding/binary"
	"math"

	"github.com/decodebench/decodebench/cgo"
)

// Quantized weights (kernels/decodebench.h, "quantized weight formats"): the exact float64
// value of every stored code, the bytes db_fill_quantized writes, and W's rows dequantised from
// either. Every format's value times its scale is exact in float64 (at most 4 + 11 significand
// bits, and an e8m0 scale is a power of two), so a reference built on these rows is exact on
// the weights: what it leaves to the tolerance is the kernel's fp32 accumulation, its
// multiplications by the scales and the output's rounding.

// E4M3 is the value of an OCP FP8 E4M3 ("e4m3fn") byte: sign, 4 exponent bits with bias 7, 3
// mantissa bits; exponent 0 is subnormal (m·2^-9), and 0x7F / 0xFF are NaN (no infinities).
// ±448 is the largest value, 2^-6 the smallest normal, 2^-9 the smallest subnormal.
func E4M3(b byte) float64 {
	e, m := int(b>>3)&15, float64(b&7)
	var v float64
	switch {
	case e == 15 && m == 7:
		return math.NaN()
	case e == 0:
		v = m * 0x1p-9
	default:
		v = math.Ldexp(1+m/8, e-7)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return v
}

// E2M1 is the value of an OCP FP4 E2M1 code (the low 4 bits of c): sign, 2 exponent bits with
// bias 1, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (-0 included).
func E2M1(c byte) float64 {
	e, m := int(c>>1)&3, float64(c&1)
	var v float64
	if e == 0 {
		v = m * 0.5
	} else {
		v = math.Ldexp(1+m/2, e-1)
	}
	if c&8 != 0 {
		v = -v
	}
	return v
}

// E8M0 is the value of an OCP E8M0 scale byte: 2^(e-127); 255 is NaN.
func E8M0(e byte) float64 {
	if e == 255 {
		return math.NaN()
	}
	return math.Ldexp(1, int(e)-127)
}

// QuantWeights is an N x K quantized W with its scales and zero points, in the layouts of
// decodebench.h: from db_fill_quantized (QuantFill.Weights) or written by hand (a test's
// extremes).
type QuantWeights struct {
	Format           cgo.WeightFormat
	N, K, GroupSize  int // GroupSize: the grouped formats' group (0 = 32 for mxfp4)
	W, Scales, Zeros []byte
}

func (q QuantWeights) group() int {
	if q.Format == cgo.WeightMXFP4 && q.GroupSize == 0 {
		return cgo.MXFP4Group
	}
	return q.GroupSize
}

// Row writes the dequantised row r of W (output channel r) into out[:K], exactly.
func (q QuantWeights) Row(r int, out []float64) {
	dequantRow(q.Format, q.K, q.group(), r, out,
		func(j uint64) byte { return q.W[j] },
		func(j uint64) []byte { return q.Scales[j*scaleBytes(q.Format):] },
		func(j uint64) byte { return q.Zeros[j] })
}

func scaleBytes(f cgo.WeightFormat) uint64 {
	switch f {
	case cgo.WeightINT4, cgo.WeightINT4ZeroPt:
		return 2
	case cgo.WeightMXFP4:
		return 1
	}
	return 4
}

// dequantRow is the one decoding of every format: row r of W from its bytes (wByte), scales
// (scaleAt: the bytes of scale j onwards) and zero points (zeroByte).
func dequantRow(f cgo.WeightFormat, k, group, r int, out []float64, wByte func(uint64) byte, scaleAt func(uint64) []byte, zeroByte func(uint64) byte) {
	base := uint64(r) * uint64(k)
	f32 := func(j uint64) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(scaleAt(j)))) }
	switch f {
	case cgo.WeightFP8Block:
		// One scale per 128 x 128 tile, row-major over ceil(n/128) x ceil(k/128) tiles.
		tiles := uint64((k + cgo.FP8Block - 1) / cgo.FP8Block)
		first := uint64(r/cgo.FP8Block) * tiles
		for c := range k {
			out[c] = E4M3(wByte(base+uint64(c))) * f32(first+uint64(c/cgo.FP8Block))
		}
		return
	case cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightINT8:
		channel := uint64(r)
		if f == cgo.WeightFP8Tensor {
			channel = 0 // one scale for the tensor
		}
		s := f32(channel)
		for c := range k {
			b := wByte(base + uint64(c))
			if f == cgo.WeightINT8 {
				out[c] = float64(int8(b)) * s
			} else {
				out[c] = E4M3(b) * s
			}
		}
		return
	}
	groups := uint64(k / group)
	for c := range k {
		b := wByte((base + uint64(c)) / 2)
		code := b & 15
		if c%2 == 1 {
			code = b >> 4
		}
		gi := uint64(r)*groups + uint64(c/group)
		switch f {
		case cgo.WeightMXFP4:
			out[c] = E2M1(code) * E8M0(scaleAt(gi)[0])
		case cgo.WeightINT4, cgo.WeightINT4ZeroPt:
			s := float64(FP16ToFloat32(binary.LittleEndian.Uint16(scaleAt(gi))))
			zero := 8.0
			if f == cgo.WeightINT4ZeroPt {
				z := zeroByte(uint64(r/2)*groups + uint64(c/group))
				zero = float64((z >> (4 * uint(r%2))) & 15)
			}
			out[c] = (float64(code) - zero) * s
		}
	}
}

// QuantFill is what db_fill_quantized is asked (cgo.QuantFill without the addresses): its
// bytes come from the hash, so a reference regenerates any row without the matrix.
type QuantFill struct {
	Format          cgo.WeightFormat
	N, K, GroupSize int
	Seed            uint64
	Scale           float32
}

func (q QuantFill) group() int {
	return QuantWeights{Format: q.Format, GroupSize: q.GroupSize}.group()
}

// WByte is byte j of W as db_fill_quantized writes it.
func (q QuantFill) WByte(j uint64) byte {
	if q.Format.FourBit() {
		return byte(Hash64(q.Seed, 2*j)>>60) | byte(Hash64(q.Seed, 2*j+1)>>60)<<4
	}
	b := byte(Hash64(q.Seed, j) >> 56)
	if (q.Format == cgo.WeightFP8 || q.Format == cgo.WeightFP8Tensor || q.Format == cgo.WeightFP8Block) && b&0x7F == 0x7F {
		b ^= 1 // the NaN codes become ±448
	}
	return b
}

// ScaleBits is the little-endian bytes of scale j.
func (q QuantFill) ScaleBits(j uint64) []byte {
	seed := Hash64(q.Seed, 1)
	switch q.Format {
	case cgo.WeightMXFP4:
		return []byte{byte(127 + math.Ilogb(float64(q.Scale)) - 2 + int(Hash64(seed, j)>>62))}
	case cgo.WeightINT4, cgo.WeightINT4ZeroPt:
		return binary.LittleEndian.AppendUint16(nil, FP16FromFloat32(float32(HashUniform(seed, j)*q.Scale)))
	}
	return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(HashUniform(seed, j)*q.Scale)))
}

// ZeroByte is byte j of the zero points (int4-zp).
func (q QuantFill) ZeroByte(j uint64) byte { return byte(Hash64(Hash64(q.Seed, 2), j) >> 56) }

// Row writes the dequantised row r of the filled W into out[:K].
func (q QuantFill) Row(r int, out []float64) {
	dequantRow(q.Format, q.K, q.group(), r, out, q.WByte, q.ScaleBits, q.ZeroByte)
}

// Weights gives the whole filled matrix's bytes, for a comparison with the device's buffers.
func (q QuantFill) Weights() QuantWeights {
	l := q.Format.Layout(q.N, q.K, q.group())
	out := QuantWeights{Format: q.Format, N: q.N, K: q.K, GroupSize: q.GroupSize,
		W: make([]byte, l.WBytes), Scales: make([]byte, 0, l.ScaleBytes), Zeros: make([]byte, l.ZeroBytes)}
	for j := range out.W {
		out.W[j] = q.WByte(uint64(j))
	}
	for j := uint64(0); uint64(len(out.Scales)) < l.ScaleBytes; j++ {
		out.Scales = append(out.Scales, q.ScaleBits(j)...)
	}
	for j := range out.Zeros {
		out.Zeros[j] = q.ZeroByte(uint64(j))
	}
	return out
}
