package cgo_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The wrapper's own tests: parameters cross the seam both ways, errors name their values, one
// small call of each kernel computes the right thing. The case matrix (head dims, groups,
// layouts, splits, long contexts) is cmd/decodebench's verify_attention_test.go.

// attnSetup holds the device buffers of one small attention call, filled from the hash.
type attnSetup struct {
	shape                     ref.AttentionShape
	dtype                     ref.DType
	seeds                     ref.AttentionSeeds
	table                     []int32
	params                    cgo.AttentionParams
	q, k, v, out, lens, pages *cgo.Buffer
}

func newAttnSetup(t *testing.T, dev *cgo.Device, s ref.AttentionShape, dtype ref.DType, seed uint64) *attnSetup {
	t.Helper()
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	a := &attnSetup{shape: s, dtype: dtype, seeds: ref.NewAttentionSeeds(seed)}
	cacheBytes := uint64(s.CacheElements() * dtype.Bytes())
	qBytes := uint64(s.QElements() * dtype.Bytes())
	a.q, a.out = mustAlloc(t, dev, qBytes), mustAlloc(t, dev, qBytes)
	a.k, a.v = mustAlloc(t, dev, cacheBytes), mustAlloc(t, dev, cacheBytes)
	a.lens = mustAlloc(t, dev, uint64(4*s.Batch))
	for _, f := range []struct {
		b    *cgo.Buffer
		n    int
		seed uint64
	}{{a.q, s.QElements(), a.seeds.Q}, {a.k, s.CacheElements(), a.seeds.K}, {a.v, s.CacheElements(), a.seeds.V}} {
		if err := f.b.FillHash(cgo.DType(dtype), uint64(f.n), f.seed, 1); err != nil {
			t.Fatal(err)
		}
	}
	a.setLens(t, s.Context)
	cache := cgo.KVCache{K: a.k.Ptr, V: a.v.Ptr, Layout: cgo.KVLayout(s.Layout), DType: cgo.DType(dtype),
		KVHeads: s.KVHeads, HeadDim: s.HeadDim, Capacity: s.Capacity}
	if s.Layout == ref.KVPaged {
		a.table = s.ShuffledPageTable(a.seeds.PageTable)
		a.pages = mustAlloc(t, dev, uint64(4*len(a.table)))
		if err := cgo.Write(a.pages, a.table); err != nil {
			t.Fatal(err)
		}
		cache.PageTable, cache.PageSize, cache.NumPages, cache.PagesPerSeq = a.pages.Ptr, s.PageSize, s.NumPages, s.PagesPerSeq
	}
	a.params = cgo.AttentionParams{Q: a.q.Ptr, Out: a.out.Ptr, ContextLens: a.lens.Ptr, Cache: cache,
		Batch: s.Batch, QHeads: s.QHeads, MaxContext: s.MaxContext(), Scale: float32(s.Scale)}
	return a
}

func (a *attnSetup) setLens(t *testing.T, lens []int) {
	t.Helper()
	l32 := make([]int32, len(lens))
	for i, n := range lens {
		l32[i] = int32(n)
	}
	if err := cgo.Write(a.lens, l32); err != nil {
		t.Fatal(err)
	}
}

// run plans with splits (0 = auto), poisons the output and the workspace, runs and returns the
// output widened to float32 with the resolved params.
func (a *attnSetup) run(t *testing.T, dev *cgo.Device, splits int) ([]float32, cgo.AttentionParams) {
	t.Helper()
	p := a.plan(t, dev, splits)
	if p.WorkspaceBytes > 0 {
		ws := mustAlloc(t, dev, p.WorkspaceBytes)
		if err := ws.Memset(0xFF); err != nil {
			t.Fatal(err)
		}
		p.Workspace = ws.Ptr
	}
	return a.runPlanned(t, dev, p), p
}

// plan resolves a.params with splits (0 = auto); WorkspaceBytes is what the call needs.
func (a *attnSetup) plan(t *testing.T, dev *cgo.Device, splits int) cgo.AttentionParams {
	t.Helper()
	p := a.params
	p.NumSplits = splits
	p, workspace, err := dev.AttentionPlan(p)
	if err != nil {
		t.Fatalf("AttentionPlan: %v", err)
	}
	p.WorkspaceBytes = workspace
	return p
}

// runPlanned poisons the output, runs p as planned (its workspace as it is) and returns the
// output widened to float32.
func (a *attnSetup) runPlanned(t *testing.T, dev *cgo.Device, p cgo.AttentionParams) []float32 {
	t.Helper()
	if err := a.out.Memset(0xFF); err != nil {
		t.Fatal(err)
	}
	if err := dev.Attention(p); err != nil {
		t.Fatalf("Attention(%+v): %v", p, err)
	}
	raw := make([]byte, a.out.Bytes)
	if err := a.out.CopyToHost(raw); err != nil {
		t.Fatal(err)
	}
	got, err := ref.Decode(a.dtype, raw)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// check compares got with the reference, with the element bounds of the variant p resolved to.
func (a *attnSetup) check(t *testing.T, got []float32, k, v []float32, p cgo.AttentionParams) {
	t.Helper()
	q := ref.Fill(a.dtype, a.seeds.Q, 1, a.shape.QElements())
	want, err := ref.Attention(a.shape, a.table, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	bounds := want.ElementBounds(a.dtype, p.NumSplits)
	switch p.Variant {
	case cgo.AttentionMMA:
		bounds = want.ElementBoundsMMA(a.dtype, p.NumSplits)
	case cgo.AttentionSIMT:
	default:
		t.Fatalf("plan left variant %v unresolved", p.Variant)
	}
	c := ref.Compare(got, want.Want, bounds, ref.AttentionTolerance(a.dtype))
	if !c.Passed {
		t.Fatal(c.Reason())
	}
}

func (a *attnSetup) caches() (k, v []float32) {
	n := a.shape.CacheElements()
	return ref.Fill(a.dtype, a.seeds.K, 1, n), ref.Fill(a.dtype, a.seeds.V, 1, n)
}

func TestAttentionSmall(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		name   string
		shape  ref.AttentionShape
		dtype  ref.DType
		splits int
	}{
		// Caches larger than the contexts: the row stride is the capacity, not the longest context.
		{"contiguous gqa bf16", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{5, 70},
			Capacity: 96}, ref.BF16, 1},
		{"paged fp16 split 3", ref.AttentionShape{Batch: 2, QHeads: 7, KVHeads: 1, HeadDim: 128, Context: []int{40, 100},
			Layout: ref.KVPaged, PageSize: 16, PagesPerSeq: 9, NumPages: 23}, ref.FP16, 3},
	} {
		for _, variant := range []cgo.AttentionVariant{cgo.AttentionSIMT, cgo.AttentionMMA} {
			t.Run(tc.name+" "+variant.String(), func(t *testing.T) {
				a := newAttnSetup(t, dev, tc.shape, tc.dtype, 1)
				a.params.Variant = variant
				got, p := a.run(t, dev, tc.splits)
				if p.NumSplits != tc.splits || p.Variant != variant {
					t.Fatalf("plan changed the forced split count %d to %d or variant %v to %v", tc.splits, p.NumSplits, variant, p.Variant)
				}
				k, v := a.caches()
				a.check(t, got, k, v, p)
			})
		}
	}
}

func TestKVAppendThenAttention(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		layout  ref.KVLayout
		variant cgo.AttentionVariant
	}{{ref.KVContiguous, cgo.AttentionAuto}, {ref.KVPaged, cgo.AttentionAuto}, {ref.KVPaged, cgo.AttentionMMA}} {
		layout := tc.layout
		t.Run(layout.String()+" "+tc.variant.String(), func(t *testing.T) {
			before := []int{16, 3}
			s := ref.AttentionShape{Batch: 2, QHeads: 2, KVHeads: 2, HeadDim: 80, Context: []int{17, 4},
				Layout: layout, PageSize: 16}
			a := newAttnSetup(t, dev, s, ref.BF16, 2)
			a.params.Variant = tc.variant
			rows := s.Batch * s.KVHeads * s.HeadDim
			kNew, vNew := mustAlloc(t, dev, uint64(2*rows)), mustAlloc(t, dev, uint64(2*rows))
			for _, f := range []struct {
				b    *cgo.Buffer
				seed uint64
			}{{kNew, a.seeds.KNew}, {vNew, a.seeds.VNew}} {
				if err := f.b.FillHash(cgo.DTypeBF16, uint64(rows), f.seed, 1); err != nil {
					t.Fatal(err)
				}
			}
			positions := mustAlloc(t, dev, 8)
			if err := cgo.Write(positions, []int32{int32(before[0]), int32(before[1])}); err != nil {
				t.Fatal(err)
			}
			err := dev.KVAppend(cgo.KVAppendParams{KNew: kNew.Ptr, VNew: vNew.Ptr, Positions: positions.Ptr,
				Cache: a.params.Cache, Batch: s.Batch})
			if err != nil {
				t.Fatalf("KVAppend: %v", err)
			}
			got, p := a.run(t, dev, 0)
			k, v := a.caches()
			kn := ref.Fill(ref.BF16, a.seeds.KNew, 1, rows)
			vn := ref.Fill(ref.BF16, a.seeds.VNew, 1, rows)
			if err := ref.AppendKV(a.shape, a.table, before, k, v, kn, vn); err != nil {
				t.Fatal(err)
			}
			a.check(t, got, k, v, p)
		})
	}
}

func TestAttentionPlanValidates(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	s := ref.AttentionShape{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 128, Context: []int{300, 1000}}
	a := newAttnSetup(t, dev, s, ref.BF16, 3)

	p, workspace, err := dev.AttentionPlan(a.params)
	if err != nil {
		t.Fatal(err)
	}
	if p.NumSplits < 1 || p.SplitTokens < 1 || p.NumSplits*p.SplitTokens < 1000 {
		t.Fatalf("auto plan %d splits of %d tokens does not cover 1000 tokens", p.NumSplits, p.SplitTokens)
	}
	// partials of 2 x 8 heads, then one 8-byte counter per (sequence, KV head): 2 x 2 blocks a split
	if want := uint64(2*8*p.NumSplits*(128+2)*4 + 2*2*8); p.NumSplits > 1 && workspace != want {
		t.Fatalf("workspace %d, want %d for %d splits", workspace, want, p.NumSplits)
	}
	if p.Variant != cgo.AttentionSIMT {
		t.Fatalf("auto plan resolved the variant to %v, want simt (auto = simt until a card has timed both)", p.Variant)
	}
	mma := a.params
	mma.Variant = cgo.AttentionMMA
	if p, _, err := dev.AttentionPlan(mma); err != nil || p.Variant != cgo.AttentionMMA || p.SplitTokens%64 != 0 {
		t.Fatalf("mma plan: variant %v, %d tokens per split, err %v; want mma, a multiple of its 64-token tile", p.Variant, p.SplitTokens, err)
	}
	forced := a.params
	forced.NumSplits = 1
	if _, workspace, err := dev.AttentionPlan(forced); err != nil || workspace != 0 {
		t.Fatalf("one split: workspace %d, err %v; want 0, nil", workspace, err)
	}

	for _, tc := range []struct {
		name string
		edit func(p *cgo.AttentionParams)
		want error
		text string
	}{
		{"head dim 112", func(p *cgo.AttentionParams) { p.Cache.HeadDim = 112 }, cgo.ErrUnsupportedShape, "head_dim 112"},
		{"group of 8/3", func(p *cgo.AttentionParams) { p.Cache.KVHeads = 3 }, cgo.ErrUnsupportedShape, "q_heads 8 is not a multiple of kv_heads 3"},
		{"f32 cache", func(p *cgo.AttentionParams) { p.Cache.DType = cgo.DTypeF32 }, cgo.ErrUnsupportedShape, "dtype 0"},
		{"page size 48", func(p *cgo.AttentionParams) {
			p.Cache.Layout, p.Cache.PageSize, p.Cache.NumPages, p.Cache.PagesPerSeq, p.Cache.PageTable = cgo.KVPaged, 48, 64, 32, a.lens.Ptr
		}, cgo.ErrUnsupportedShape, "page_size 48"},
		{"page size 512", func(p *cgo.AttentionParams) {
			p.Cache.Layout, p.Cache.PageSize, p.Cache.NumPages, p.Cache.PagesPerSeq, p.Cache.PageTable = cgo.KVPaged, 512, 4, 2, a.lens.Ptr
		}, cgo.ErrUnsupportedShape, "page_size 512"},
		{"pages too few", func(p *cgo.AttentionParams) {
			p.Cache.Layout, p.Cache.PageSize, p.Cache.NumPages, p.Cache.PagesPerSeq, p.Cache.PageTable = cgo.KVPaged, 16, 64, 2, a.lens.Ptr
		}, cgo.ErrInvalidArgument, "2 pages of 16 tokens hold 32 tokens"},
		{"no page table", func(p *cgo.AttentionParams) {
			p.Cache.Layout, p.Cache.PageSize, p.Cache.NumPages, p.Cache.PagesPerSeq = cgo.KVPaged, 16, 128, 64
		}, cgo.ErrInvalidArgument, "without a page table"},
		{"layout", func(p *cgo.AttentionParams) { p.Cache.Layout = 5 }, cgo.ErrInvalidArgument, "layout 5"},
		{"capacity", func(p *cgo.AttentionParams) { p.MaxContext = 1001 }, cgo.ErrInvalidArgument, "capacity 1000"},
		{"max context 0", func(p *cgo.AttentionParams) { p.MaxContext = 0 }, cgo.ErrInvalidArgument, "max_context 0 out of range"},
		{"batch 0", func(p *cgo.AttentionParams) { p.Batch = 0 }, cgo.ErrInvalidArgument, "batch 0"},
		{"batch past the limit", func(p *cgo.AttentionParams) { p.Batch = cgo.MaxBatch + 1 }, cgo.ErrInvalidArgument,
			fmt.Sprintf("batch %d out of range 1..%d (DB_MAX_BATCH)", cgo.MaxBatch+1, cgo.MaxBatch)},
		{"splits", func(p *cgo.AttentionParams) { p.NumSplits = 1025 }, cgo.ErrInvalidArgument, "num_splits 1025"},
		{"scale", func(p *cgo.AttentionParams) { p.Scale = -1 }, cgo.ErrInvalidArgument, "scale -1"},
		{"variant", func(p *cgo.AttentionParams) { p.Variant = 3 }, cgo.ErrInvalidArgument, "variant 3 is not a DB_ATTENTION_*"},
		{"null q", func(p *cgo.AttentionParams) { p.Q = 0 }, cgo.ErrInvalidArgument, "null q"},
		{"misaligned k", func(p *cgo.AttentionParams) { p.Cache.K += 2 }, cgo.ErrInvalidArgument, "16-byte aligned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := a.params
			tc.edit(&bad)
			_, _, err := dev.AttentionPlan(bad)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "db_attention_plan: ") {
				t.Fatalf("AttentionPlan = %v, want %v naming %q", err, tc.want, tc.text)
			}
			if err := dev.Attention(bad); !errors.Is(err, tc.want) {
				t.Fatalf("Attention = %v, want %v", err, tc.want)
			}
		})
	}

	short := a.params
	short.NumSplits = 4
	if err := dev.Attention(short); !errors.Is(err, cgo.ErrWorkspace) {
		t.Fatalf("4 splits without a workspace: %v, want ErrWorkspace", err)
	}
	badAppend := cgo.KVAppendParams{KNew: a.q.Ptr, VNew: a.q.Ptr, Positions: a.lens.Ptr, Cache: a.params.Cache, Batch: 2}
	badAppend.Batch = cgo.MaxBatch + 1
	if err := dev.KVAppend(badAppend); !errors.Is(err, cgo.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), fmt.Sprintf("batch %d out of range 1..%d", cgo.MaxBatch+1, cgo.MaxBatch)) {
		t.Fatalf("KVAppend(batch %d) = %v, want ErrInvalidArgument naming the batch and the limit", cgo.MaxBatch+1, err)
	}
	badAppend.Batch = 2
	badAppend.Cache.HeadDim = 72
	if err := dev.KVAppend(badAppend); !errors.Is(err, cgo.ErrUnsupportedShape) || !strings.Contains(err.Error(), "head_dim 72") {
		t.Fatalf("KVAppend(head_dim 72) = %v, want ErrUnsupportedShape naming 72", err)
	}
}

// The fused split merge at every split count from 1 to more than the tokens: 40 and 17 tokens
// at head dim 256 (tiles of 16 tokens for simt, 32 for mma), so 1 to 3 splits see a token and
// the rest exit at once; both layouts, both variants. Each call gets a workspace poisoned with
// 0xff bytes (counters included: no memset is needed), must leave every counter it used 0 (the
// state a replay of the same launch starts from), and a second call on the same workspace must give the
// same bits (the merge runs in split order, whatever the order of arrival).
func TestAttentionFusedMergeEverySplitCount(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, layout := range []ref.KVLayout{ref.KVContiguous, ref.KVPaged} {
		s := ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 256, Context: []int{40, 17}, Layout: layout, PageSize: 16}
		a := newAttnSetup(t, dev, s, ref.BF16, 5)
		k, v := a.caches()
		for _, variant := range []cgo.AttentionVariant{cgo.AttentionSIMT, cgo.AttentionMMA} {
			a.params.Variant = variant
			for splits := 1; splits <= 41; splits++ {
				p := a.plan(t, dev, splits)
				name := fmt.Sprintf("%s %s %d splits", layout, variant, splits)
				if p.NumSplits != splits {
					t.Fatalf("%s: plan ran %d splits", name, p.NumSplits)
				}
				var ws *cgo.Buffer
				if p.WorkspaceBytes > 0 {
					ws = mustAlloc(t, dev, p.WorkspaceBytes)
					if err := ws.Memset(0xFF); err != nil {
						t.Fatal(err)
					}
					p.Workspace = ws.Ptr
				}
				got := a.runPlanned(t, dev, p)
				t.Run(name, func(t *testing.T) { a.check(t, got, k, v, p) })
				if ws == nil {
					continue
				}
				// counters: the workspace's last 8 bytes per (sequence, KV head) block; a sequence
				// with one active split never touches its own
				raw := make([]byte, ws.Bytes)
				if err := ws.CopyToHost(raw); err != nil {
					t.Fatal(err)
				}
				blocks := s.Batch * s.KVHeads
				for i := 0; i < blocks; i++ {
					if c := binary.LittleEndian.Uint64(raw[len(raw)-8*(blocks-i):]); c != 0 && c != ^uint64(0) {
						t.Errorf("%s: counter %d is %#x after the call, want 0 (or the untouched poison)", name, i, c)
					}
				}
				again := a.runPlanned(t, dev, p)
				if !bytes.Equal(f32Bytes(got), f32Bytes(again)) {
					t.Errorf("%s: a second call on the same workspace gave other bits", name)
				}
				ws.Close()
			}
		}
	}
}

func f32Bytes(xs []float32) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, xs)
	return b.Bytes()
}

// A batch past one block per SM and a 1000-sequence batch at the batch limit's scale, with
// tiny contexts: many blocks of one launch arrive at their own counters.
func TestAttentionLargeBatch(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		batch, context, splits int
		layout                 ref.KVLayout
	}{{257, 40, 3, ref.KVPaged}, {1000, 3, 0, ref.KVContiguous}} {
		lens := make([]int, tc.batch)
		for i := range lens {
			lens[i] = 1 + (i*7)%tc.context
		}
		s := ref.AttentionShape{Batch: tc.batch, QHeads: 2, KVHeads: 1, HeadDim: 256, Context: lens, Layout: tc.layout, PageSize: 16}
		a := newAttnSetup(t, dev, s, ref.FP16, 7)
		got, p := a.run(t, dev, tc.splits)
		t.Run(fmt.Sprintf("batch %d, %d splits", tc.batch, p.NumSplits), func(t *testing.T) {
			k, v := a.caches()
			a.check(t, got, k, v, p)
		})
	}
}
