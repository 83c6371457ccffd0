// Package ref holds the float64 references that every kernel of decodebench is verified against,
// and the input hash of kernels/dbhash.h re-implemented bit for bit, so that inputs generated on
// the device never need to be copied back to build a reference.
//
// It is plain Go (no cgo): the references run anywhere, and the cgo package and the commands
// compare what a kernel wrote with what these functions compute.
package ref

// Hash64 is db_hash64 of kernels/dbhash.h: the splitmix64 finalizer of
// seed*0x9E3779B97F4A7C15 + index + 1, all arithmetic modulo 2^64.
func Hash64(seed, index uint64) uint64 {
	z := seed*0x9E3779B97F4A7C15 + index + 1
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// HashUniform is db_hash_uniform: the top 24 bits of Hash64 as a signed integer m in
// [-2^23, 2^23), times 2^-23. Every value is exactly representable in float32 and lies in
// [-1, 1).
func HashUniform(seed, index uint64) float32 {
	m := int32(Hash64(seed, index)>>40) - 1<<23
	return float32(m) * (1.0 / 8388608.0)
}

// HashWord is the 32-bit word db_fill_hash writes for DB_DTYPE_U32 and the WRITE probe writes:
// the top half of Hash64.
func HashWord(seed, index uint64) uint32 {
	return uint32(Hash64(seed, index) >> 32)
}
