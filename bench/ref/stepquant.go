package ref

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// Quantized weights and the fp8 KV cache in the decode step: which of a step's linears are
// quantized, in which kernel format, and how the forward pass regenerates them. The engine
// (bench/step) and the forward pass both follow these, so the step's bytes and the reference's
// values come from one place.

// WeightFormatOf is the kernels' weight format for a shape's quantized projections and its group
// size; ok is false where the projections are not quantized (dense bf16 or fp16) or no kernel
// takes the format. A quantization_config (Quant) sets it: mxfp4, fp8 per output channel or
// tensor or in 128 x 128 tiles (fp8-block), int8, awq (int4 with zero points), gptq (symmetric
// int4); other block sizes and methods or widths the kernels lack are not ok. Without one, fp8 and int8 weight dtypes
// are the per-channel formats. GPTQ's desc_act reordering (g_idx) is not modelled: the time is
// the same bytes read in order.
func WeightFormatOf(s model.Shape) (f cgo.WeightFormat, group int, ok bool) {
	q := s.Quant
	if q == nil {
		switch s.WeightDType {
		case model.FP8:
			return cgo.WeightFP8, 0, true
		case model.INT8:
			return cgo.WeightINT8, 0, true
		}
		return cgo.WeightDense, 0, false
	}
	switch {
	case q.Method == model.QuantMXFP4:
		return cgo.WeightMXFP4, cgo.MXFP4Group, true
	case q.Method == model.QuantFP8 && q.BlockN == 0 && q.BlockK == 0 && q.PerTensor:
		return cgo.WeightFP8Tensor, 0, true
	case q.Method == model.QuantFP8 && q.BlockN == 0 && q.BlockK == 0:
		return cgo.WeightFP8, 0, true
	case q.Method == model.QuantFP8 && q.BlockN == cgo.FP8Block && q.BlockK == cgo.FP8Block:
		return cgo.WeightFP8Block, 0, true // DeepSeek-V3's and Kimi-K2's 128 x 128 tiles
	case q.Method == model.QuantINT8 && q.Bits == 8:
		return cgo.WeightINT8, 0, true
	case q.Method == model.QuantAWQ && q.Bits == 4:
		return cgo.WeightINT4ZeroPt, q.GroupSize, true
	case q.Method == model.QuantGPTQ && q.Bits == 4:
		return cgo.WeightINT4, q.GroupSize, true
	}
	return cgo.WeightDense, 0, false
}

// StepQuantized reports whether the step's tensor name of s is stored in s's quantized format
// (bench/model/quant.go's rule): the attention projections (unless Quant.AttentionKept: gpt-oss
// keeps them in WeightDType), the dense MLPs, shared experts and routed experts; the embedding,
// the LM head, the router, norms, biases and sinks never are. With fp8 or int8 weights and no
// quantization_config the same projections are quantized, per output channel.
func StepQuantized(s model.Shape, name string) bool {
	if _, _, ok := WeightFormatOf(s); !ok {
		return false
	}
	switch name {
	case TensorQKV, TensorO:
		return s.Quant == nil || !s.Quant.AttentionKept
	case TensorGateUp, TensorDown, TensorSharedUp, TensorSharedDown, TensorExpertUp, TensorExpertDown:
		return true
	}
	return false
}

// StepQuantRefusal names what of s's quantization the step does not run, "" when it runs all of
// it (or s is not quantized): a format no kernel takes, and experts in fp8 with one scale per
// tensor (the experts of a tensor are one fill of experts x n rows, and db_grouped_linear reads
// each expert's scales at its own layout: a per-tensor scale would be one for all of them). The
// engine and the forward pass refuse the same shapes.
func StepQuantRefusal(s model.Shape) string {
	if s.Quant == nil && s.WeightDType != model.FP8 && s.WeightDType != model.INT8 {
		return ""
	}
	f, _, ok := WeightFormatOf(s)
	switch {
	case !ok && s.Quant != nil:
		return "quantized weights (" + s.Quant.String() + ": no linear kernel reads the format)"
	case !ok:
		return fmt.Sprintf("%s weights", s.WeightDType)
	case s.IsMoE() && f == cgo.WeightFP8Tensor:
		return fmt.Sprintf("%s experts (one scale for a tensor; the grouped expert linear reads one scale per expert's channel or group)", f)
	}
	return ""
}

// quantCodeMeanSquare is the mean of code^2 over the codes db_fill_quantized writes for f (every
// byte or nibble equally often; fp8's NaN codes become +-448), before the scales.
func quantCodeMeanSquare(f cgo.WeightFormat) float64 {
	var sum float64
	switch f {
	case cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightFP8Block:
		for b := 0; b < 256; b++ {
			c := byte(b)
			if c&0x7F == 0x7F {
				c ^= 1
			}
			sum += E4M3(c) * E4M3(c)
		}
		return sum / 256
	case cgo.WeightINT8:
		for b := -128; b < 128; b++ {
			sum += float64(b * b)
		}
		return sum / 256
	case cgo.WeightINT4:
		for u := 0; u < 16; u++ {
			sum += float64((u - 8) * (u - 8))
		}
		return sum / 16
	case cgo.WeightINT4ZeroPt:
		for u := 0; u < 16; u++ {
			for z := 0; z < 16; z++ {
				sum += float64((u - z) * (u - z))
			}
		}
		return sum / 256
	case cgo.WeightMXFP4:
		for c := byte(0); c < 16; c++ {
			sum += E2M1(c) * E2M1(c)
		}
		return sum / 16
	}
	return 1
}

// QuantWeightScale is the fill scale (db_fill_quantized's scale) of a quantized linear weight
// with k inputs in format f: its elements then have about the variance 1/k of the dense fill's
// uniform ±sqrt(3/k) (LinearWeightScale), so activations keep their size through any depth. The
// per-channel and int4 scales are uniform in ±scale (mean square scale^2 / 3); mxfp4's are
// 2^(ilogb(scale) - 2 + d), d uniform in 0..3, so its scale is the power of two nearest that.
func QuantWeightScale(f cgo.WeightFormat, k int) float32 {
	ms := quantCodeMeanSquare(f)
	if f == cgo.WeightMXFP4 {
		// E[scale^2] = 2^(2L-4) (1 + 4 + 16 + 64) / 4 for scale 2^L
		l := math.Round((4 + math.Log2(1/(float64(k)*ms*85/4))) / 2)
		return float32(math.Ldexp(1, int(l)))
	}
	return float32(math.Sqrt(3 / (float64(k) * ms)))
}

// StepQuantFill is what db_fill_quantized is asked for tensor name (n x k) of layer in a step of
// s with base seed base, where StepQuantized(s, name). The routed experts of a tensor are one
// fill of experts x n rows: in every format the step runs for them (fp8 per channel, int8,
// int4, int4-zp with even n, mxfp4, fp8-block with n a multiple of 128) that fill's W, scales
// and zeros are the experts' n-row layouts one after another, as db_grouped_linear reads them.
func StepQuantFill(s model.Shape, base uint64, layer int, name string, n, k int) QuantFill {
	f, group, _ := WeightFormatOf(s)
	return QuantFill{Format: f, N: n, K: k, GroupSize: group, Seed: TensorSeed(base, layer, name), Scale: QuantWeightScale(f, k)}
}

// The fp8 e4m3 KV cache of a step (KVDType fp8): codes filled by db_fill_quantized as the W of
// an fp8-tensor matrix of [batch x kv_heads] rows of capacity x head_dim (every finite code about
// equally often, none NaN), one fp32 scale per layer and tensor, seeded.

// FP8CacheMax is about the largest value of a step's fp8 cache: its scales are FP8CacheMax / 448
// times a seeded factor in [0.5, 1], so the cached values reach 2 to 4 and new tokens (about
// unit rms) rarely saturate. Not a power of two, so a scale applied twice, or K's and V's
// swapped, shows.
const FP8CacheMax = 4

// FP8CacheScale is the fp32 scale of the fp8 cache tensor name (TensorKCache or TensorVCache)
// of layer in a step with base seed base.
func FP8CacheScale(base uint64, layer int, name string) float32 {
	u := float64(HashUniform(TensorSeed(base, layer, name+"_scale"), 0)) // in [-1, 1)
	return float32(FP8CacheMax / 448.0 * (0.75 + 0.25*u))
}

// FP8CacheFill is the fill of the fp8 cache tensor name of layer: batch x kv_heads rows of
// capacity x head_dim codes (W of an fp8-tensor matrix; its one scale is not the cache's).
func FP8CacheFill(base uint64, layer int, name string, batch, kvHeads, capacity, headDim int) QuantFill {
	return QuantFill{Format: cgo.WeightFP8Tensor, N: batch * kvHeads, K: capacity * headDim,
		Seed: TensorSeed(base, layer, name), Scale: 1}
}
