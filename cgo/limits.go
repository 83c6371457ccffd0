package cgo

// #include "shim.h"
import "C"

// The kernels' shape limits, as kernels/decodebench.h defines them: the one definition, read
// here so that every Go check (measure, sweep, the commands) refuses what the kernels refuse,
// with the same numbers, before any device work.
const (
	MaxBatch        = int(C.DB_MAX_BATCH)         // sequences of one linear, attention or KV append call
	LinearKMultiple = int(C.DB_LINEAR_K_MULTIPLE) // linear K is a multiple of this (16-byte row vectors)
	MaxSplitK       = int(C.DB_MAX_SPLIT_K)       // K splits of the GEMV linear
	MaxSplits       = int(C.DB_MAX_SPLITS)        // KV splits of one attention sequence
	MinPageSize     = int(C.DB_MIN_PAGE_SIZE)     // tokens per page of a paged KV cache, a power of two
	MaxPageSize     = int(C.DB_MAX_PAGE_SIZE)
)

// AttentionHeadDims are the head dims the attention kernels are compiled for, smallest first.
var AttentionHeadDims = []int{int(C.DB_HEAD_DIM_0), int(C.DB_HEAD_DIM_1), int(C.DB_HEAD_DIM_2), int(C.DB_HEAD_DIM_3), int(C.DB_HEAD_DIM_4)}

// numHeadDims is DB_NUM_HEAD_DIMS, which a test holds AttentionHeadDims to.
const numHeadDims = int(C.DB_NUM_HEAD_DIMS)

// ValidPageSize reports whether the kernels take pages of n tokens.
func ValidPageSize(n int) bool { return n >= MinPageSize && n <= MaxPageSize && n&(n-1) == 0 }

// IsAttentionHeadDim reports whether the attention kernels are compiled for head dim d.
func IsAttentionHeadDim(d int) bool {
	for _, x := range AttentionHeadDims {
		if x == d {
			return true
		}
	}
	return false
}
