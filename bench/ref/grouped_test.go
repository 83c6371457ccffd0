package ref

import (
	"math"
	"strings"
	"testing"
)

func TestExpertOffsets(t *testing.T) {
	got := ExpertOffsets([]int{3, 0, 2})
	want := []int32{0, 3, 3, 5}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ExpertOffsets: %v, want %v", got, want)
		}
	}
}

// One expert that takes every row is the plain linear.
func TestGroupedLinearOneExpertIsLinear(t *testing.T) {
	in := GroupedLinearInputs{DType: BF16, Rows: 5, Experts: 1, N: 9, K: 24, Offsets: []int32{0, 5},
		SeedX: 1, SeedW: 2, ScaleX: 1, ScaleW: 0.5}
	got, err := GroupedLinear(in)
	if err != nil {
		t.Fatal(err)
	}
	lin := Linear(LinearInputs{DType: BF16, Batch: 5, N: 9, K: 24, SeedX: 1, SeedW: 2, ScaleX: 1, ScaleW: 0.5})
	for i := range lin.Want {
		if got.Want[i] != lin.Want[i] {
			t.Fatalf("element %d: %v, want the linear's %v", i, got.Want[i], lin.Want[i])
		}
	}
}

// Experts take their own rows, their own W (element e·N·K + j·K + k) and bias (e·N + j); a row
// no expert takes is not covered.
func TestGroupedLinearExpertsTakeTheirRows(t *testing.T) {
	const n, k = 3, 8
	in := GroupedLinearInputs{DType: FP16, Rows: 5, Experts: 3, N: n, K: k, Offsets: []int32{0, 2, 2, 4},
		SeedX: 5, SeedW: 6, SeedBias: 7, ScaleX: 1, ScaleW: 1, ScaleBias: 1, HasBias: true}
	got, err := GroupedLinear(in)
	if err != nil {
		t.Fatal(err)
	}
	expertOf := []int{0, 0, 2, 2, -1}
	for r, e := range expertOf {
		if got.Covered[r] != (e >= 0) {
			t.Fatalf("row %d: covered %v", r, got.Covered[r])
		}
		if e < 0 {
			continue
		}
		for j := range n {
			want := float64(FillValue(FP16, 7, 1, uint64(e*n+j)))
			for kk := range k {
				want += float64(FillValue(FP16, 5, 1, uint64(r*k+kk))) * float64(FillValue(FP16, 6, 1, uint64((e*n+j)*k+kk)))
			}
			if math.Abs(got.Want[r*n+j]-want) > 1e-12 || got.Bound[r*n+j] <= 0 {
				t.Fatalf("row %d, j %d: %v (bound %v), want %v", r, j, got.Want[r*n+j], got.Bound[r*n+j], want)
			}
		}
	}
}

func TestGroupedLinearValidates(t *testing.T) {
	base := GroupedLinearInputs{DType: BF16, Rows: 4, Experts: 2, N: 1, K: 8}
	for _, c := range []struct {
		offsets []int32
		want    string
	}{
		{[]int32{0, 4}, "2 offsets for 2 experts"},
		{[]int32{1, 2, 4}, "offsets[0] = 1"},
		{[]int32{0, 3, 2}, "offsets[2] = 2 after 3"},
		{[]int32{0, 2, 5}, "up to rows 4"},
	} {
		in := base
		in.Offsets = c.offsets
		if _, err := GroupedLinear(in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("offsets %v: %v, want an error containing %q", c.offsets, err, c.want)
		}
	}
}
