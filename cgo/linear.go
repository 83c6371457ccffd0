package cgo

// #include "shim.h"
import "C"

import (
	"fmt"
	"strings"
)

// LinearVariant is a DB_LINEAR_* kernel choice.
type LinearVariant int32

const (
	LinearAuto  LinearVariant = C.DB_LINEAR_AUTO  // chosen by batch: gemv to 4, mma to 16, tiled above
	LinearGEMV  LinearVariant = C.DB_LINEAR_GEMV  // CUDA-core GEMV, small batches, optional split-K
	LinearMMA   LinearVariant = C.DB_LINEAR_MMA   // tensor-core skinny GEMM, mma.sync m16n8k16
	LinearTiled LinearVariant = C.DB_LINEAR_TILED // tensor-core GEMM, shared-memory tiles by cp.async, split-K
	// LinearCUBLAS is cuBLASLt, opened at run time by the CUDA library: the peer our kernels are
	// timed against. Its plan fails with ErrUnsupportedShape on the emulator or without libcublasLt.
	LinearCUBLAS LinearVariant = C.DB_LINEAR_CUBLAS
)

// linearVariants in the order help texts list them.
var linearVariants = []struct {
	v    LinearVariant
	name string
}{{LinearAuto, "auto"}, {LinearGEMV, "gemv"}, {LinearMMA, "mma"}, {LinearTiled, "tiled"}, {LinearCUBLAS, "cublas"}}

// Valid reports whether v is one of the DB_LINEAR_* variants.
func (v LinearVariant) Valid() bool {
	for _, lv := range linearVariants {
		if lv.v == v {
			return true
		}
	}
	return false
}

func (v LinearVariant) String() string {
	for _, lv := range linearVariants {
		if lv.v == v {
			return lv.name
		}
	}
	return fmt.Sprintf("variant(%d)", int32(v))
}

// ParseLinearVariant accepts auto, gemv, mma, tiled or cublas.
func ParseLinearVariant(s string) (LinearVariant, error) {
	names := make([]string, len(linearVariants))
	for i, lv := range linearVariants {
		if s == lv.name {
			return lv.v, nil
		}
		names[i] = lv.name
	}
	return 0, fmt.Errorf("unknown linear variant %q (want %s)", s, strings.Join(names, ", "))
}

// LinearParams mirrors db_linear_params: Y[Batch x N] = X[Batch x K] · Wᵀ, W row-major
// [N x K], all of DType (bf16 or fp16) with fp32 accumulation.
type LinearParams struct {
	X, W, Y        uint64 // device addresses
	Workspace      uint64 // fp32 split-K partials, WorkspaceBytes long (see LinearPlan)
	WorkspaceBytes uint64
	Batch, N, K    int // 1 <= Batch <= MaxBatch, N >= 1, K >= 8 and K % LinearKMultiple == 0
	DType          DType
	Variant        LinearVariant
	SplitK         int // 0 = auto; else 1..MaxSplitK (gemv and tiled)
	// Quantized weights (cgo/quant.go): W holds WeightFormat's layout, Scales and Zeros its
	// scales and zero points; all zero for dense weights of DType.
	Scales, Zeros uint64
	WeightFormat  WeightFormat
	GroupSize     int
}

func (p LinearParams) toC(op string) (C.db_linear_params, error) {
	var c C.db_linear_params
	var err error
	c.x, c.w, c.y = C.uint64_t(p.X), C.uint64_t(p.W), C.uint64_t(p.Y)
	c.workspace, c.workspace_bytes = C.uint64_t(p.Workspace), C.uint64_t(p.WorkspaceBytes)
	if c.batch, err = toInt32(op, "batch", p.Batch); err != nil {
		return c, err
	}
	if c.n, err = toInt32(op, "n", p.N); err != nil {
		return c, err
	}
	if c.k, err = toInt32(op, "k", p.K); err != nil {
		return c, err
	}
	if c.split_k, err = toInt32(op, "split_k", p.SplitK); err != nil {
		return c, err
	}
	c.dtype, c.variant = C.int32_t(p.DType), C.int32_t(p.Variant)
	c.scales, c.zeros, c.weight_format = C.uint64_t(p.Scales), C.uint64_t(p.Zeros), C.int32_t(p.WeightFormat)
	if c.group_size, err = toInt32(op, "group_size", p.GroupSize); err != nil {
		return c, err
	}
	return c, nil
}

func linearFromC(c *C.db_linear_params) LinearParams {
	return LinearParams{
		X: uint64(c.x), W: uint64(c.w), Y: uint64(c.y),
		Workspace: uint64(c.workspace), WorkspaceBytes: uint64(c.workspace_bytes),
		Batch: int(c.batch), N: int(c.n), K: int(c.k),
		DType: DType(c.dtype), Variant: LinearVariant(c.variant), SplitK: int(c.split_k),
		Scales: uint64(c.scales), Zeros: uint64(c.zeros), WeightFormat: WeightFormat(c.weight_format),
		GroupSize: int(c.group_size),
	}
}

// LinearPlan validates p and resolves Variant and SplitK where they are auto (0). It returns
// the resolved params and the workspace bytes the call needs; an unsupported shape is an error
// that matches ErrUnsupportedShape and names the value.
func (d *Device) LinearPlan(p LinearParams) (LinearParams, uint64, error) {
	const op = "db_linear_plan"
	c, err := p.toC(op)
	if err != nil {
		return p, 0, err
	}
	var workspace C.uint64_t
	err = d.Do(func() error { return d.check(op, C.dbshim_linear_plan(d.lib.api, d.ctx, &c, &workspace)) })
	if err != nil {
		return p, 0, err
	}
	return linearFromC(&c), uint64(workspace), nil
}

// Linear launches the decode linear layer on the device's stream.
func (d *Device) Linear(p LinearParams) error {
	const op = "db_linear"
	c, err := p.toC(op)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_linear(d.lib.api, d.ctx, &c)) })
}
