package ref

import (
	"math"
	"runtime"
	"sync"
)

// LinearInputs describes one decode linear layer, Y[batch x n] = X[batch x k] · Wᵀ with W
// row-major [n x k], whose X and W were filled on the device by db_fill_hash.
type LinearInputs struct {
	DType          DType // BF16 or FP16: the type of X, W and Y
	Batch, N, K    int
	SeedX, SeedW   uint64
	ScaleX, ScaleW float32
	// Weights, when set, gives W's rows instead of SeedW and ScaleW: a quantized W (QuantFill
	// for one db_fill_quantized filled, QuantWeights for given bytes), dequantised exactly.
	Weights WeightRows
}

// WeightRows gives row r of W (output channel r) in out[:K], exactly.
type WeightRows interface {
	Row(r int, out []float64)
}

// LinearReference is the exact product of the dtype-rounded inputs, in float64.
type LinearReference struct {
	// Want[b*N+j] = Σ_k X[b,k]·W[j,k].
	Want []float64
	// AbsDot[b*N+j] = Σ_k |X[b,k]·W[j,k]|: the scale of the accumulation error of element
	// (b, j), which Want alone cannot give where the sum cancels.
	AbsDot []float64
}

// Linear computes the reference of a decode linear layer: LinearRows of every output feature.
// In float64 every product of two bf16 or fp16 values is exact and a sum of k of them is off
// by at most k·2^-53 of AbsDot: nothing next to the errors being checked.
func Linear(in LinearInputs) LinearReference {
	rows := make([]int, in.N)
	for j := range rows {
		rows[j] = j
	}
	return LinearRows(in, rows)
}

// LinearRows is the reference restricted to the output features rows, for every sequence:
// Want[b*len(rows)+r] and AbsDot[b*len(rows)+r] are those of sequence b and feature rows[r]
// (with every row, the layout of Linear). X is generated once; only the chosen rows of W are
// generated from the hash, one at a time per worker, so memory stays at
// O(batch·k + batch·len(rows)) whatever n·k is.
func LinearRows(in LinearInputs, rows []int) LinearReference {
	x := make([]float32, in.Batch*in.K)
	n := len(rows)
	ref := LinearReference{Want: make([]float64, in.Batch*n), AbsDot: make([]float64, in.Batch*n)}
	workers := max(min(runtime.GOMAXPROCS(0), n), 1)
	var wg sync.WaitGroup
	for i := range workers { // X in one contiguous part per worker
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := i * len(x) / workers; e < (i+1)*len(x)/workers; e++ {
				x[e] = FillValue(in.DType, in.SeedX, in.ScaleX, uint64(e))
			}
		}()
	}
	wg.Wait()

	next := make(chan int, n)
	for r := range n {
		next <- r
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := make([]float64, in.K)
			for r := range next {
				if in.Weights != nil {
					in.Weights.Row(rows[r], w)
				} else {
					base := uint64(rows[r]) * uint64(in.K)
					for kk := range w {
						w[kk] = float64(FillValue(in.DType, in.SeedW, in.ScaleW, base+uint64(kk)))
					}
				}
				for b := 0; b < in.Batch; b++ {
					xb := x[b*in.K : (b+1)*in.K]
					var sum, abs float64
					for kk, wv := range w {
						p := float64(xb[kk]) * wv
						sum += p
						abs += math.Abs(p)
					}
					ref.Want[b*n+r], ref.AbsDot[b*n+r] = sum, abs
				}
			}
		}()
	}
	wg.Wait()
	return ref
}

// Linear tolerances. What separates a correct kernel from the reference:
//
//   - Output rounding: Y is stored as bf16 or fp16, rounded to nearest, so each element is off
//     by at most the unit roundoff u = 2^-8 (bf16, 8 significand bits) or 2^-11 (fp16, 11
//     bits), relatively: 3.9e-3 and 4.9e-4. Over many elements the L2 relative error is about
//     u/sqrt(3) (a uniformly spread rounding error) and never more than u.
//   - fp32 accumulation: the products of two bf16 or two fp16 values are exact in fp32, so only
//     the k-1 additions err, each by at most 2^-24 of a partial sum: at most about k·2^-24 of
//     AbsDot in the worst case, about sqrt(k/2)·2^-24 relatively in the usual one (5e-6 at
//     k = 16384), whatever the order of summation (split-K, warp trees, mma).
//   - The inputs are not a source of error: the reference uses the same rounded values.
//
// So the L2 tolerance is a small multiple of u: 1e-2 for bf16 (2.5·u) and 2e-3 for fp16 (4·u),
// loose enough for any order of summation and tight enough that a real bug shows: dropping one
// 8-wide slice of k = 200 everywhere gives about 0.2. One wrong element hides in the L2 norm of
// a large output, so every element also has a bound of its own (LinearElementBound); an
// unwritten one stays NaN from the poison and fails on its own.

// LinearTolerance is the largest acceptable ‖out−ref‖₂/‖ref‖₂ for an output of dtype d.
func LinearTolerance(d DType) float64 {
	switch d {
	case BF16:
		return 1e-2
	case FP16:
		return 2e-3
	case F32:
		return 1e-5
	}
	return 0
}

// LinearElementBound is the largest acceptable |out − ref| for one element of a linear layer
// whose reference is want with AbsDot absDot, summed over k products. It is a rigorous bound
// for any order of fp32 summation, doubled to allow for tensor cores that truncate instead of
// rounding inside mma (2·k·2^-24·absDot), plus one rounding of the result to d (u·|result|),
// plus half the spacing of d's subnormals, where relative bounds stop holding. It catches what
// the L2 norm hides in a large output: one wrong element.
func LinearElementBound(d DType, k int, want, absDot float64) float64 {
	accumulation := 2 * float64(k) * 0x1p-24 * absDot
	return accumulation + d.UnitRoundoff()*(math.Abs(want)+accumulation) + halfSubnormalSpacing(d)
}

// ElementBounds gives LinearElementBound for every element of the reference.
func (r LinearReference) ElementBounds(d DType, k int) []float64 {
	out := make([]float64, len(r.Want))
	for i := range out {
		out[i] = LinearElementBound(d, k, r.Want[i], r.AbsDot[i])
	}
	return out
}

func halfSubnormalSpacing(d DType) float64 {
	switch d {
	case FP16:
		return 0x1p-25
	case BF16:
		return 0x1p-134
	case F32:
		return 0x1p-150
	}
	return 0
}
