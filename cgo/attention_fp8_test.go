package cgo_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The fp8 e4m3 KV cache: both decode kernels over codes written from the host (every finite
// code, subnormals and +-448 included), the append's quantisation bit for bit, NaN codes and
// scales. The scales are not powers of two, so a scale applied twice, or K's and V's swapped,
// moves the output far outside the bounds.

const fp8KScale, fp8VScale = 0.0123, 0.0217

type fp8Setup struct {
	shape          ref.AttentionShape
	act            ref.DType
	seeds          ref.AttentionSeeds
	table          []int32
	kCodes, vCodes []byte
	// the scale of each KV head: the tensor's, or with per-head scales E4M3SpreadScales
	// (its 0 entries the tensor's)
	kScales, vScales []float32
	params           cgo.AttentionParams
	q, k, v, out     *cgo.Buffer
	lens, pages      *cgo.Buffer
}

func newFP8Setup(t *testing.T, dev *cgo.Device, s ref.AttentionShape, act ref.DType, seed uint64) *fp8Setup {
	t.Helper()
	return newFP8SetupScales(t, dev, s, act, seed, false)
}

// newFP8SetupScales is newFP8Setup with, where perHead is set, per-KV-head scales on the
// device: E4M3SpreadScales around the tensor scales, K's and V's patterns shifted by one head
// so that swapping them is caught too.
func newFP8SetupScales(t *testing.T, dev *cgo.Device, s ref.AttentionShape, act ref.DType, seed uint64, perHead bool) *fp8Setup {
	t.Helper()
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	a := &fp8Setup{shape: s, act: act, seeds: ref.NewAttentionSeeds(seed)}
	n := s.CacheElements()
	qBytes := uint64(s.QElements() * act.Bytes())
	a.q, a.out = mustAlloc(t, dev, qBytes), mustAlloc(t, dev, qBytes)
	a.k, a.v = mustAlloc(t, dev, uint64(n)), mustAlloc(t, dev, uint64(n))
	if err := a.q.FillHash(cgo.DType(act), uint64(s.QElements()), a.seeds.Q, 1); err != nil {
		t.Fatal(err)
	}
	a.kCodes, a.vCodes = ref.E4M3Codes(a.seeds.K, n), ref.E4M3Codes(a.seeds.V, n)
	a.writeCodes(t)
	a.lens = mustAlloc(t, dev, uint64(4*s.Batch))
	l32 := make([]int32, s.Batch)
	for i, c := range s.Context {
		l32[i] = int32(c)
	}
	if err := cgo.Write(a.lens, l32); err != nil {
		t.Fatal(err)
	}
	cache := cgo.KVCache{K: a.k.Ptr, V: a.v.Ptr, Layout: cgo.KVLayout(s.Layout), DType: cgo.DTypeFP8E4M3,
		KScale: fp8KScale, VScale: fp8VScale, ActDType: cgo.DType(act),
		KVHeads: s.KVHeads, HeadDim: s.HeadDim, Capacity: s.Capacity}
	if s.Layout == ref.KVPaged {
		a.table = s.ShuffledPageTable(a.seeds.PageTable)
		a.pages = mustAlloc(t, dev, uint64(4*len(a.table)))
		if err := cgo.Write(a.pages, a.table); err != nil {
			t.Fatal(err)
		}
		cache.PageTable, cache.PageSize, cache.NumPages, cache.PagesPerSeq = a.pages.Ptr, s.PageSize, s.NumPages, s.PagesPerSeq
	}
	a.kScales, a.vScales = ref.E4M3HeadScales(s.KVHeads, fp8KScale, nil), ref.E4M3HeadScales(s.KVHeads, fp8VScale, nil)
	if perHead {
		kh := ref.E4M3SpreadScales(fp8KScale, s.KVHeads)
		vh := ref.E4M3SpreadScales(fp8VScale, s.KVHeads+1)[1:]
		a.kScales, a.vScales = ref.E4M3HeadScales(s.KVHeads, fp8KScale, kh), ref.E4M3HeadScales(s.KVHeads, fp8VScale, vh)
		kb, vb := mustAlloc(t, dev, uint64(4*s.KVHeads)), mustAlloc(t, dev, uint64(4*s.KVHeads))
		if err := cgo.Write(kb, kh); err != nil {
			t.Fatal(err)
		}
		if err := cgo.Write(vb, vh); err != nil {
			t.Fatal(err)
		}
		cache.KScales, cache.VScales = kb.Ptr, vb.Ptr
	}
	a.params = cgo.AttentionParams{Q: a.q.Ptr, Out: a.out.Ptr, ContextLens: a.lens.Ptr, Cache: cache,
		Batch: s.Batch, QHeads: s.QHeads, MaxContext: s.MaxContext(), Scale: float32(s.Scale),
		Window: s.Window, Chunk: s.Chunk}
	return a
}

func (a *fp8Setup) writeCodes(t *testing.T) {
	t.Helper()
	if err := a.k.CopyFromHost(a.kCodes); err != nil {
		t.Fatal(err)
	}
	if err := a.v.CopyFromHost(a.vCodes); err != nil {
		t.Fatal(err)
	}
}

func (a *fp8Setup) readCodes(t *testing.T) (k, v []byte) {
	t.Helper()
	k, v = make([]byte, len(a.kCodes)), make([]byte, len(a.vCodes))
	if err := a.k.CopyToHost(k); err != nil {
		t.Fatal(err)
	}
	if err := a.v.CopyToHost(v); err != nil {
		t.Fatal(err)
	}
	return k, v
}

// run plans with splits (0 = auto) and variant, poisons the output and workspace, runs it and
// returns the output and the resolved params.
func (a *fp8Setup) run(t *testing.T, dev *cgo.Device, variant cgo.AttentionVariant, splits int) ([]float32, cgo.AttentionParams) {
	t.Helper()
	p := a.params
	p.Variant, p.NumSplits = variant, splits
	p, workspace, err := dev.AttentionPlan(p)
	if err != nil {
		t.Fatalf("AttentionPlan: %v", err)
	}
	if splits > 0 && p.NumSplits != splits {
		t.Fatalf("plan changed the forced split count %d to %d", splits, p.NumSplits)
	}
	if workspace > 0 {
		ws := mustAlloc(t, dev, workspace)
		if err := ws.Memset(0xFF); err != nil {
			t.Fatal(err)
		}
		p.Workspace, p.WorkspaceBytes = ws.Ptr, workspace
	}
	if err := a.out.Memset(0xFF); err != nil {
		t.Fatal(err)
	}
	if err := dev.Attention(p); err != nil {
		t.Fatalf("Attention: %v", err)
	}
	raw := make([]byte, a.out.Bytes)
	if err := a.out.CopyToHost(raw); err != nil {
		t.Fatal(err)
	}
	got, err := ref.Decode(a.act, raw)
	if err != nil {
		t.Fatal(err)
	}
	return got, p
}

// reference is the float64 attention over the dequantised codes.
func (a *fp8Setup) reference(t *testing.T, p cgo.AttentionParams) (ref.AttentionReference, []float64) {
	t.Helper()
	q := ref.Fill(a.act, a.seeds.Q, 1, a.shape.QElements())
	want, err := ref.Attention(a.shape, a.table, q, ref.E4M3DequantizeHeads(a.shape, a.kCodes, a.kScales),
		ref.E4M3DequantizeHeads(a.shape, a.vCodes, a.vScales))
	if err != nil {
		t.Fatal(err)
	}
	if p.Variant == cgo.AttentionMMA {
		return want, want.ElementBoundsMMA(a.act, p.NumSplits)
	}
	return want, want.ElementBounds(a.act, p.NumSplits)
}

func (a *fp8Setup) check(t *testing.T, got []float32, p cgo.AttentionParams) {
	t.Helper()
	want, bounds := a.reference(t, p)
	if c := ref.Compare(got, want.Want, bounds, ref.AttentionTolerance(a.act)); !c.Passed {
		t.Fatalf("%v, %d splits: %s", p.Variant, p.NumSplits, c.Reason())
	}
}

var fp8Variants = []cgo.AttentionVariant{cgo.AttentionSIMT, cgo.AttentionMMA}

// fp8Case is one shape of the fp8-cache attention, run at each of its splits (0: the planner's).
type fp8Case struct {
	name   string
	shape  ref.AttentionShape
	act    ref.DType
	splits []int
}

// runFP8Cases checks every case in both kernels against the reference, with the tensor scales
// or, where perHead is set, per-KV-head scales.
func runFP8Cases(t *testing.T, dev *cgo.Device, seed uint64, perHead bool, cases []fp8Case) {
	t.Helper()
	for _, tc := range cases {
		for _, variant := range fp8Variants {
			t.Run(tc.name+" "+variant.String(), func(t *testing.T) {
				a := newFP8SetupScales(t, dev, tc.shape, tc.act, seed, perHead)
				for _, splits := range tc.splits {
					got, p := a.run(t, dev, variant, splits)
					a.check(t, got, p)
				}
			})
		}
	}
}

func TestAttentionFP8Cache(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	runFP8Cases(t, dev, 11, false, []fp8Case{
		{"contiguous bf16 ragged", ref.AttentionShape{Batch: 3, QHeads: 8, KVHeads: 2, HeadDim: 128,
			Context: []int{1, 77, 300}, Capacity: 320}, ref.BF16, []int{1, 3, 0}},
		{"paged fp16 group 7", ref.AttentionShape{Batch: 2, QHeads: 7, KVHeads: 1, HeadDim: 64, Context: []int{40, 130},
			Layout: ref.KVPaged, PageSize: 16, PagesPerSeq: 9, NumPages: 23}, ref.FP16, []int{1, 2}},
		{"paged bf16 head dim 80 window", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 80,
			Context: []int{200, 33}, Window: 50, Layout: ref.KVPaged, PageSize: 32}, ref.BF16, []int{1, 2}},
		{"contiguous fp16 head dim 256 chunk", ref.AttentionShape{Batch: 2, QHeads: 2, KVHeads: 1, HeadDim: 256,
			Context: []int{90, 17}, Chunk: 64}, ref.FP16, []int{1, 2}},
		{"contiguous bf16 head dim 96 group 16", ref.AttentionShape{Batch: 1, QHeads: 16, KVHeads: 1, HeadDim: 96,
			Context: []int{150}}, ref.BF16, []int{3}},
	})
}

// Per-KV-head scales (db_kv_cache.k_scales, v_scales) in both kernels and both layouts, at odd
// batches, ragged contexts, forced and automatic splits and 1, 3 and 8 KV heads: each head's
// scale is a power of two 2 to 16 times its neighbours' (a 0 entry: the tensor's), so a block
// that reads another head's scale (the query head's, the next one's, V's for K) fails.
func TestAttentionFP8HeadScales(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	runFP8Cases(t, dev, 13, true, []fp8Case{
		{"contiguous bf16 8 kv heads ragged", ref.AttentionShape{Batch: 3, QHeads: 32, KVHeads: 8, HeadDim: 64,
			Context: []int{1, 77, 200}, Capacity: 210}, ref.BF16, []int{1, 3, 0}},
		{"paged fp16 3 kv heads group 1", ref.AttentionShape{Batch: 1, QHeads: 3, KVHeads: 3, HeadDim: 128,
			Context: []int{130}, Layout: ref.KVPaged, PageSize: 16, PagesPerSeq: 9, NumPages: 11}, ref.FP16, []int{1, 2}},
		{"paged bf16 1 kv head batch 5", ref.AttentionShape{Batch: 5, QHeads: 5, KVHeads: 1, HeadDim: 64,
			Context: []int{40, 3, 129, 64, 90}, Layout: ref.KVPaged, PageSize: 32}, ref.BF16, []int{0, 4}},
	})
	// a misaligned per-head scale array is refused before any launch
	a := newFP8SetupScales(t, dev, ref.AttentionShape{Batch: 1, QHeads: 2, KVHeads: 2, HeadDim: 64, Context: []int{20}},
		ref.BF16, 3, true)
	p := a.params
	p.Cache.VScales += 2
	if _, _, err := dev.AttentionPlan(p); err == nil || !strings.Contains(err.Error(), "4-byte aligned") {
		t.Errorf("misaligned v_scales: plan error %v, want one saying 4-byte aligned", err)
	}
	if err := dev.KVAppend(cgo.KVAppendParams{KNew: a.q.Ptr, VNew: a.q.Ptr, Positions: a.lens.Ptr, Cache: p.Cache, Batch: 1}); err == nil ||
		!strings.Contains(err.Error(), "4-byte aligned") {
		t.Errorf("misaligned v_scales: append error %v, want one saying 4-byte aligned", err)
	}
}

// The append quantises round-to-nearest-even with saturation: ties, subnormals, values past
// 448, infinities, -0 and NaN, compared code for code with the reference, and the rest of the
// cache left as it was; then the attention reads the appended token.
func TestAttentionFP8Append(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		layout  ref.KVLayout
		act     ref.DType
		perHead bool
	}{{ref.KVContiguous, ref.BF16, false}, {ref.KVPaged, ref.FP16, false}, {ref.KVContiguous, ref.FP16, true},
		{ref.KVPaged, ref.BF16, true}} {
		t.Run(fmt.Sprintf("%v %v per-head %v", tc.layout, tc.act, tc.perHead), func(t *testing.T) {
			s := ref.AttentionShape{Batch: 2, QHeads: 6, KVHeads: 3, HeadDim: 64, Context: []int{18, 70},
				Layout: tc.layout, PageSize: 16}
			a := newFP8SetupScales(t, dev, s, tc.act, 5, tc.perHead)
			rows := s.Batch * s.KVHeads * s.HeadDim
			// the values in units of the scale: e4m3 midpoints (ties), the saturating ones,
			// subnormals; the rest random, some past 448
			special := []float32{1.0625, 1.1875, 232, 248, 448, 464, 480, 1e6, -1e6, 0x1p-10, 3 * 0x1p-10,
				15 * 0x1p-10, 0x1p-20, -0x1p-9, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)),
				float32(math.Inf(-1)), 0.3, -17.5}
			newVals := func(seed uint64, scales []float32) []float32 {
				x := ref.Fill(tc.act, seed, 600, rows)
				for i := range special {
					x[i*3] = special[i]
				}
				for i := range x { // the cache reads x / scale: multiply back, rounded to the activations
					x[i] = ref.Round(tc.act, x[i]*scales[(i/s.HeadDim)%s.KVHeads])
				}
				return x
			}
			kn, vn := newVals(a.seeds.KNew, a.kScales), newVals(a.seeds.VNew, a.vScales)
			kNew, vNew := mustAlloc(t, dev, uint64(2*rows)), mustAlloc(t, dev, uint64(2*rows))
			for _, f := range []struct {
				b *cgo.Buffer
				x []float32
			}{{kNew, kn}, {vNew, vn}} {
				raw := make([]uint16, len(f.x))
				for i, x := range f.x {
					if tc.act == ref.BF16 {
						raw[i] = ref.BF16FromFloat32(x)
					} else {
						raw[i] = ref.FP16FromFloat32(x)
					}
				}
				if err := cgo.Write(f.b, raw); err != nil {
					t.Fatal(err)
				}
			}
			before := []int{17, 69}
			positions := mustAlloc(t, dev, 8)
			if err := cgo.Write(positions, []int32{int32(before[0]), int32(before[1])}); err != nil {
				t.Fatal(err)
			}
			if err := dev.KVAppend(cgo.KVAppendParams{KNew: kNew.Ptr, VNew: vNew.Ptr, Positions: positions.Ptr,
				Cache: a.params.Cache, Batch: s.Batch}); err != nil {
				t.Fatalf("KVAppend: %v", err)
			}
			if err := ref.AppendKVE4M3Heads(a.shape, a.table, before, a.kCodes, a.vCodes, kn, vn, a.kScales, a.vScales); err != nil {
				t.Fatal(err)
			}
			gotK, gotV := a.readCodes(t)
			for i := range gotK {
				if gotK[i] != a.kCodes[i] || gotV[i] != a.vCodes[i] {
					t.Fatalf("cache byte %d: K %#x V %#x, want %#x %#x", i, gotK[i], gotV[i], a.kCodes[i], a.vCodes[i])
				}
			}
			for _, variant := range fp8Variants {
				got, p := a.run(t, dev, variant, 0)
				a.check(t, got, p)
			}
		})
	}
}

// A NaN code in the cache makes the heads that read it NaN (never a plausible number); a NaN,
// infinite or non-positive scale, or a 16-bit activation dtype the cache does not take, is
// refused before any launch.
func TestAttentionFP8NaNAndScales(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	s := ref.AttentionShape{Batch: 2, QHeads: 2, KVHeads: 1, HeadDim: 64, Context: []int{20, 20}}
	for _, variant := range fp8Variants {
		for _, which := range []string{"K", "V"} {
			t.Run(variant.String()+" "+which, func(t *testing.T) {
				a := newFP8Setup(t, dev, s, ref.BF16, 9)
				cap := a.shape.Capacity
				off := 0*cap*64 + 5*64 + 3 // sequence 0, token 5, element 3
				if which == "K" {
					a.kCodes[off] = 0xff
				} else {
					a.vCodes[off] = 0x7f
				}
				a.writeCodes(t)
				got, _ := a.run(t, dev, variant, 1)
				for i, x := range got {
					seq0 := i < s.QHeads*64
					nan := math.IsNaN(float64(x))
					wantNaN := seq0 && (which == "K" || i%64 == 3)
					if nan != wantNaN {
						t.Fatalf("out[%d] = %g: NaN %v, want %v", i, x, nan, wantNaN)
					}
				}
			})
		}
	}
	a := newFP8Setup(t, dev, s, ref.BF16, 9)
	for _, tc := range []struct {
		name string
		edit func(c *cgo.KVCache)
		want string
	}{
		{"NaN k_scale", func(c *cgo.KVCache) { c.KScale = float32(math.NaN()) }, "k_scale nan"},
		{"zero v_scale", func(c *cgo.KVCache) { c.VScale = 0 }, "v_scale 0 must be finite and > 0"},
		{"infinite k_scale", func(c *cgo.KVCache) { c.KScale = float32(math.Inf(1)) }, "k_scale inf"},
		{"no act dtype", func(c *cgo.KVCache) { c.ActDType = 0 }, "act_dtype 0 (f32)"},
		{"act dtype on a bf16 cache", func(c *cgo.KVCache) { c.DType, c.ActDType = cgo.DTypeBF16, cgo.DTypeFP16 },
			"act_dtype 2 (fp16) of a bf16 cache"},
	} {
		p := a.params
		tc.edit(&p.Cache)
		_, _, err := dev.AttentionPlan(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: plan error %v, want one naming %q", tc.name, err, tc.want)
		}
		err = dev.KVAppend(cgo.KVAppendParams{KNew: a.q.Ptr, VNew: a.q.Ptr, Positions: a.lens.Ptr, Cache: p.Cache, Batch: 1})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: append error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// The fused rope + append into an fp8 cache: q rotated as for a 16-bit cache, k rotated,
// rounded to the activations and quantised (its code within the quantisation of its reference
// bounds), v quantised exactly, a skipped sequence and every other byte untouched. Values up to
// 8 / 0.0123 = 650 scale units, so some saturate.
func TestAttentionFP8RopeAppend(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		name  string
		shape ref.AttentionShape
		act   ref.DType
		rope  ref.Rope
		pos   []int
		// per-head scales (E4M3SpreadScales): each head quantised with its own
		perHead bool
	}{
		{"contiguous bf16 full rotary", ref.AttentionShape{Batch: 3, QHeads: 4, KVHeads: 2, HeadDim: 128,
			Context: []int{40, 40, 40}}, ref.BF16, ref.Rope{Theta: 500000, RotaryDim: 128}, []int{0, 39, 40}, false},
		{"paged bf16 per-head scales, 3 KV heads", ref.AttentionShape{Batch: 3, QHeads: 6, KVHeads: 3, HeadDim: 64,
			Context: []int{32, 32, 32}, Layout: ref.KVPaged, PageSize: 16}, ref.BF16, ref.Rope{Theta: 10000, RotaryDim: 64},
			[]int{31, 0, 17}, true},
		{"paged fp16 partial 20 of 80", ref.AttentionShape{Batch: 2, QHeads: 3, KVHeads: 1, HeadDim: 80,
			Context: []int{64, 64}, Layout: ref.KVPaged, PageSize: 16}, ref.FP16, ref.Rope{Theta: 10000, RotaryDim: 20},
			[]int{63, 5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFP8SetupScales(t, dev, tc.shape, tc.act, 21, tc.perHead)
			s := a.shape
			D, batch := s.HeadDim, s.Batch
			rows := batch * s.KVHeads * D
			kn, vn := mustAlloc(t, dev, uint64(2*rows)), mustAlloc(t, dev, uint64(2*rows))
			for _, f := range []struct {
				b    *cgo.Buffer
				seed uint64
			}{{kn, a.seeds.KNew}, {vn, a.seeds.VNew}} {
				if err := f.b.FillHash(cgo.DType(tc.act), uint64(rows), f.seed, 8); err != nil {
					t.Fatal(err)
				}
			}
			pos := make([]int32, batch)
			for b, p := range tc.pos {
				pos[b] = int32(p)
			}
			pb := mustAlloc(t, dev, uint64(4*batch))
			if err := cgo.Write(pb, pos); err != nil {
				t.Fatal(err)
			}
			r := cgo.Rope{Theta: float32(tc.rope.Theta), RotaryDim: tc.rope.RotaryDim}
			if err := dev.RopeKVAppend(cgo.RopeAppendParams{Q: a.q.Ptr, KNew: kn.Ptr, VNew: vn.Ptr, Positions: pb.Ptr,
				Cache: a.params.Cache, Rope: r, Batch: batch, QHeads: s.QHeads}); err != nil {
				t.Fatal(err)
			}
			gotK, gotV := a.readCodes(t)
			knv := ref.Fill(tc.act, a.seeds.KNew, 8, rows)
			vnv := ref.Fill(tc.act, a.seeds.VNew, 8, rows)
			written := make([]bool, len(gotK))
			saturated := 0
			for b, p := range tc.pos {
				if p >= s.SeqCapacity() {
					continue
				}
				for h := 0; h < s.KVHeads; h++ {
					src := (b*s.KVHeads + h) * D
					row := s.KVOffset(a.table, b, h, p)
					want, bounds := ref.RopeHead(tc.rope, tc.act, knv[src:src+D], p)
					for e := 0; e < D; e++ {
						i := row + e
						written[i] = true
						if !ref.E4M3Within(gotK[i], want[e]-bounds[e], want[e]+bounds[e], a.kScales[h]) {
							t.Fatalf("k of sequence %d head %d element %d: code %#x (%g), want the code of %g +- %g", b, h, e,
								gotK[i], ref.E4M3(gotK[i])*float64(a.kScales[h]), want[e], bounds[e])
						}
						if w := ref.E4M3Quantize(vnv[src+e], a.vScales[h]); gotV[i] != w {
							t.Fatalf("v of sequence %d head %d element %d: code %#x, want %#x", b, h, e, gotV[i], w)
						}
						if gotK[i]&0x7f == ref.E4M3MaxCode {
							saturated++
						}
					}
				}
			}
			for i, w := range written {
				if !w && (gotK[i] != a.kCodes[i] || gotV[i] != a.vCodes[i]) {
					t.Fatalf("cache byte %d changed but is no sequence's new token", i)
				}
			}
			if saturated == 0 {
				t.Fatal("no appended k saturated: the test does not reach 448")
			}
		})
	}
}
