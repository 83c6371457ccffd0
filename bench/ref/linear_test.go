package ref

import (
	"math"
	"testing"
)

func linearNaive(in LinearInputs) []float64 {
	x := Fill(in.DType, in.SeedX, in.ScaleX, in.Batch*in.K)
	w := Fill(in.DType, in.SeedW, in.ScaleW, in.N*in.K)
	out := make([]float64, in.Batch*in.N)
	for b := 0; b < in.Batch; b++ {
		for j := 0; j < in.N; j++ {
			for k := 0; k < in.K; k++ {
				out[b*in.N+j] += float64(x[b*in.K+k]) * float64(w[j*in.K+k])
			}
		}
	}
	return out
}

func TestLinearMatchesNaive(t *testing.T) {
	for _, in := range []LinearInputs{
		{DType: BF16, Batch: 1, N: 1, K: 8, SeedX: 1, SeedW: 2, ScaleX: 1, ScaleW: 1},
		{DType: FP16, Batch: 3, N: 7, K: 24, SeedX: 3, SeedW: 4, ScaleX: 1, ScaleW: 0.2},
		{DType: BF16, Batch: 17, N: 33, K: 200, SeedX: 5, SeedW: 6, ScaleX: 1, ScaleW: 0.07},
	} {
		want := linearNaive(in)
		got := Linear(in)
		for i := range want {
			if math.Abs(got.Want[i]-want[i]) > 1e-12*got.AbsDot[i] || got.AbsDot[i] < math.Abs(want[i]) {
				t.Fatalf("%+v element %d: Linear %v (abs %v), naive %v", in, i, got.Want[i], got.AbsDot[i], want[i])
			}
		}
	}
}

// LinearRows gives the chosen features' reference in its own layout, for any subset in any
// order, each element as the naive product has it.
func TestLinearRowsMatchesNaive(t *testing.T) {
	for _, dt := range []DType{BF16, FP16} {
		in := LinearInputs{DType: dt, Batch: 5, N: 37, K: 72, SeedX: 11, SeedW: 12, ScaleX: 1, ScaleW: float32(1 / math.Sqrt(72))}
		naive := linearNaive(in)
		for _, rows := range [][]int{{36}, {0, 17, 5, 36}, {3, 3}} {
			got := LinearRows(in, rows)
			if len(got.Want) != in.Batch*len(rows) {
				t.Fatalf("%v rows %v: %d elements, want %d", dt, rows, len(got.Want), in.Batch*len(rows))
			}
			for b := 0; b < in.Batch; b++ {
				for r, j := range rows {
					i, want := b*len(rows)+r, naive[b*in.N+j]
					if math.Abs(got.Want[i]-want) > 1e-12*got.AbsDot[i] || got.AbsDot[i] < math.Abs(want) {
						t.Fatalf("%v rows %v: (sequence %d, feature %d) = %v (abs %v), naive %v", dt, rows, b, j, got.Want[i], got.AbsDot[i], want)
					}
				}
			}
		}
	}
}

// simulatedKernel computes Y the way a correct kernel may: fp32 sums of exact products over
// slices of k (split-K partials, or one slice), partials added in fp32, the result rounded to
// dtype. broken, when not nil, gets a chance to damage the computation.
func simulatedKernel(in LinearInputs, splitK int, reverse bool, broken func(b, j, k int) bool) []float32 {
	x := Fill(in.DType, in.SeedX, in.ScaleX, in.Batch*in.K)
	w := Fill(in.DType, in.SeedW, in.ScaleW, in.N*in.K)
	out := make([]float32, in.Batch*in.N)
	slice := (in.K + splitK - 1) / splitK
	for b := 0; b < in.Batch; b++ {
		for j := 0; j < in.N; j++ {
			var total float32
			for s := 0; s < in.K; s += slice {
				var partial float32
				for kk := 0; kk < slice && s+kk < in.K; kk++ {
					k := s + kk
					if reverse {
						k = min(s+slice, in.K) - 1 - kk
					}
					if broken != nil && broken(b, j, k) {
						continue
					}
					partial = float32(partial + x[b*in.K+k]*w[j*in.K+k])
				}
				total = float32(total + partial)
			}
			out[b*in.N+j] = Round(in.DType, total)
		}
	}
	return out
}

func TestLinearToleranceSeparatesRightFromWrong(t *testing.T) {
	for _, d := range []DType{BF16, FP16} {
		in := LinearInputs{DType: d, Batch: 5, N: 300, K: 200, SeedX: 11, SeedW: 12, ScaleX: 1, ScaleW: float32(1 / math.Sqrt(200))}
		ref := Linear(in)
		bounds := ref.ElementBounds(d, in.K)
		tol := LinearTolerance(d)

		correct := []struct {
			desc    string
			splitK  int
			reverse bool
		}{{"one pass", 1, false}, {"reversed order", 1, true}, {"split-K 4", 4, false}, {"split-K 25", 25, true}}
		for _, c := range correct {
			cmp := Compare(simulatedKernel(in, c.splitK, c.reverse, nil), ref.Want, bounds, tol)
			if !cmp.Passed {
				t.Errorf("%v %s: a correct kernel fails: %s", d, c.desc, cmp.Reason())
			}
			// The error should sit near the output rounding, well inside the tolerance.
			if cmp.RelError > d.UnitRoundoff() {
				t.Errorf("%v %s: relative error %.3g above the unit roundoff %.3g", d, c.desc, cmp.RelError, d.UnitRoundoff())
			}
		}

		bugs := []struct {
			desc   string
			broken func(b, j, k int) bool
		}{
			{"one 8-wide slice of K dropped everywhere", func(b, j, k int) bool { return k >= 96 && k < 104 }},
			{"one element missing its last product", func(b, j, k int) bool { return b == 4 && j == 299 && k == 199 }},
			{"one row of W skipped for one sequence", func(b, j, k int) bool { return b == 2 && j == 150 }},
		}
		for _, bug := range bugs {
			if cmp := Compare(simulatedKernel(in, 1, false, bug.broken), ref.Want, bounds, tol); cmp.Passed {
				t.Errorf("%v %s: passes (relative error %.3g, worst %+v)", d, bug.desc, cmp.RelError, cmp.Worst)
			}
		}
		// Truncating the output instead of rounding it to nearest doubles the rounding error.
		if d == BF16 {
			truncated := make([]float32, len(ref.Want))
			for i, w := range ref.Want {
				truncated[i] = BF16ToFloat32(uint16(math.Float32bits(float32(w)) >> 16))
			}
			if cmp := Compare(truncated, ref.Want, bounds, tol); cmp.Passed {
				t.Errorf("bf16 truncated output passes (relative error %.3g)", cmp.RelError)
			}
		}
	}
}

func TestCompare(t *testing.T) {
	want := []float64{1, -2, 3, 0}
	t.Run("exact", func(t *testing.T) {
		c := Compare([]float32{1, -2, 3, 0}, want, nil, 1e-3)
		if !c.Passed || c.RelError != 0 || c.Worst.AbsErr != 0 {
			t.Errorf("exact match: %+v", c)
		}
	})
	t.Run("worst element", func(t *testing.T) {
		c := Compare([]float32{1, -2.5, 3.1, 0}, want, nil, 1e-3)
		if c.Passed || c.Worst.Index != 1 || c.Worst.AbsErr != 0.5 || c.Worst.Got != -2.5 || c.Worst.Want != -2 {
			t.Errorf("worst = %+v, passed %v", c.Worst, c.Passed)
		}
		if c.Reason() == "" {
			t.Error("a failure has no reason")
		}
	})
	t.Run("NaN fails whatever the tolerance", func(t *testing.T) {
		c := Compare([]float32{1, float32(math.NaN()), 3, 0}, want, nil, math.Inf(1))
		if c.Passed || c.NonFinite != 1 || c.Worst.Index != 1 || len(c.Mismatches) != 1 {
			t.Errorf("NaN output: %+v", c)
		}
	})
	t.Run("infinity fails", func(t *testing.T) {
		c := Compare([]float32{1, -2, float32(math.Inf(1)), 0}, want, nil, math.Inf(1))
		if c.Passed || c.NonFinite != 1 || c.Worst.Index != 2 {
			t.Errorf("Inf output: %+v", c)
		}
	})
	t.Run("element bound", func(t *testing.T) {
		c := Compare([]float32{1, -2, 3, 0.01}, want, []float64{0, 0, 0, 0.001}, 1)
		if c.Passed || c.OutOfBound != 1 || c.Mismatches[0].Index != 3 {
			t.Errorf("out of bound: %+v", c)
		}
	})
	t.Run("zero reference", func(t *testing.T) {
		c := Compare([]float32{0, 0.5}, []float64{0, 0}, nil, 1)
		if !c.Passed || c.RelError != 0.5 {
			t.Errorf("zero reference: %+v", c)
		}
	})
}
