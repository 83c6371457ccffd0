package cgo_test

// Tests for kernel bugs the emulator matrix once let through (each was planted in the kernels and
// passed every other test): a k-loop stride that only matters when a warp goes round its k loop
// twice with more than four warps in the block, a combine that reuses its reduction scratch
// without a barrier (only visible with more than 32 splits, under a hazard schedule), a softmax
// that forgets to subtract the running max (only visible when scores overflow exp, i.e. with a
// large softmax scale), and a non-atomic add across blocks (only visible to the interleave
// schedule's cross-block write check). The 32-bit byte offset into a paged KV cache past 4 GiB is
// kernels/emu/emu_test.cpp's test_kv_cache_past_4gib (it places pages byte by byte in a sparse
// buffer, which the Go API cannot).
//
// The tests that need a hazard mode to see their bug set it themselves (DB_EMU_SCHEDULE and
// DB_EMU_HAZARDS are read at each launch), so plain go test kills every survivor; the names start
// with TestSurvivor so that make emu-hazard-test also runs all of them under every schedule.

import (
	"fmt"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// hazardSchedules are the schedules a test that needs one runs under, each with every hazard on:
// the reordered threads of one block, then several blocks in flight (the cross-block write check).
var hazardSchedules = []string{"reverse", "shuffle:2", "interleave:2"}

// underSchedules runs test once per hazard schedule, as a subtest named after it.
func underSchedules(t *testing.T, test func(t *testing.T)) {
	for _, schedule := range hazardSchedules {
		t.Run(schedule, func(t *testing.T) {
			t.Setenv("DB_EMU_SCHEDULE", schedule)
			t.Setenv("DB_EMU_HAZARDS", "all")
			test(t)
		})
	}
}

// h200Device is the emulated device presenting 132 SMs (DB_EMU_SM_COUNT), so the planners choose
// the block shapes they would on an H200. t.Setenv keeps the test off t.Parallel; the count is
// read when the device's context is created.
func h200Device(t *testing.T) *cgo.Device {
	t.Setenv("DB_EMU_SM_COUNT", "132")
	dev := cgotest.EmuDevice(t)
	props, err := dev.Props()
	if err != nil {
		t.Fatal(err)
	}
	if props.SMCount != 132 {
		t.Fatalf("DB_EMU_SM_COUNT=132, yet the device reports %d SMs", props.SMCount)
	}
	return dev
}

// TestSurvivorLinearKLoops: shapes that send a warp round its k loop two or more times, with the
// 8 warps per block the MMA planner gives a small grid on 132 SMs (K = 2112: 33 k-steps of 64
// over 8 warps x 2 unrolled steps is three rounds, the last partial), and GEMV rows whose lanes
// go round their 128-chunk stride (K = 2112 is 264 chunks: three rounds at split-k 1, two at 2).
func TestSurvivorLinearKLoops(t *testing.T) {
	dev := h200Device(t)
	for _, tc := range []struct {
		variant         cgo.LinearVariant
		dtype           ref.DType
		batch, n, k, sk int
	}{
		{cgo.LinearMMA, ref.BF16, 5, 256, 2112, 0},  // 8 rows-of-batch tiles, U = 2: 3 rounds
		{cgo.LinearMMA, ref.FP16, 12, 130, 2112, 0}, // two batch tiles of 8, partial row tile
		{cgo.LinearMMA, ref.BF16, 40, 64, 1088, 0},  // batch groups of 32, U = 1: 17 steps, 3 rounds
		{cgo.LinearGEMV, ref.BF16, 1, 256, 2112, 1},
		{cgo.LinearGEMV, ref.FP16, 3, 130, 2112, 2},
		{cgo.LinearGEMV, ref.BF16, 2, 64, 4104, 0}, // the 132-SM auto split
	} {
		t.Run(fmt.Sprintf("%v %v batch %d n %d k %d split %d", tc.variant, tc.dtype, tc.batch, tc.n, tc.k, tc.sk), func(t *testing.T) {
			runLinear(t, dev, cgo.DType(tc.dtype), tc.batch, tc.n, tc.k, tc.variant, tc.sk)
		})
	}
}

// TestSurvivorAttentionManySplits: more than 32 splits, so the combine's block reductions have
// partial values in more than one warp (a reused scratch without its barrier then mixes the max
// of one reduction into the sum of the next under the reverse and shuffle schedules).
func TestSurvivorAttentionManySplits(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	underSchedules(t, func(t *testing.T) { attentionManySplits(t, dev) })
}

func attentionManySplits(t *testing.T, dev *cgo.Device) {
	for _, variant := range []cgo.AttentionVariant{cgo.AttentionSIMT, cgo.AttentionMMA} {
		for _, splits := range []int{33, 41, 64} {
			// 64-token splits (the head dim 64 tiles), the last one 5 tokens short
			shape := ref.AttentionShape{Batch: 1, QHeads: 4, KVHeads: 1, HeadDim: 64, Context: []int{64*splits - 5}}
			t.Run(fmt.Sprintf("%v %d splits", variant, splits), func(t *testing.T) {
				a := newAttnSetup(t, dev, shape, ref.BF16, 3)
				a.params.Variant = variant
				got, p := a.run(t, dev, splits)
				if p.NumSplits != splits {
					t.Fatalf("plan changed the forced split count %d to %d", splits, p.NumSplits)
				}
				if tokens := shape.Context[0]; p.SplitTokens*(splits-1) >= tokens {
					t.Fatalf("%d splits of %d tokens leave the last empty: not the case this test is for", splits, p.SplitTokens)
				}
				k, v := a.caches()
				a.check(t, got, k, v, p)
			})
		}
	}
}

// TestSurvivorAttentionLargeScale: a softmax scale large enough that scale * q.k overflows exp
// in fp32 (hashed inputs in [-1, 1) give |q.k| up to about 10 at head dim 128; times 64 is far
// past the 88 where exp overflows), so a softmax that does not subtract the running max gives
// inf / inf. Contiguous and paged, one split and several (the combine rescales too).
func TestSurvivorAttentionLargeScale(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		name   string
		shape  ref.AttentionShape
		dtype  ref.DType
		splits int
	}{
		{"contiguous bf16", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 128, Context: []int{70, 300}, Scale: 64}, ref.BF16, 1},
		{"paged fp16 split 4", ref.AttentionShape{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 128, Context: []int{300, 45},
			Layout: ref.KVPaged, PageSize: 16, Scale: 64}, ref.FP16, 4},
	} {
		for _, variant := range []cgo.AttentionVariant{cgo.AttentionSIMT, cgo.AttentionMMA} {
			t.Run(tc.name+" "+variant.String(), func(t *testing.T) {
				a := newAttnSetup(t, dev, tc.shape, tc.dtype, 4)
				a.params.Variant = variant
				got, p := a.run(t, dev, tc.splits)
				if p.Scale != float32(tc.shape.Scale) {
					t.Fatalf("the plan changed the scale %g to %g", tc.shape.Scale, p.Scale)
				}
				k, v := a.caches()
				a.check(t, got, k, v, p)
			})
		}
	}
}

// TestSurvivorProbeReadAcrossBlocks: the READ probe's blocks meet in one uint32 sum. With a plain
// += instead of the atomic, sequential blocks still add up; the interleave schedule's
// cross-block write check fails the launch.
func TestSurvivorProbeReadAcrossBlocks(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	const words = 1 << 14
	values := make([]uint32, words)
	var want uint32
	for i := range values {
		values[i] = uint32(i)*2654435761 + 12345
		want += values[i]
	}
	a, result := mustAlloc(t, dev, 4*words), mustAlloc(t, dev, 4)
	if err := cgo.Write(a, values); err != nil {
		t.Fatal(err)
	}
	underSchedules(t, func(t *testing.T) {
		if err := result.Memset(0xFF); err != nil {
			t.Fatal(err)
		}
		r, err := dev.Probe(cgo.ProbeParams{Kind: cgo.ProbeRead, A: a.Ptr, Words: words, Result: result.Ptr, Blocks: 8, Threads: 64})
		if err != nil {
			t.Fatal(err)
		}
		if r.BlocksUsed < 2 {
			t.Fatalf("the probe ran %d block(s): nothing meets across blocks", r.BlocksUsed)
		}
		got := make([]uint32, 1)
		if err := cgo.Read(result, got); err != nil {
			t.Fatal(err)
		}
		if got[0] != want {
			t.Errorf("read sum %#x, want %#x", got[0], want)
		}
	})
}
