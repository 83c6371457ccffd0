package cgo

import (
	"slices"
	"testing"
)

// AttentionHeadDims lists as many head dims as decodebench.h says it defines, in order.
func TestAttentionHeadDimsMatchTheHeader(t *testing.T) {
	if len(AttentionHeadDims) != numHeadDims || !slices.IsSorted(AttentionHeadDims) {
		t.Errorf("AttentionHeadDims %v: want the %d DB_HEAD_DIM_i of decodebench.h, smallest first", AttentionHeadDims, numHeadDims)
	}
	if MaxBatch != 1024 || LinearKMultiple != 8 || !ValidPageSize(16) || ValidPageSize(24) || ValidPageSize(512) {
		t.Errorf("limits: batch %d, k multiple %d, page sizes %d..%d", MaxBatch, LinearKMultiple, MinPageSize, MaxPageSize)
	}
}
