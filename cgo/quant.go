package cgo

// Quantized weight formats of the decode linear layer (decodebench.h, "quantized weight
// formats") and their device fill, db_fill_quantized: an optional function of the table
// (shim.h), so a library built before it still loads and answers ErrNotExported.

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strings"
)

// WeightFormat is how a linear layer's W is stored: the DB_WEIGHT_* enum.
type WeightFormat int32

const (
	WeightDense      WeightFormat = C.DB_WEIGHT_DENSE           // W of the activation dtype (bf16 or fp16)
	WeightFP8        WeightFormat = C.DB_WEIGHT_FP8_E4M3        // e4m3, one fp32 scale per output channel
	WeightFP8Tensor  WeightFormat = C.DB_WEIGHT_FP8_E4M3_TENSOR // e4m3, one fp32 scale for the tensor
	WeightINT8       WeightFormat = C.DB_WEIGHT_INT8            // int8, one fp32 scale per output channel
	WeightINT4       WeightFormat = C.DB_WEIGHT_INT4            // GPTQ-style symmetric int4, fp16 scale per group
	WeightINT4ZeroPt WeightFormat = C.DB_WEIGHT_INT4_ZP         // AWQ-style int4: fp16 scale and 4-bit zero point per group
	WeightMXFP4      WeightFormat = C.DB_WEIGHT_MXFP4           // e2m1, one e8m0 scale per 32 along K
	WeightFP8Block   WeightFormat = C.DB_WEIGHT_FP8_E4M3_BLOCK  // e4m3, one fp32 scale per 128 x 128 tile (DeepSeek-V3's)
)

// MXFP4Group is the elements of K that share one MXFP4 scale.
const MXFP4Group = C.DB_MXFP4_GROUP

// FP8Block is the side of fp8-block's square tiles: rows of W and elements of K under one scale.
const FP8Block = C.DB_FP8_BLOCK

// weightFormatNames are the names of the formats on the command line (--weight-dtype), in the
// order help texts list them. bf16 and fp16 name dense weights of that dtype; fp8 and int8
// agree with bench/model's DType names, mxfp4 with its Quantization method.
var weightFormatNames = []struct {
	f    WeightFormat
	name string
}{{WeightFP8, "fp8"}, {WeightFP8Tensor, "fp8-tensor"}, {WeightFP8Block, "fp8-block"}, {WeightINT8, "int8"},
	{WeightINT4, "int4"}, {WeightINT4ZeroPt, "int4-zp"}, {WeightMXFP4, "mxfp4"}}

func (f WeightFormat) String() string {
	if f == WeightDense {
		return "dense"
	}
	for _, n := range weightFormatNames {
		if n.f == f {
			return n.name
		}
	}
	return fmt.Sprintf("weight_format(%d)", int32(f))
}

// Valid reports whether f is one of the DB_WEIGHT_* formats.
func (f WeightFormat) Valid() bool { return f >= WeightDense && f <= WeightFP8Block }

// FourBit reports whether two elements share a byte (int4, int4-zp, mxfp4).
func (f WeightFormat) FourBit() bool {
	return f == WeightINT4 || f == WeightINT4ZeroPt || f == WeightMXFP4
}

// Grouped reports whether the scales are per group along K that --group-size chooses (else per
// channel or tensor, or fp8-block's fixed 128 x 128 tiles, which take no group size).
func (f WeightFormat) Grouped() bool { return f.FourBit() }

// ParseWeightDType reads a --weight-dtype value: bf16 or fp16 (dense weights, whose dtype is
// then the activations' too: dense is that dtype) or a quantized format (dense is 0: the
// activations keep their own dtype).
func ParseWeightDType(s string) (f WeightFormat, dense DType, err error) {
	switch s {
	case "bf16":
		return WeightDense, DTypeBF16, nil
	case "fp16":
		return WeightDense, DTypeFP16, nil
	}
	names := []string{"bf16", "fp16"}
	for _, n := range weightFormatNames {
		if s == n.name {
			return n.f, 0, nil
		}
		names = append(names, n.name)
	}
	return 0, 0, fmt.Errorf("unknown weight dtype %q (want %s)", s, strings.Join(names, ", "))
}

// DefaultGroupSize is the group a grouped format takes when none is given: 128 for int4 (the
// usual AWQ and GPTQ group), 32 for mxfp4 (its only one); 0 for the others.
func (f WeightFormat) DefaultGroupSize() int {
	switch f {
	case WeightINT4, WeightINT4ZeroPt:
		return 128
	case WeightMXFP4:
		return MXFP4Group
	}
	return 0
}

// QuantLayout is the size of each buffer of an N x K weight matrix in format F (decodebench.h):
// what a call reads from DRAM, scales and zero points included.
type QuantLayout struct {
	Format                        WeightFormat
	N, K, GroupSize               int
	WBytes, ScaleBytes, ZeroBytes uint64
}

// Layout gives the buffer sizes; the shape rules are db_linear_plan's (it names what it
// refuses), so a shape that does not divide is sized here with its groups rounded up.
func (f WeightFormat) Layout(n, k, groupSize int) QuantLayout {
	l := QuantLayout{Format: f, N: n, K: k, GroupSize: groupSize}
	if n < 1 || k < 1 {
		return l
	}
	un, uk := uint64(n), uint64(k)
	groups := func(g int) uint64 {
		if g <= 0 {
			g = MXFP4Group
		}
		return (uk + uint64(g) - 1) / uint64(g)
	}
	switch f {
	case WeightFP8, WeightINT8:
		l.WBytes, l.ScaleBytes = un*uk, 4*un
	case WeightFP8Tensor:
		l.WBytes, l.ScaleBytes = un*uk, 4
	case WeightINT4:
		l.WBytes, l.ScaleBytes = un*uk/2, 2*un*groups(groupSize)
	case WeightINT4ZeroPt:
		l.WBytes, l.ScaleBytes, l.ZeroBytes = un*uk/2, 2*un*groups(groupSize), (un+1)/2*groups(groupSize)
	case WeightMXFP4:
		l.WBytes, l.ScaleBytes = un*uk/2, un*groups(MXFP4Group)
	case WeightFP8Block:
		l.WBytes, l.ScaleBytes = un*uk, 4*((un+FP8Block-1)/FP8Block)*groups(FP8Block)
	}
	return l
}

// Bytes is all three buffers together.
func (l QuantLayout) Bytes() uint64 { return l.WBytes + l.ScaleBytes + l.ZeroBytes }

// QuantFill mirrors db_quant_fill_params: W, Scales and Zeros (device addresses in the
// format's layout) filled from Seed; Scale sets the scales' magnitude (see decodebench.h).
type QuantFill struct {
	W, Scales, Zeros uint64
	Format           WeightFormat
	N, K, GroupSize  int
	Seed             uint64
	Scale            float32
}

// FillQuantized fills a quantized weight matrix on the device (db_fill_quantized); bench/ref's
// QuantFill reproduces every byte. A NaN, infinite or zero Scale is refused before anything is
// written, as is a shape the format does not take.
func (d *Device) FillQuantized(p QuantFill) error {
	const op = "db_fill_quantized"
	var c C.db_quant_fill_params
	var err error
	c.w, c.scales, c.zeros = C.uint64_t(p.W), C.uint64_t(p.Scales), C.uint64_t(p.Zeros)
	c.weight_format = C.int32_t(p.Format)
	if c.n, err = toInt32(op, "n", p.N); err != nil {
		return err
	}
	if c.k, err = toInt32(op, "k", p.K); err != nil {
		return err
	}
	if c.group_size, err = toInt32(op, "group_size", p.GroupSize); err != nil {
		return err
	}
	c.seed, c.scale = C.uint64_t(p.Seed), C.float(p.Scale)
	return d.Do(func() error { return d.check(op, C.dbshim_fill_quantized(d.lib.api, d.ctx, &c)) })
}

// CheckShape is db_linear_plan's rule for an N x K matrix of format f with groups of
// groupSize, checked before any device work: k a multiple of the 16-byte vectors of a row (16
// elements for the 8-bit formats, 32 for the 4-bit ones) and of the group; int4 groups of 32,
// 64 or 128, mxfp4's 32 (or 0), fp8-block's 128 (or 0; any n and k, partial tiles taken), none
// for the others; an even n for int4-zp's zero-point pairs.
// The error names the format and the value.
func (f WeightFormat) CheckShape(n, k, groupSize int) error {
	switch {
	case f == WeightDense:
		return nil
	case !f.Valid():
		return fmt.Errorf("weight format %d is not a DB_WEIGHT_*", int32(f))
	case n < 1 || k < 1:
		return fmt.Errorf("n %d, k %d: want both >= 1", n, k)
	}
	vector := 16
	if f.FourBit() {
		vector = 32
	}
	if k%vector != 0 {
		return fmt.Errorf("k %d is not a multiple of %d: %s weights are read as rows of 16-byte vectors", k, vector, f)
	}
	group := groupSize
	switch f {
	case WeightINT4, WeightINT4ZeroPt:
		if groupSize != 32 && groupSize != 64 && groupSize != 128 {
			return fmt.Errorf("group size %d: %s takes 32, 64 or 128", groupSize, f)
		}
	case WeightMXFP4:
		if groupSize != 0 && groupSize != MXFP4Group {
			return fmt.Errorf("group size %d: mxfp4 has one scale per %d along k", groupSize, MXFP4Group)
		}
		group = MXFP4Group
	case WeightFP8Block:
		if groupSize != 0 && groupSize != FP8Block {
			return fmt.Errorf("group size %d: fp8-block has one scale per %dx%d tile (want 0 or %d)", groupSize, FP8Block, FP8Block, FP8Block)
		}
		group = 0 // partial tiles at the ends of n and k are taken, as DeepSeek's checkpoints have them
	default:
		if groupSize != 0 {
			return fmt.Errorf("group size %d: %s has one scale per output channel (or tensor), no groups", groupSize, f)
		}
	}
	if group > 0 && k%group != 0 {
		return fmt.Errorf("k %d is not a multiple of %s's group size %d (the last group would not fit k)", k, f, group)
	}
	if f == WeightINT4ZeroPt && n%2 != 0 {
		return fmt.Errorf("n %d is odd: %s packs the zero points of row pairs in one byte", n, f)
	}
	return nil
}
