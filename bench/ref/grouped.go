package ref

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/decodebench/decodebench/cgo"
)

// GroupedLinearInputs describes one db_grouped_linear call whose X, W and bias were filled on
// the device by db_fill_hash: X [Rows x K], W [Experts x N x K], Bias [Experts x N] (when
// HasBias), and Offsets (Experts + 1 int32s) saying which rows each expert takes. Offsets nil
// is the call without offsets: Experts groups of Rows rows each, group g's row r at element
// r*XRowStride + g*XGroupStride of the X buffer (filled whole, XElements of it), and at
// r*YRowStride + g*YGroupStride of Y; strides 0 are the dense ones, as in the kernel.
type GroupedLinearInputs struct {
	DType                     DType
	Rows, Experts, N, K       int
	Offsets                   []int32
	SeedX, SeedW, SeedBias    uint64
	ScaleX, ScaleW, ScaleBias float32
	HasBias                   bool

	XRowStride, XGroupStride int
	YRowStride, YGroupStride int
	// Format, when not WeightDense, is the experts' quantized format: expert e's W is the
	// db_fill_quantized matrix ExpertQuantFill(e) (N x K, seed ExpertSeed(SeedW, e), scale
	// ScaleW), dequantised exactly.
	Format    cgo.WeightFormat
	GroupSize int
	// Groups, when not nil, limits the reference to those groups (experts): the others' rows
	// are not Covered and their W is not generated, so a large call is checked on a sample.
	Groups []int
}

// GroupedLinearReference is the exact result of the dtype-rounded inputs, in float64.
type GroupedLinearReference struct {
	// Want[r*N+j] = Σ_k X[r,k]·W[e,j,k] (+ Bias[e,j]) for the expert e whose rows hold r; for a
	// call without offsets, row r of group g is Want[(g*Rows+r)*N+j] (LogicalRows in all).
	Want []float64
	// Bound[r*N+j]: LinearElementBound over the k products and the bias add.
	Bound []float64
	// Covered[r]: whether some expert takes row r (a row no expert takes is not written).
	Covered []bool
}

// Uniform reports whether the call has no offsets: Experts groups of Rows rows.
func (in GroupedLinearInputs) Uniform() bool { return in.Offsets == nil }

// LogicalRows is the rows of Want: Experts*Rows without offsets, else Rows.
func (in GroupedLinearInputs) LogicalRows() int {
	if in.Uniform() {
		return in.Experts * in.Rows
	}
	return in.Rows
}

// Strides gives the strides in elements with the dense defaults filled in.
func (in GroupedLinearInputs) Strides() (xRow, xGroup, yRow, yGroup int) {
	xRow, xGroup, yRow, yGroup = in.XRowStride, in.XGroupStride, in.YRowStride, in.YGroupStride
	if xRow == 0 {
		xRow = in.K
	}
	if yRow == 0 {
		yRow = in.N
	}
	if in.Uniform() {
		if xGroup == 0 {
			xGroup = in.Rows * in.K
		}
		if yGroup == 0 {
			yGroup = in.Rows * in.N
		}
	}
	return
}

// XElements and YElements are the buffer lengths the strided layout spans (the last row's
// end), in elements.
func (in GroupedLinearInputs) XElements() int {
	xr, xg, _, _ := in.Strides()
	g := 0
	if in.Uniform() {
		g = in.Experts - 1
	}
	return (in.Rows-1)*xr + g*xg + in.K
}

func (in GroupedLinearInputs) YElements() int {
	_, _, yr, yg := in.Strides()
	g := 0
	if in.Uniform() {
		g = in.Experts - 1
	}
	return (in.Rows-1)*yr + g*yg + in.N
}

// YIndex is the element of the Y buffer that holds Want[row*N+j] (row a logical row).
func (in GroupedLinearInputs) YIndex(row, j int) int {
	_, _, yr, yg := in.Strides()
	if in.Uniform() {
		return (row%in.Rows)*yr + (row/in.Rows)*yg + j
	}
	return row*yr + j
}

// ExpertSeed is the db_fill_quantized seed of expert e's matrix in a grouped linear whose
// experts are filled one by one from seed.
func ExpertSeed(seed uint64, e int) uint64 { return Hash64(Hash64(seed, 3), uint64(e)) }

// ExpertQuantFill is expert e's quantized W (Format not WeightDense).
func (in GroupedLinearInputs) ExpertQuantFill(e int) QuantFill {
	return QuantFill{Format: in.Format, N: in.N, K: in.K, GroupSize: in.GroupSize,
		Seed: ExpertSeed(in.SeedW, e), Scale: in.ScaleW}
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
	if in.Uniform() {
		if in.Rows < 1 || in.Experts < 1 {
			return fmt.Errorf("grouped linear: %d groups of %d rows, want at least 1 of 1", in.Experts, in.Rows)
		}
		return nil
	}
	if in.XGroupStride != 0 || in.YGroupStride != 0 {
		return fmt.Errorf("grouped linear: group strides %d, %d with offsets, want 0", in.XGroupStride, in.YGroupStride)
	}
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
	x := Fill(in.DType, in.SeedX, in.ScaleX, in.XElements())
	xr, xg, _, _ := in.Strides()
	rows := in.LogicalRows()
	ref := GroupedLinearReference{
		Want:    make([]float64, rows*in.N),
		Bound:   make([]float64, rows*in.N),
		Covered: make([]bool, rows),
	}
	// Group e's logical rows [first[e], first[e+1]) and where each row's x starts.
	first := make([]int, in.Experts+1)
	xAt := make([]int, rows)
	for e := 0; e <= in.Experts; e++ {
		if in.Uniform() {
			first[e] = e * in.Rows
		} else {
			first[e] = int(in.Offsets[e])
		}
	}
	for r := range xAt {
		if in.Uniform() {
			xAt[r] = (r%in.Rows)*xr + (r/in.Rows)*xg
		} else {
			xAt[r] = r * xr
		}
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
				if in.Format != cgo.WeightDense {
					in.ExpertQuantFill(jb.e).Row(jb.j, w)
				} else {
					base := (uint64(jb.e)*uint64(in.N) + uint64(jb.j)) * uint64(in.K)
					for kk := range w {
						w[kk] = float64(FillValue(in.DType, in.SeedW, in.ScaleW, base+uint64(kk)))
					}
				}
				var bias float64
				if in.HasBias {
					bias = float64(FillValue(in.DType, in.SeedBias, in.ScaleBias, uint64(jb.e)*uint64(in.N)+uint64(jb.j)))
				}
				for r := first[jb.e]; r < first[jb.e+1]; r++ {
					xr := x[xAt[r] : xAt[r]+in.K]
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
	chosen := make([]bool, in.Experts)
	for e := range chosen {
		chosen[e] = in.Groups == nil
	}
	for _, g := range in.Groups {
		if g >= 0 && g < in.Experts {
			chosen[g] = true
		}
	}
	for e := 0; e < in.Experts; e++ {
		if !chosen[e] {
			continue
		}
		for r := first[e]; r < first[e+1]; r++ {
			ref.Covered[r] = true
		}
		if first[e+1] == first[e] {
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
