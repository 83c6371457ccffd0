package ref

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// The forward pass's quantized weights and fp8 cache (stepquant.go says which and how).
//
// A quantized projection is regenerated from db_fill_quantized's bytes (QuantFill) and held
// exactly: the grouped formats' values (int4 and mxfp4 codes times an fp16 or power-of-two
// scale: at most 16 significant bits) are exact in float32; the per-channel formats' (fp8 and
// int8 codes times an fp32 scale) are not, so those hold the codes' values and apply their
// row's scale to the float64 sum, as the kernel applies it to its fp32 one.
//
// An fp8 cache holds the codes' values times the layer's scale, once rounded to float32 as the
// kernels dequantise them; each appended token is the quantisation of the reference's k or v
// (E4M3Quantize), and its sigma adds that of a rounding to a neighbouring code: the engine's
// k, a few bf16 ulps away, may quantise to the next code (2^-4 relatively) where the
// reference's does not.

// fp8Sigma is the sigma of a value v quantised to e4m3 (scale s) from an input of sigma in: the
// input's, and the two quantisations apart (a step of 2^-3 |v| between normal codes, 2^-9 s
// between subnormal ones).
func fp8Sigma(v float32, s float32, in float64) float64 {
	if in == 0 {
		return 0
	}
	return math.Hypot(in, (0x1p-3*math.Abs(float64(v))+0x1p-9*float64(s))*uniformSigma)
}

// projection is the weight of a linear (n outputs, k inputs) of layer: quantized as the step
// stores it where StepQuantized, else the dense fill.
func (f *Forward) projection(base uint64, layer int, name string, n, k int) []float32 {
	if !StepQuantized(f.shape, name) {
		return Fill(f.d, TensorSeed(base, layer, name), LinearWeightScale(k), n*k)
	}
	q := StepQuantFill(f.shape, base, layer, name, n, k)
	w := make([]float32, n*k)
	switch q.Format {
	case cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightINT8, cgo.WeightFP8Block:
		// The codes' values, exact in float32; their scales (one a row, or one a 128 x 128
		// tile) multiply each product in float64, since code x fp32 scale needs more bits than
		// float32 holds.
		sc := codeScales{block: k, perRow: 1}
		if q.Format == cgo.WeightFP8Block {
			sc.block, sc.perRow = cgo.FP8Block, (k+cgo.FP8Block-1)/cgo.FP8Block
		}
		sc.s = make([]float64, n*sc.perRow)
		for r := 0; r < n; r++ {
			for t := 0; t < sc.perRow; t++ {
				ch := uint64(r)
				switch q.Format {
				case cgo.WeightFP8Tensor:
					ch = 0
				case cgo.WeightFP8Block:
					ch = uint64(r/cgo.FP8Block*sc.perRow + t)
				}
				sc.s[r*sc.perRow+t] = float64(math.Float32frombits(binary.LittleEndian.Uint32(q.ScaleBits(ch))))
			}
			for c := 0; c < k; c++ {
				b := q.WByte(uint64(r*k + c))
				if q.Format == cgo.WeightINT8 {
					w[r*k+c] = float32(int8(b))
				} else {
					w[r*k+c] = float32(E4M3(b))
				}
			}
		}
		if f.codeScales == nil {
			f.codeScales = map[*float32]*codeScales{}
		}
		f.codeScales[&w[0]] = &sc
	default:
		row := make([]float64, k)
		for r := 0; r < n; r++ {
			q.Row(r, row)
			for c, v := range row {
				w[r*k+c] = float32(v)
				if float64(w[r*k+c]) != v {
					panic(fmt.Sprintf("%v weight %g of %s is not exact in float32", q.Format, v, name))
				}
			}
		}
	}
	return w
}

// expertProjection is the routed experts' weight of a tensor (experts x n outputs, k inputs):
// one projection of experts x n rows (the step's one fill, StepQuantFill), with each expert's
// slice of a weight held as codes given its rows' scales, since linear() is called on one
// expert's slice at a time.
func (f *Forward) expertProjection(base uint64, layer int, name string, experts, n, k int) []float32 {
	w := f.projection(base, layer, name, experts*n, k)
	sc := f.scalesOf(w)
	if sc == nil {
		return w
	}
	for e := 1; e < experts; e++ {
		f.codeScales[&w[e*n*k]] = &codeScales{block: sc.block, perRow: sc.perRow, s: sc.s[e*n*sc.perRow:]}
	}
	return w
}

// codeScales are the scales of a weight held as its codes' values (fp8, int8): element (j, c)
// of the weight is its code times s[j*perRow + c/block].
type codeScales struct {
	block, perRow int
	s             []float64
}

func (c *codeScales) at(j, kk int) float64 { return c.s[j*c.perRow+kk/c.block] }

// scalesOf gives the scales of a weight w held as codes, nil for any other weight.
func (f *Forward) scalesOf(w []float32) *codeScales {
	if len(w) == 0 || f.codeScales == nil {
		return nil
	}
	return f.codeScales[&w[0]]
}

// fp8KV reports whether the step's caches are fp8.
func (f *Forward) fp8KV() bool { return f.shape.KVDType == model.FP8 }

// cacheFill is layer's cache tensor name of count elements: the hash fill in the dtype, or the
// fp8 codes' values times the layer's scale.
func (f *Forward) cacheFill(base uint64, layer int, name string, count int) []float32 {
	if !f.fp8KV() {
		return Fill(f.d, TensorSeed(base, layer, name), CacheScale, count)
	}
	q := FP8CacheFill(base, layer, name, f.batch, f.kvHeads, f.capacity, f.headDim)
	codes := make([]byte, count)
	for j := range codes {
		codes[j] = q.WByte(uint64(j))
	}
	return E4M3Dequantize(codes, FP8CacheScale(base, layer, name))
}

// appendKV writes the step's k and v rows at src into layer l's caches at dst (and their
// sigmas at so): copies, or in an fp8 cache their quantisation.
func (f *Forward) appendKV(l, dst, so, src int, k, v vec) {
	hd := f.headDim
	if !f.fp8KV() {
		copy(f.kCache[l][dst:dst+hd], k.v[src:src+hd])
		copy(f.vCache[l][dst:dst+hd], v.v[src:src+hd])
		copy(f.kSigma[l][so:so+hd], k.s[src:src+hd])
		copy(f.vSigma[l][so:so+hd], v.s[src:src+hd])
		return
	}
	ks, vs := FP8CacheScale(f.base, l, TensorKCache), FP8CacheScale(f.base, l, TensorVCache)
	for e := 0; e < hd; e++ {
		kq := float32(E4M3(E4M3Quantize(k.v[src+e], ks)) * float64(ks))
		vq := float32(E4M3(E4M3Quantize(v.v[src+e], vs)) * float64(vs))
		f.kCache[l][dst+e], f.vCache[l][dst+e] = kq, vq
		f.kSigma[l][so+e], f.vSigma[l][so+e] = fp8Sigma(kq, ks, k.s[src+e]), fp8Sigma(vq, vs, v.s[src+e])
	}
}
