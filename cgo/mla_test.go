package cgo_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// MLA decode on the emulator against the float64 reference: odd batches, ragged contexts,
// forced splits from 1 to more than the tokens, both layouts and dtypes, 1 to 128 heads, the
// output and the workspace poisoned before every call.

// mlaScale is DeepSeek-V3's softmax scale without yarn (1/sqrt(128 + 64)), times 1.3 for an
// mscale^2: a scale that is not 1/sqrt(576) catches a kernel that ignores the parameter.
var mlaScale = 1.3 / math.Sqrt(192)

type mlaSetup struct {
	shape            ref.MLAShape
	dtype            ref.DType
	seeds            ref.AttentionSeeds
	table            []int32
	params           cgo.MLAAttentionParams
	q, kv, out, lens *cgo.Buffer
	cache, qHost     []float32
}

func newMLASetup(t *testing.T, dev *cgo.Device, s ref.MLAShape, dtype ref.DType, seed uint64) *mlaSetup {
	t.Helper()
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	m := &mlaSetup{shape: s, dtype: dtype, seeds: ref.NewAttentionSeeds(seed)}
	e := uint64(dtype.Bytes())
	m.q = mustAlloc(t, dev, uint64(s.QElements())*e)
	m.out = mustAlloc(t, dev, uint64(s.OutElements())*e)
	m.kv = mustAlloc(t, dev, uint64(s.CacheElements())*e)
	m.lens = mustAlloc(t, dev, uint64(4*s.Batch))
	if err := m.q.FillHash(cgo.DType(dtype), uint64(s.QElements()), m.seeds.Q, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.kv.FillHash(cgo.DType(dtype), uint64(s.CacheElements()), m.seeds.K, 1); err != nil {
		t.Fatal(err)
	}
	m.qHost = ref.Fill(dtype, m.seeds.Q, 1, s.QElements())
	m.cache = ref.Fill(dtype, m.seeds.K, 1, s.CacheElements())
	lens := make([]int32, s.Batch)
	for b, n := range s.Context {
		lens[b] = int32(n)
	}
	if err := cgo.Write(m.lens, lens); err != nil {
		t.Fatal(err)
	}
	cache := cgo.MLACache(m.kv.Ptr, cgo.DType(dtype), s.Capacity)
	if s.Layout == ref.KVPaged {
		m.table = s.ShuffledPageTable(m.seeds.PageTable)
		pages := mustAlloc(t, dev, uint64(4*len(m.table)))
		if err := cgo.Write(pages, m.table); err != nil {
			t.Fatal(err)
		}
		cache.Layout, cache.PageTable, cache.PageSize, cache.NumPages, cache.PagesPerSeq = cgo.KVPaged, pages.Ptr, s.PageSize, s.NumPages, s.PagesPerSeq
	}
	m.params = cgo.MLAAttentionParams{Q: m.q.Ptr, Out: m.out.Ptr, ContextLens: m.lens.Ptr, Cache: cache,
		Batch: s.Batch, QHeads: s.QHeads, MaxContext: s.MaxContext(), Scale: float32(s.Scale)}
	return m
}

// run plans with splits (0 = auto), poisons the output and a fresh workspace, runs, and returns
// the output widened to float32 with the resolved params.
func (m *mlaSetup) run(t *testing.T, dev *cgo.Device, splits int) ([]float32, cgo.MLAAttentionParams) {
	t.Helper()
	p := m.params
	p.NumSplits = splits
	p, workspace, err := dev.MLAAttentionPlan(p)
	if err != nil {
		t.Fatalf("MLAAttentionPlan: %v", err)
	}
	if splits != 0 && p.NumSplits != splits {
		t.Fatalf("plan changed the forced split count %d to %d", splits, p.NumSplits)
	}
	if workspace > 0 {
		ws := mustAlloc(t, dev, workspace)
		if err := ws.Memset(0xFF); err != nil {
			t.Fatal(err)
		}
		p.Workspace, p.WorkspaceBytes = ws.Ptr, workspace
	}
	return m.runPlanned(t, dev, p), p
}

func (m *mlaSetup) runPlanned(t *testing.T, dev *cgo.Device, p cgo.MLAAttentionParams) []float32 {
	t.Helper()
	if err := m.out.Memset(0xFF); err != nil {
		t.Fatal(err)
	}
	if err := dev.MLAAttention(p); err != nil {
		t.Fatalf("MLAAttention(%+v): %v", p, err)
	}
	raw := make([]byte, m.out.Bytes)
	if err := m.out.CopyToHost(raw); err != nil {
		t.Fatal(err)
	}
	got, err := ref.Decode(m.dtype, raw)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (m *mlaSetup) check(t *testing.T, got []float32, splits int) {
	t.Helper()
	want, err := ref.MLA(m.shape, m.table, m.qHost, m.cache)
	if err != nil {
		t.Fatal(err)
	}
	c := ref.Compare(got, want.Want, want.ElementBounds(m.dtype, splits), ref.MLATolerance(m.dtype))
	if !c.Passed {
		w := c.Worst.Index
		t.Fatalf("%s (worst at sequence %d, head %d, dim %d)", c.Reason(), w/cgo.MLAVDim/m.shape.QHeads,
			w/cgo.MLAVDim%m.shape.QHeads, w%cgo.MLAVDim)
	}
}

func TestMLAAttention(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		name   string
		shape  ref.MLAShape
		dtype  ref.DType
		splits int
	}{
		// The capacity past the longest context: the row stride of a sequence is the capacity.
		{"contiguous bf16 16 heads odd batch", ref.MLAShape{Batch: 3, QHeads: 16, Context: []int{1, 33, 70}, Capacity: 80}, ref.BF16, 1},
		{"paged fp16 3 heads split 3", ref.MLAShape{Batch: 3, QHeads: 3, Context: []int{50, 17, 96}, Layout: ref.KVPaged,
			PageSize: 16, PagesPerSeq: 7, NumPages: 25}, ref.FP16, 3},
		{"paged bf16 1 head 64 splits", ref.MLAShape{Batch: 1, QHeads: 1, Context: []int{45}, Layout: ref.KVPaged, PageSize: 32}, ref.BF16, 64},
		{"contiguous fp16 128 heads split 2", ref.MLAShape{Batch: 1, QHeads: 128, Context: []int{40}}, ref.FP16, 2},
		{"paged bf16 20 heads auto", ref.MLAShape{Batch: 2, QHeads: 20, Context: []int{130, 7}, Layout: ref.KVPaged, PageSize: 64}, ref.BF16, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.shape.Scale = mlaScale
			m := newMLASetup(t, dev, tc.shape, tc.dtype, 11)
			got, p := m.run(t, dev, tc.splits)
			m.check(t, got, p.NumSplits)
		})
	}
}

// Every split count from 1 to more than the tokens (32-token splits: 1 to 3 see a token), on a
// poisoned workspace; a second call on the same workspace gives the same bits (the merge runs
// in split order, whatever the order of arrival).
func TestMLAAttentionEverySplitCount(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	s := ref.MLAShape{Batch: 2, QHeads: 16, Context: []int{70, 20}, Layout: ref.KVPaged, PageSize: 16, Scale: mlaScale}
	m := newMLASetup(t, dev, s, ref.BF16, 13)
	for _, splits := range []int{1, 2, 3, 5, 71} {
		got, p := m.run(t, dev, splits)
		t.Run(fmt.Sprintf("%d splits", splits), func(t *testing.T) { m.check(t, got, p.NumSplits) })
		if p.Workspace != 0 {
			again := m.runPlanned(t, dev, p)
			if !bytes.Equal(f32Bytes(got), f32Bytes(again)) {
				t.Errorf("%d splits: a second call on the same workspace gave other bits", splits)
			}
		}
	}
}

// The latent append, then the attention over the appended token, both layouts.
func TestMLAKVAppendThenAttention(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, layout := range []ref.KVLayout{ref.KVContiguous, ref.KVPaged} {
		t.Run(layout.String(), func(t *testing.T) {
			before := []int{32, 3, 16}
			s := ref.MLAShape{Batch: 3, QHeads: 5, Context: []int{33, 4, 17}, Layout: layout, PageSize: 16, Scale: mlaScale}
			m := newMLASetup(t, dev, s, ref.FP16, 17)
			rows := s.Batch * cgo.MLAQKDim
			kvNew := mustAlloc(t, dev, uint64(2*rows))
			if err := kvNew.FillHash(cgo.DTypeFP16, uint64(rows), m.seeds.KNew, 1); err != nil {
				t.Fatal(err)
			}
			positions := mustAlloc(t, dev, 4*3)
			if err := cgo.Write(positions, []int32{int32(before[0]), int32(before[1]), int32(before[2])}); err != nil {
				t.Fatal(err)
			}
			if err := dev.MLAKVAppend(cgo.MLAKVAppendParams{KVNew: kvNew.Ptr, Positions: positions.Ptr, Cache: m.params.Cache, Batch: s.Batch}); err != nil {
				t.Fatalf("MLAKVAppend: %v", err)
			}
			if err := ref.AppendMLA(m.shape, m.table, before, m.cache, ref.Fill(ref.FP16, m.seeds.KNew, 1, rows)); err != nil {
				t.Fatal(err)
			}
			got, p := m.run(t, dev, 2)
			m.check(t, got, p.NumSplits)
		})
	}
}

func TestMLAAttentionPlanValidates(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	s := ref.MLAShape{Batch: 2, QHeads: 16, Context: []int{300, 1000}, Scale: mlaScale}
	m := newMLASetup(t, dev, s, ref.BF16, 19)
	p, workspace, err := dev.MLAAttentionPlan(m.params)
	if err != nil {
		t.Fatal(err)
	}
	if p.NumSplits < 1 || p.SplitTokens%32 != 0 || p.NumSplits*p.SplitTokens < 1000 {
		t.Fatalf("auto plan %d splits of %d tokens does not cover 1000 tokens in 32-token tiles", p.NumSplits, p.SplitTokens)
	}
	// partials of 2 x 16 heads, then one 8-byte counter per (sequence, block of 16 heads)
	if want := uint64(2*16*p.NumSplits*(512+2)*4 + 2*8); p.NumSplits > 1 && workspace != want {
		t.Fatalf("workspace %d, want %d for %d splits", workspace, want, p.NumSplits)
	}
	launches, err := dev.MLAAttentionLaunches(p)
	if err != nil || len(launches) != 1 || launches[0].GridX != 2 || launches[0].GridY != p.NumSplits ||
		!strings.Contains(launches[0].Kernel, "attention_mla_decode_kernel<__nv_bfloat16>") {
		t.Fatalf("launches %+v, err %v; want one attention_mla_decode_kernel<__nv_bfloat16> of 2 x %d blocks", launches, err, p.NumSplits)
	}
	for _, tc := range []struct {
		name string
		edit func(p *cgo.MLAAttentionParams)
		want error
		text string
	}{
		{"head dim 512", func(p *cgo.MLAAttentionParams) { p.Cache.HeadDim = 512 }, cgo.ErrUnsupportedShape, "cache.head_dim 512 unsupported"},
		{"two kv heads", func(p *cgo.MLAAttentionParams) { p.Cache.KVHeads = 2 }, cgo.ErrUnsupportedShape, "cache.kv_heads 2"},
		{"a V cache", func(p *cgo.MLAAttentionParams) { p.Cache.V = p.Cache.K }, cgo.ErrInvalidArgument, "cache.v must be 0"},
		{"129 heads", func(p *cgo.MLAAttentionParams) { p.QHeads = 129 }, cgo.ErrUnsupportedShape, "q_heads 129 out of range 1..128"},
		{"scale 0", func(p *cgo.MLAAttentionParams) { p.Scale = 0 }, cgo.ErrInvalidArgument, "scale 0 must be finite and > 0"},
		{"f32 cache", func(p *cgo.MLAAttentionParams) { p.Cache.DType = cgo.DTypeF32 }, cgo.ErrUnsupportedShape, "dtype 0"},
		{"capacity", func(p *cgo.MLAAttentionParams) { p.MaxContext = 1001 }, cgo.ErrInvalidArgument, "capacity 1000"},
		{"page size 8", func(p *cgo.MLAAttentionParams) {
			p.Cache.Layout, p.Cache.PageSize, p.Cache.NumPages, p.Cache.PagesPerSeq, p.Cache.PageTable = cgo.KVPaged, 8, 256, 128, m.lens.Ptr
		}, cgo.ErrUnsupportedShape, "page_size 8"},
		{"batch 0", func(p *cgo.MLAAttentionParams) { p.Batch = 0 }, cgo.ErrInvalidArgument, "batch 0"},
		{"splits", func(p *cgo.MLAAttentionParams) { p.NumSplits = 1025 }, cgo.ErrInvalidArgument, "num_splits 1025"},
		{"null q", func(p *cgo.MLAAttentionParams) { p.Q = 0 }, cgo.ErrInvalidArgument, "null q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := m.params
			tc.edit(&bad)
			_, _, err := dev.MLAAttentionPlan(bad)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "db_mla_attention_plan: ") {
				t.Fatalf("MLAAttentionPlan = %v, want %v naming %q", err, tc.want, tc.text)
			}
			if err := dev.MLAAttention(bad); !errors.Is(err, tc.want) {
				t.Fatalf("MLAAttention = %v, want %v", err, tc.want)
			}
		})
	}
	short := m.params
	short.NumSplits = 4
	if err := dev.MLAAttention(short); !errors.Is(err, cgo.ErrWorkspace) {
		t.Fatalf("4 splits without a workspace: %v, want ErrWorkspace", err)
	}
	bad := cgo.MLAKVAppendParams{KVNew: m.q.Ptr, Positions: m.lens.Ptr, Cache: m.params.Cache, Batch: 2}
	bad.Cache.HeadDim = 128
	if err := dev.MLAKVAppend(bad); !errors.Is(err, cgo.ErrUnsupportedShape) || !strings.Contains(err.Error(), "cache.head_dim 128") {
		t.Fatalf("MLAKVAppend(head_dim 128) = %v, want ErrUnsupportedShape naming 128", err)
	}
}

// A library without the MLA functions (the fake) still loads, and the calls say which function
// it lacks.
func TestMLANotExported(t *testing.T) {
	lib, err := cgo.OpenPath(buildFake(t, fakeEmu))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := lib.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	_, _, err = dev.MLAAttentionPlan(cgo.MLAAttentionParams{Batch: 1, QHeads: 16, MaxContext: 1, Scale: 1})
	if !errors.Is(err, cgo.ErrNotExported) || !strings.Contains(err.Error(), "db_mla_attention_plan") {
		t.Fatalf("MLAAttentionPlan on the fake = %v, want ErrNotExported naming db_mla_attention_plan", err)
	}
}

// The plan on an H200's 132 SMs (the emulator's occupancy is sm_90's, from the kernel's ptxas
// registers and shared memory: 2 blocks an SM): the grids kernels/README.md ("MLA attention")
// predicts the speed from, at DeepSeek-V3's 16 (tp 8) and 128 heads.
func TestMLAPlanOnAnH200(t *testing.T) {
	t.Setenv("DB_EMU_SM_COUNT", "132")
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		heads, batch, context int
		gridX, splits, tokens int
	}{
		{16, 1, 4096, 1, 16, 256},
		{16, 1, 32768, 1, 49, 672},
		{16, 64, 4096, 64, 4, 1024},
		{16, 64, 32768, 64, 4, 8192},
		{128, 1, 4096, 8, 16, 256},
		{128, 1, 32768, 8, 32, 1024},
		{128, 64, 4096, 512, 1, 4096},
		{128, 64, 32768, 512, 1, 32768},
	} {
		p := cgo.MLAAttentionParams{Q: 1 << 16, Out: 1 << 16, ContextLens: 1 << 16, Cache: cgo.MLACache(1<<16, cgo.DTypeBF16, tc.context),
			Batch: tc.batch, QHeads: tc.heads, MaxContext: tc.context, Scale: 0.1}
		l, err := dev.MLAAttentionLaunches(p)
		if err != nil {
			t.Fatal(err)
		}
		planned, _, err := dev.MLAAttentionPlan(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 1 || l[0].GridX != tc.gridX || l[0].GridY != tc.splits || planned.SplitTokens != tc.tokens ||
			l[0].BlockThreads != 128 || planned.NumSplits*planned.SplitTokens < tc.context {
			t.Errorf("%d heads, batch %d, %d tokens: launch %+v, %d tokens a split; want %d x %d blocks of %d tokens",
				tc.heads, tc.batch, tc.context, l, planned.SplitTokens, tc.gridX, tc.splits, tc.tokens)
		}
	}
}
