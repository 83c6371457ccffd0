package model

import (
	"fmt"
	"math"
)

// Quantization is the stored format of a checkpoint's quantized projection matrices, read
// from config.json's quantization_config. It sets the bytes a step reads for them, scales and
// zero points included; the kernels that would read them are named by Kernel.Variant.
type Quantization struct {
	// Method: QuantMXFP4, QuantFP8, QuantAWQ, QuantGPTQ or QuantINT8.
	Method string `json:"method"`
	Bits   int    `json:"bits"` // per stored weight, before scales: 4 (mxfp4, awq, gptq), 8 (fp8)
	// GroupSize is the weights along K that share one scale (mxfp4 32; awq and gptq their
	// group_size, 0 for one group per row; fp8 0 for one scale per output channel).
	GroupSize int `json:"group_size,omitempty"`
	// BlockN x BlockK is fp8's weight_block_size: one fp32 scale per tile (DeepSeek-V3: 128 x 128).
	BlockN int `json:"block_n,omitempty"`
	BlockK int `json:"block_k,omitempty"`
	// PerTensor: fp8 with one fp32 scale for the whole matrix (no block, no per-channel scales).
	PerTensor bool `json:"per_tensor,omitempty"`
	// AttentionKept: the attention projections stay WeightDType (gpt-oss's
	// modules_to_not_convert names self_attn); otherwise they are quantized too. The MLPs and
	// experts are quantized; the embedding, LM head, router and norms never are.
	AttentionKept bool `json:"attention_kept,omitempty"`
	// Zeros: awq and gptq store a Bits-wide zero point per group (awq's zero_point; gptq always).
	Zeros bool `json:"zeros,omitempty"`
	// GIdx: gptq with desc_act stores one int32 group index per input row of each matrix.
	GIdx bool `json:"g_idx,omitempty"`
}

// Quantization methods.
const (
	QuantMXFP4 = "mxfp4" // OCP microscaling: e2m1 values, one e8m0 scale per 32 along K
	QuantFP8   = "fp8"   // e4m3 values, fp32 scales per block or per output channel
	QuantAWQ   = "awq"   // packed ints, an fp16 scale and a packed zero point per group
	QuantGPTQ  = "gptq"  // as awq (qweight, qzeros, scales), plus g_idx with desc_act
	QuantINT8  = "int8"  // symmetric int8 values, one fp32 scale per output channel (w8a16)
)

func (q Quantization) validate() error {
	switch {
	case q.Method != QuantMXFP4 && q.Method != QuantFP8 && q.Method != QuantAWQ && q.Method != QuantGPTQ && q.Method != QuantINT8:
		return fmt.Errorf("Quant.Method = %q: accepted are %s, %s, %s, %s and %s", q.Method, QuantMXFP4, QuantFP8, QuantAWQ, QuantGPTQ, QuantINT8)
	case q.Bits < 2 || q.Bits > 8:
		return fmt.Errorf("Quant.Bits = %d: want 2..8", q.Bits)
	case q.GroupSize < 0 || q.BlockN < 0 || q.BlockK < 0 || (q.BlockN == 0) != (q.BlockK == 0):
		return fmt.Errorf("Quant group %d, block %d x %d: want a group >= 0 and a block of two positive sizes or none", q.GroupSize, q.BlockN, q.BlockK)
	}
	return nil
}

// String names the format as a kernel would need it: "mxfp4 (e2m1, one e8m0 scale per 32)",
// "fp8 (128x128 block scales)", "awq int4 g128".
func (q Quantization) String() string {
	switch q.Method {
	case QuantMXFP4:
		return fmt.Sprintf("mxfp4 (e2m1, one e8m0 scale per %d)", q.GroupSize)
	case QuantFP8:
		if q.BlockN > 0 {
			return fmt.Sprintf("fp8 (%dx%d block scales)", q.BlockN, q.BlockK)
		}
		if q.PerTensor {
			return "fp8 (one scale per tensor)"
		}
		return "fp8 (per-channel scales)"
	case QuantINT8:
		return "int8 (per-channel scales)"
	}
	if q.GroupSize == 0 {
		return fmt.Sprintf("%s int%d (per-channel scales)", q.Method, q.Bits)
	}
	return fmt.Sprintf("%s int%d g%d", q.Method, q.Bits, q.GroupSize)
}

// matrixBytes is the storage of one n x k weight matrix (y = x W^T, k the input width).
func (q Quantization) matrixBytes(n, k int) float64 {
	values := float64(n) * float64(k) * float64(q.Bits) / 8
	rows := float64(n)
	groups := func(size int) float64 {
		if size <= 0 {
			return 1
		}
		return math.Ceil(float64(k) / float64(size))
	}
	switch q.Method {
	case QuantMXFP4:
		return values + rows*groups(q.GroupSize) // one byte (e8m0) per group
	case QuantFP8:
		if q.BlockN > 0 {
			tiles := math.Ceil(float64(n)/float64(q.BlockN)) * math.Ceil(float64(k)/float64(q.BlockK))
			return values + 4*tiles
		}
		if q.PerTensor {
			return values + 4
		}
		return values + 4*rows
	case QuantINT8:
		return values + 4*rows
	}
	// awq and gptq: per group and output channel an fp16 scale and a Bits-wide zero point.
	perGroup := 2.0
	if q.Zeros {
		perGroup += float64(q.Bits) / 8
	}
	scales := rows * groups(q.GroupSize) * perGroup
	if q.GIdx {
		scales += 4 * float64(k)
	}
	return values + scales
}

// BitsPerWeight is the average storage of one weight of an n x k matrix, scales included:
// 4.25 for mxfp4.
func (q Quantization) BitsPerWeight(n, k int) float64 {
	return 8 * q.matrixBytes(n, k) / (float64(n) * float64(k))
}

// matrixBytes is the storage of one n x k projection matrix of s, of attention or not.
func (s Shape) matrixBytes(n, k int, attn bool) float64 {
	if s.quantized(attn) {
		return s.Quant.matrixBytes(n, k)
	}
	return float64(n) * float64(k) * s.WeightDType.Bytes()
}

func (s Shape) quantized(attn bool) bool { return s.Quant != nil && !(attn && s.Quant.AttentionKept) }

// matrixFormat is the format name of s's projection matrices ("" when WeightDType).
func (s Shape) matrixFormat(attn bool) string {
	if s.quantized(attn) {
		return s.Quant.String()
	}
	return ""
}
