package cgo_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// db_mla_rope_append against bench/ref on the emulator: kv_a rows and q_pe at strides that are
// not the dense ones (q_pe inside q_b_proj's rows, after each head's q_nope), odd batches, 1 to
// 128 heads, a skipped sequence, the cache and q_out poisoned before the run: every element the
// op does not own (q_out's latent part, the cache's other rows) must stay poisoned.
func TestMLARopeAppendMatchesReference(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	cases := []struct {
		heads, nope, batch, capacity int
		positions                    []int32
		kvStride                     int
		dtype                        ref.DType
	}{
		{1, 8, 1, 1, []int32{0}, 0, ref.BF16},
		{3, 16, 3, 9, []int32{4, 8, -1}, 584, ref.BF16},
		{16, 128, 5, 7, []int32{6, 0, 3, 7, 2}, 0, ref.FP16}, // position 7 is past capacity 7: skipped
		{128, 32, 2, 4, []int32{3, 131}, 576 + 16, ref.BF16},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("heads%d nope%d batch%d %s", c.heads, c.nope, c.batch, c.dtype), func(t *testing.T) {
			seed := uint64(2000 + 10*i)
			const latent, rope, qk = 512, 64, 576
			kvStride := c.kvStride
			if kvStride == 0 {
				kvStride = qk
			}
			headStride := c.nope + rope
			rowStride := c.heads*headStride + 8 // a gap after each sequence's heads
			kvA, kvAv := soFilled(t, dev, c.dtype, c.batch*kvStride, seed)
			norm, normV := soFilled(t, dev, c.dtype, latent, seed+1)
			q, qv := soFilled(t, dev, c.dtype, c.batch*rowStride, seed+2)
			qOut := soPoisoned(t, dev, c.batch*c.heads*qk*c.dtype.Bytes())
			cache := soPoisoned(t, dev, c.batch*c.capacity*qk*c.dtype.Bytes())
			pos := soInts(t, dev, c.positions)
			r := cgo.Rope{Theta: 10000, Scaling: cgo.RopeDefault, RotaryDim: rope}
			err := dev.MLARopeAppend(cgo.MLARopeAppendParams{KVA: kvA.Ptr, KVNorm: norm.Ptr,
				QPE: q.Ptr + uint64(c.nope*c.dtype.Bytes()), QOut: qOut.Ptr, Positions: pos.Ptr,
				Cache: cgo.MLACache(cache.Ptr, cgo.DType(c.dtype), c.capacity), Rope: r, Eps: 1e-5,
				Batch: c.batch, QHeads: c.heads, KVARowStride: c.kvStride, QPERowStride: rowStride, QPEHeadStride: headStride})
			if err != nil {
				t.Fatal(err)
			}
			gotCache := soReadFloats(t, cache, c.dtype, c.batch*c.capacity*qk)
			gotQ := soReadFloats(t, qOut, c.dtype, c.batch*c.heads*qk)
			rr := ref.Rope{Theta: 10000, Scaling: ref.RopeDefault, RotaryDim: rope}
			var got []float32
			var want, bounds []float64
			ownedCache := make([]bool, len(gotCache))
			ownedQ := make([]bool, len(gotQ))
			for b, p := range c.positions {
				if p < 0 || int(p) >= c.capacity {
					continue
				}
				row := kvAv[b*kvStride : b*kvStride+qk]
				w, bd := ref.MLALatentRow(c.dtype, rr, row, normV, int(p), 1e-5)
				at := (b*c.capacity + int(p)) * qk
				got, want, bounds = append(got, gotCache[at:at+qk]...), append(want, w...), append(bounds, bd...)
				for i := at; i < at+qk; i++ {
					ownedCache[i] = true
				}
				for h := 0; h < c.heads; h++ {
					src := b*rowStride + h*headStride + c.nope
					w, bd := ref.RopeHead(rr, c.dtype, qv[src:src+rope], int(p))
					at := (b*c.heads+h)*qk + latent
					got, want, bounds = append(got, gotQ[at:at+rope]...), append(want, w...), append(bounds, bd...)
					for i := at; i < at+rope; i++ {
						ownedQ[i] = true
					}
				}
			}
			if cmp := ref.Compare(got, want, bounds, 1); !cmp.Passed {
				t.Fatal(cmp.Reason())
			}
			for i, v := range gotCache {
				if !ownedCache[i] && v == v {
					t.Fatalf("cache element %d (sequence %d, token %d) was written: %v", i, i/qk/c.capacity, i/qk%c.capacity, v)
				}
			}
			for i, v := range gotQ {
				if !ownedQ[i] && v == v {
					t.Fatalf("q_out element %d (head row %d, element %d) was written: %v", i, i/qk, i%qk, v)
				}
			}
		})
	}
}

func TestMLARopeAppendBadParams(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 1<<16)
	ok := cgo.MLARopeAppendParams{KVA: buf.Ptr, KVNorm: buf.Ptr, QPE: buf.Ptr, QOut: buf.Ptr, Positions: buf.Ptr,
		Cache: cgo.MLACache(buf.Ptr, cgo.DTypeBF16, 4), Rope: cgo.Rope{Theta: 10000, RotaryDim: 64}, Eps: 1e-5,
		Batch: 1, QHeads: 2, QPERowStride: 128, QPEHeadStride: 64}
	cases := []struct {
		name string
		edit func(*cgo.MLARopeAppendParams)
		want string
	}{
		{"heads 129", func(p *cgo.MLARopeAppendParams) { p.QHeads = 129 }, "q_heads 129 out of range 1..128"},
		{"batch 0", func(p *cgo.MLARopeAppendParams) { p.Batch = 0 }, "batch 0 out of range"},
		{"rotary 32", func(p *cgo.MLARopeAppendParams) { p.Rope.RotaryDim = 32 }, "rotary_dim 32"},
		{"llama3 scaling", func(p *cgo.MLARopeAppendParams) { p.Rope.Scaling = cgo.RopeLlama3 }, "rope scaling 3"},
		{"eps 0", func(p *cgo.MLARopeAppendParams) { p.Eps = 0 }, "eps 0 must be > 0"},
		{"kv stride", func(p *cgo.MLARopeAppendParams) { p.KVARowStride = 512 }, "kv_a_row_stride 512 must be 0 or at least 576"},
		{"head stride", func(p *cgo.MLARopeAppendParams) { p.QPEHeadStride = 32 }, "q_pe_head_stride 32 must be at least 64"},
		{"null q_out", func(p *cgo.MLARopeAppendParams) { p.QOut = 0 }, "must be device addresses"},
		{"paged", func(p *cgo.MLARopeAppendParams) { p.Cache.Layout = cgo.KVPaged }, "cache layout 1 unsupported"},
		{"head dim", func(p *cgo.MLARopeAppendParams) { p.Cache.HeadDim = 128 }, "head_dim 128"},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		if err := dev.MLARopeAppend(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
