package cgo_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// The whole-wave plans against the float64 reference: stream-K in the tiled kernel, two and
// four warps a row pair in the GEMV, split-K in both, the MMA's block sizes, at the awkward
// shapes, on the emulator's 8 SMs and as a 132-SM card plans them (DB_EMU_SM_COUNT), where
// the planners take other paths. Each way of sharing the work must have been planned somewhere
// in the list, so that a change of the planners cannot leave one untested.
func TestLinearWholeWavePlans(t *testing.T) {
	testtier.Slow(t, "plans every preset's linear launches on a 132-SM emulated card")
	lib := cgotest.Emu(t)
	type shape struct {
		dt          cgo.DType
		batch, n, k int
		variant     cgo.LinearVariant
		splitK      int
	}
	bf, fp := cgo.DTypeBF16, cgo.DTypeFP16
	shapes := []shape{
		// GEMV: row pairs shared by 1, 2 or 4 warps; K split over blocks
		{bf, 1, 130, 4104, cgo.LinearAuto, 0}, {fp, 1, 4099, 136, cgo.LinearAuto, 0},
		{bf, 2, 7, 4104, cgo.LinearAuto, 0}, {fp, 3, 1, 4104, cgo.LinearAuto, 0},
		{bf, 4, 4099, 4104, cgo.LinearGEMV, 0}, {fp, 1, 130, 8, cgo.LinearAuto, 0},
		{bf, 1, 7, 4104, cgo.LinearGEMV, 3}, {fp, 2, 130, 4104, cgo.LinearGEMV, 64},
		{fp, 1, 3072, 4104, cgo.LinearAuto, 0}, // 132 SMs: 1536 row pairs fill whole waves with 4 warps a pair
		// MMA, or the tiled kernel where the MMA's units cannot fill the card
		{bf, 5, 4099, 136, cgo.LinearAuto, 0}, {fp, 16, 130, 4104, cgo.LinearAuto, 0},
		{bf, 9, 4099, 4104, cgo.LinearMMA, 0},
		// tiled: stream-K, split-K, no split; more splits than k tiles
		{bf, 17, 896, 136, cgo.LinearTiled, 0}, {fp, 33, 896, 4104, cgo.LinearTiled, 0},
		{bf, 100, 130, 4104, cgo.LinearAuto, 0}, {fp, 255, 130, 136, cgo.LinearAuto, 0},
		{bf, 256, 7, 4104, cgo.LinearAuto, 0}, {fp, 257, 130, 136, cgo.LinearTiled, 0},
		{bf, 1000, 130, 136, cgo.LinearAuto, 0}, {fp, cgo.MaxBatch, 1, 4104, cgo.LinearAuto, 0},
		{bf, 17, 4099, 8, cgo.LinearTiled, 0}, {fp, 33, 130, 136, cgo.LinearTiled, 7},
		{bf, 100, 7, 4104, cgo.LinearTiled, 64},
	}
	seen := map[string]bool{}
	for _, sms := range []string{"8", "132"} {
		t.Run("sms"+sms, func(t *testing.T) {
			t.Setenv("DB_EMU_SM_COUNT", sms)
			dev, err := lib.OpenDevice(0)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			for _, s := range shapes {
				name := fmt.Sprintf("%v_b%d_n%d_k%d_%s_split%d", s.dt, s.batch, s.n, s.k, s.variant, s.splitK)
				t.Run(name, func(t *testing.T) {
					for _, l := range planKinds(t, dev, cgo.LinearParams{X: 1 << 20, W: 1 << 20, Y: 1 << 20,
						Batch: s.batch, N: s.n, K: s.k, DType: s.dt, Variant: s.variant, SplitK: s.splitK}) {
						seen[l] = true
					}
					runLinear(t, dev, s.dt, s.batch, s.n, s.k, planned(t, dev, s.dt, s.batch, s.n, s.k, s.variant), s.splitK)
				})
			}
		})
	}
	for _, want := range []string{"gemv, 1 warp a pair", "gemv, 2 warps a pair", "gemv, 4 warps a pair", "gemv split-K",
		"mma", "tiled", "tiled split-K", "tiled stream-K"} {
		if !seen[want] {
			t.Errorf("no shape of the list was planned as %s (planned: %v)", want, seen)
		}
	}
}

// planned resolves AUTO, so that runLinear checks the plan it runs.
func planned(t *testing.T, dev *cgo.Device, dt cgo.DType, batch, n, k int, v cgo.LinearVariant) cgo.LinearVariant {
	t.Helper()
	p, _, err := dev.LinearPlan(cgo.LinearParams{X: 1 << 20, W: 1 << 20, Y: 1 << 20, Batch: batch, N: n, K: k, DType: dt, Variant: v})
	if err != nil {
		t.Fatal(err)
	}
	return p.Variant
}

// planKinds names how a call's launches share its work.
func planKinds(t *testing.T, dev *cgo.Device, p cgo.LinearParams) []string {
	t.Helper()
	launches, err := dev.LinearLaunches(p)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	main := launches[0].Kernel
	switch {
	case strings.Contains(main, "linear_gemv_kernel"):
		for _, kw := range []string{"1", "2", "4"} {
			if strings.HasSuffix(main, ", "+kw+">") {
				kinds = append(kinds, "gemv, "+kw+" warp"+map[bool]string{true: "", false: "s"}[kw == "1"]+" a pair")
			}
		}
		if len(launches) > 1 {
			kinds = append(kinds, "gemv split-K")
		}
	case strings.Contains(main, "linear_mma_kernel"):
		kinds = append(kinds, "mma")
	case strings.Contains(main, "linear_tiled_kernel"):
		kinds = append(kinds, "tiled")
		if len(launches) > 1 && strings.Contains(launches[1].Kernel, "streamk") {
			kinds = append(kinds, "tiled stream-K")
		} else if len(launches) > 1 {
			kinds = append(kinds, "tiled split-K")
		}
	}
	return kinds
}
