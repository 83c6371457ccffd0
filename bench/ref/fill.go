package ref

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FillValue is element i of a buffer that db_fill_hash filled with a float dtype:
// round_to_dtype(db_hash_uniform(seed, i) * scale), the product taken in float32.
func FillValue(d DType, seed uint64, scale float32, i uint64) float32 {
	product := float32(HashUniform(seed, i) * scale) // float32() forbids fusing with what follows
	return Round(d, product)
}

// Fill gives the first n elements of a buffer that db_fill_hash filled with float dtype d,
// widened exactly to float32. Use FillWords for U32 buffers.
func Fill(d DType, seed uint64, scale float32, n int) []float32 {
	if d == U32 {
		panic("ref.Fill: U32 buffers hold words, not floats; use FillWords")
	}
	out := make([]float32, n)
	parallelRows(n, n, func(lo, hi int) { // a Llama-3-70B layer is 855M elements
		for i := lo; i < hi; i++ {
			out[i] = FillValue(d, seed, scale, uint64(i))
		}
	})
	return out
}

// FillWords gives the first n words of a buffer that db_fill_hash filled with DB_DTYPE_U32
// (also what the WRITE probe writes): HashWord(seed, i).
func FillWords(seed uint64, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = HashWord(seed, uint64(i))
	}
	return out
}

// FillBytes gives the exact little-endian bytes db_fill_hash writes for n elements of d, for
// a bit-for-bit comparison with a buffer copied back from the device.
func FillBytes(d DType, seed uint64, scale float32, n int) []byte {
	out := make([]byte, n*d.Bytes())
	for i := 0; i < n; i++ {
		switch d {
		case U32:
			binary.LittleEndian.PutUint32(out[4*i:], HashWord(seed, uint64(i)))
		case F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(FillValue(d, seed, scale, uint64(i))))
		case BF16:
			binary.LittleEndian.PutUint16(out[2*i:], BF16FromFloat32(FillValue(d, seed, scale, uint64(i))))
		case FP16:
			binary.LittleEndian.PutUint16(out[2*i:], FP16FromFloat32(FillValue(d, seed, scale, uint64(i))))
		}
	}
	return out
}

// Decode widens the little-endian elements of a float dtype in b to float32, exactly.
func Decode(d DType, b []byte) ([]float32, error) {
	size := d.Bytes()
	if d == U32 || size == 0 {
		return nil, fmt.Errorf("ref.Decode: %v is not a float dtype", d)
	}
	if len(b)%size != 0 {
		return nil, fmt.Errorf("ref.Decode: %d bytes is not a whole number of %v elements", len(b), d)
	}
	out := make([]float32, len(b)/size)
	for i := range out {
		switch d {
		case F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case BF16:
			out[i] = BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		case FP16:
			out[i] = FP16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
	return out, nil
}
