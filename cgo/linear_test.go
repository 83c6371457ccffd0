package cgo_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// runLinear runs one linear call of the given variant and split on fresh hashed inputs and
// compares Y with the float64 reference; Y is poisoned with NaN first.
func runLinear(t *testing.T, dev *cgo.Device, dt cgo.DType, batch, n, k int, variant cgo.LinearVariant, splitK int) cgo.LinearParams {
	t.Helper()
	x, w, y := mustAlloc(t, dev, uint64(2*batch*k)), mustAlloc(t, dev, uint64(2*n*k)), mustAlloc(t, dev, uint64(2*batch*n))
	if err := x.FillHash(dt, uint64(batch*k), 7, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.FillHash(dt, uint64(n*k), 8, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := y.Memset(0xFF); err != nil {
		t.Fatal(err)
	}
	params := cgo.LinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, Batch: batch, N: n, K: k, DType: dt, Variant: variant, SplitK: splitK}
	resolved, workspace, err := dev.LinearPlan(params)
	if err != nil {
		t.Fatalf("LinearPlan(%+v): %v", params, err)
	}
	if resolved.Variant != variant || (splitK > 0 && resolved.SplitK != splitK) {
		t.Errorf("plan of %s split %d ran %s split %d", variant, splitK, resolved.Variant, resolved.SplitK)
	}
	if workspace > 0 {
		ws := mustAlloc(t, dev, workspace)
		resolved.Workspace, resolved.WorkspaceBytes = ws.Ptr, ws.Bytes
	}
	if err := dev.Linear(resolved); err != nil {
		t.Fatal(err)
	}
	raw := make([]uint16, batch*n)
	if err := cgo.Read(y, raw); err != nil {
		t.Fatal(err)
	}
	rdt := ref.BF16
	if dt == cgo.DTypeFP16 {
		rdt = ref.FP16
	}
	got := make([]float32, len(raw))
	for i, h := range raw {
		if rdt == ref.BF16 {
			got[i] = ref.BF16ToFloat32(h)
		} else {
			got[i] = ref.FP16ToFloat32(h)
		}
	}
	want := ref.Linear(ref.LinearInputs{DType: rdt, Batch: batch, N: n, K: k, SeedX: 7, SeedW: 8, ScaleX: 1, ScaleW: 0.25})
	if c := ref.Compare(got, want.Want, want.ElementBounds(rdt, k), ref.LinearTolerance(rdt)); !c.Passed {
		t.Errorf("linear %s batch %d n %d k %d split %d: %s", resolved.Variant, batch, n, k, resolved.SplitK, c.Reason())
	}
	return resolved
}

// Every variant through the Go binding, at shapes past a tile edge in n, k and batch, and the
// tiled kernel with more splits than it has k tiles.
func TestLinearVariants(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		cases := []struct {
			dt          cgo.DType
			batch, n, k int
			variant     cgo.LinearVariant
			splitK      int
		}{
			{cgo.DTypeBF16, 1, 130, 136, cgo.LinearGEMV, 0},
			{cgo.DTypeFP16, 9, 130, 136, cgo.LinearMMA, 0},
			{cgo.DTypeBF16, 33, 130, 136, cgo.LinearTiled, 0},
			{cgo.DTypeFP16, 257, 7, 136, cgo.LinearTiled, 5}, // 3 k tiles in 5 splits
			{cgo.DTypeBF16, cgo.MaxBatch, 9, 24, cgo.LinearTiled, 0},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v_b%d_n%d_k%d_%s_split%d", c.dt, c.batch, c.n, c.k, c.variant, c.splitK), func(t *testing.T) {
				runLinear(t, dev, c.dt, c.batch, c.n, c.k, c.variant, c.splitK)
			})
		}
	})
}

// The batch limit is DB_MAX_BATCH, and a batch past it is refused by name before any launch.
func TestLinearBatchLimit(t *testing.T) {
	if cgo.MaxBatch != 1024 {
		t.Errorf("MaxBatch = %d, want 1024", cgo.MaxBatch)
	}
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		buf := mustAlloc(t, dev, 1<<16)
		p := cgo.LinearParams{X: buf.Ptr, W: buf.Ptr, Y: buf.Ptr, Batch: cgo.MaxBatch + 1, N: 8, K: 8, DType: cgo.DTypeBF16, Variant: cgo.LinearTiled}
		_, _, err := dev.LinearPlan(p)
		if !errors.Is(err, cgo.ErrUnsupportedShape) || !strings.Contains(err.Error(), "batch=1025") {
			t.Errorf("LinearPlan(batch=1025) = %v, want ErrUnsupportedShape naming batch=1025", err)
		}
		p.Batch, p.K = 4, 12
		if _, _, err := dev.LinearPlan(p); !errors.Is(err, cgo.ErrUnsupportedShape) || !strings.Contains(err.Error(), "k=12") {
			t.Errorf("LinearPlan(k=12) = %v, want ErrUnsupportedShape naming k=12", err)
		}
	})
}
