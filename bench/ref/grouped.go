package ref

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// GroupedLinearInputs describes one db_grouped_linear call whose X, W and bias were filled on
// the device by db_fill_hash: X [Rows x K], W [Experts x N x K], Bias [Experts x N] (when
// HasBias), and Offsets (Experts + 1 int32s) saying which rows each expert takes.
type GroupedLinearInputs struct {
	DType                     DType
	Rows, Experts, N, K       int
	Offsets                   []int32
	SeedX, SeedW, SeedBias    uint64
	ScaleX, ScaleW, ScaleBias float32
	HasBias                   bool
}

// GroupedLinearReference is the exact result of the dtype-rounded inputs, in float64.
type GroupedLinearReference struct {
	// Want[r*N+j] = Σ_k X[r,k]·W[e,j,k] (+ Bias[e,j]) for the expert e whose rows hold r.
	Want []float64
	// Bound[r*N+j]: LinearElementBound over the k products and the bias add.
	Bound []float64
	// Covered[r]: whether some expert takes row r (a row no expert takes is not written).
	Covered []bool
}

// ExpertOffsets is the exclusive prefix sum of counts, as db_moe_group writes it.
func ExpertOffsets(counts []int) []int32 {
	out := make([]int32, len(counts)+1)
	for e, c := range counts {
		out[e+1] = out[e] + int32(c)
	}
	return out
}

// Validate checks that the offsets are what db_moe_group gives: Experts + 1 ascending values
// from 0, at most Rows.
func (in GroupedLinearInputs) Validate() error {
	if len(in.Offsets) != in.Experts+1 {
		return fmt.Errorf("grouped linear: %d offsets for %d experts, want %d", len(in.Offsets), in.Experts, in.Experts+1)
	}
	if in.Offsets[0] != 0 {
		return fmt.Errorf("grouped linear: offsets[0] = %d, want 0", in.Offsets[0])
	}
	for e := 0; e < in.Experts; e++ {
		if in.Offsets[e+1] < in.Offsets[e] || int(in.Offsets[e+1]) > in.Rows {
			return fmt.Errorf("grouped linear: offsets[%d] = %d after %d: want ascending values up to rows %d",
				e+1, in.Offsets[e+1], in.Offsets[e], in.Rows)
		}
	}
	return nil
}

// GroupedLinear computes the reference of a grouped linear: each expert's rows against that
// expert's W, only the experts with rows generated (one W row at a time per worker), so memory
// stays O(Rows·K + Rows·N).
func GroupedLinear(in GroupedLinearInputs) (GroupedLinearReference, error) {
	if err := in.Validate(); err != nil {
		return GroupedLinearReference{}, err
	}
	x := Fill(in.DType, in.SeedX, in.ScaleX, in.Rows*in.K)
	ref := GroupedLinearReference{
		Want:    make([]float64, in.Rows*in.N),
		Bound:   make([]float64, in.Rows*in.N),
		Covered: make([]bool, in.Rows),
	}
	type job struct{ e, j int }
	jobs := make(chan job, 256)
	var wg sync.WaitGroup
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := make([]float64, in.K)
			for jb := range jobs {
				base := (uint64(jb.e)*uint64(in.N) + uint64(jb.j)) * uint64(in.K)
				for kk := range w {
					w[kk] = float64(FillValue(in.DType, in.SeedW, in.ScaleW, base+uint64(kk)))
				}
				var bias float64
				if in.HasBias {
					bias = float64(FillValue(in.DType, in.SeedBias, in.ScaleBias, uint64(jb.e)*uint64(in.N)+uint64(jb.j)))
				}
				for r := int(in.Offsets[jb.e]); r < int(in.Offsets[jb.e+1]); r++ {
					xr := x[r*in.K : (r+1)*in.K]
					var sum, abs float64
					for kk, wv := range w {
						p := float64(xr[kk]) * wv
						sum += p
						abs += math.Abs(p)
					}
					at := r*in.N + jb.j
					ref.Want[at] = sum + bias
					ref.Bound[at] = LinearElementBound(in.DType, in.K+1, sum+bias, abs+math.Abs(bias))
				}
			}
		}()
	}
	for e := 0; e < in.Experts; e++ {
		for r := int(in.Offsets[e]); r < int(in.Offsets[e+1]); r++ {
			ref.Covered[r] = true
		}
		if in.Offsets[e+1] == in.Offsets[e] {
			continue // no rows: its W is never generated, as the kernel never reads it
		}
		for j := 0; j < in.N; j++ {
			jobs <- job{e, j}
		}
	}
	close(jobs)
	wg.Wait()
	return ref, nil
}
