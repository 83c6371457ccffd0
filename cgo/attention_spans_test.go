package cgo_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// Spans (sliding windows, chunks) and sinks on both decode kernels. Every cache row outside a
// sequence's span (before its start, past its length, and in pages no sequence owns) holds NaN,
// so a kernel that reads one token before the span (or past the end) and lets it touch the
// output writes NaN: V rows meet p = 0 in P.V and 0 * NaN is NaN. The outputs and workspaces
// are poisoned too (attnSetup.run).

// spanSinks says which sink logits a case runs with.
type spanSinks int

const (
	noSinks       spanSinks = iota
	randomSinks             // within ±4: a real share of every denominator
	largeSinks              // +1e4: the sink takes all the weight, the output is 0
	negativeSinks           // -1e4: no effect at all
)

type spanCase struct {
	name   string
	shape  ref.AttentionShape
	dtype  ref.DType
	splits []int // forced split counts; 0 = auto
	sinks  spanSinks
}

// spanCases: windows of 1, shorter than a tile, not tile-aligned, longer than the context;
// chunk boundaries exactly at L-1 and L; ragged contexts; forced splits from 1 to more than
// the span's tokens; paged and contiguous; both dtypes; sinks. SIMT tiles are 64 tokens at head
// dim 64, 32 at 80-128, 16 at 256; MMA tiles 64, and 32 at 256.
var spanCases = []spanCase{
	{"window 1", ref.AttentionShape{Batch: 3, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{1, 40, 77}, Window: 1},
		ref.BF16, []int{0, 1, 3}, noSinks},
	{"window 13 paged: shorter than a tile, unaligned starts", ref.AttentionShape{Batch: 3, QHeads: 8, KVHeads: 2, HeadDim: 128,
		Context: []int{50, 13, 100}, Window: 13, Layout: ref.KVPaged, PageSize: 16}, ref.FP16, []int{1, 2, 40}, noSinks},
	{"window 70 contiguous: longer than a tile, unaligned", ref.AttentionShape{Batch: 3, QHeads: 3, KVHeads: 1, HeadDim: 80,
		Context: []int{200, 71, 5}, Window: 70, Capacity: 230}, ref.BF16, []int{1, 2, 5}, noSinks},
	{"window 100 paged 32: starts mid-page", ref.AttentionShape{Batch: 2, QHeads: 16, KVHeads: 2, HeadDim: 96,
		Context: []int{290, 101}, Window: 100, Layout: ref.KVPaged, PageSize: 32}, ref.BF16, []int{1, 3}, noSinks},
	{"window longer than the context", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 1, HeadDim: 64, Context: []int{37, 300},
		Window: 500, Layout: ref.KVPaged, PageSize: 32}, ref.FP16, []int{0, 1, 4}, noSinks},
	{"chunk 32: L-1 and L on a boundary", ref.AttentionShape{Batch: 5, QHeads: 4, KVHeads: 2, HeadDim: 64,
		Context: []int{32, 33, 64, 65, 1}, Chunk: 32, Layout: ref.KVPaged, PageSize: 16}, ref.BF16, []int{1, 2, 9}, noSinks},
	{"chunk 48 contiguous: unaligned chunks", ref.AttentionShape{Batch: 4, QHeads: 8, KVHeads: 1, HeadDim: 128,
		Context: []int{48, 49, 97, 200}, Chunk: 48}, ref.FP16, []int{1, 2, 6}, noSinks},
	{"chunk 40 d256 paged 64", ref.AttentionShape{Batch: 2, QHeads: 2, KVHeads: 1, HeadDim: 256, Context: []int{120, 81},
		Chunk: 40, Layout: ref.KVPaged, PageSize: 64}, ref.BF16, []int{1, 3}, noSinks},

	{"sinks", ref.AttentionShape{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 64, Context: []int{3, 150}},
		ref.BF16, []int{1, 2, 7}, randomSinks},
	{"sinks with a window, paged fp16", ref.AttentionShape{Batch: 3, QHeads: 7, KVHeads: 1, HeadDim: 128,
		Context: []int{90, 1, 33}, Window: 40, Layout: ref.KVPaged, PageSize: 16}, ref.FP16, []int{1, 3}, randomSinks},
	{"large positive sinks", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 80, Context: []int{70, 9}, Chunk: 64},
		ref.BF16, []int{1, 3}, largeSinks},
	{"large negative sinks", ref.AttentionShape{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: []int{100, 2}, Window: 50},
		ref.FP16, []int{1, 2}, negativeSinks},
}

// spanSinkValues are the f32 sink logits of a case (nil without sinks).
func spanSinkValues(kind spanSinks, qHeads int, seed uint64) []float32 {
	if kind == noSinks {
		return nil
	}
	out := make([]float32, qHeads)
	for i := range out {
		switch kind {
		case randomSinks:
			out[i] = ref.FillValue(ref.F32, seed, 4, uint64(i))
		case largeSinks:
			out[i] = 1e4
		case negativeSinks:
			out[i] = -1e4
		}
	}
	return out
}

// poisonOutsideSpans sets every cache row that no sequence's span reaches to NaN.
func poisonOutsideSpans(s ref.AttentionShape, table []int32, k, v []float32) {
	d := s.HeadDim
	inSpan := make([]bool, s.CacheElements()/d)
	for b, n := range s.Context {
		for h := 0; h < s.KVHeads; h++ {
			for t := s.SpanStart(n); t < n; t++ {
				inSpan[s.KVOffset(table, b, h, t)/d] = true
			}
		}
	}
	nan := float32(math.NaN())
	for row, keep := range inSpan {
		if !keep {
			for i := row * d; i < (row+1)*d; i++ {
				k[i], v[i] = nan, nan
			}
		}
	}
}

// writeCache stores a host cache (float32 values the dtype holds exactly, or NaN) into buf.
func writeCache(t *testing.T, buf *cgo.Buffer, dtype ref.DType, x []float32) {
	t.Helper()
	words := make([]uint16, len(x))
	for i, f := range x {
		if dtype == ref.BF16 {
			words[i] = ref.BF16FromFloat32(f)
		} else {
			words[i] = ref.FP16FromFloat32(f)
		}
	}
	if err := cgo.Write(buf, words); err != nil {
		t.Fatal(err)
	}
}

func TestAttentionSpansAndSinks(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for ci, tc := range spanCases {
		for _, variant := range []cgo.AttentionVariant{cgo.AttentionSIMT, cgo.AttentionMMA} {
			t.Run(tc.name+" "+variant.String(), func(t *testing.T) {
				a := newAttnSetup(t, dev, tc.shape, tc.dtype, uint64(11+ci))
				k, v := a.caches()
				poisonOutsideSpans(a.shape, a.table, k, v)
				writeCache(t, a.k, tc.dtype, k)
				writeCache(t, a.v, tc.dtype, v)
				a.params.Variant, a.params.Window, a.params.Chunk = variant, tc.shape.Window, tc.shape.Chunk
				sinks := spanSinkValues(tc.sinks, tc.shape.QHeads, a.seeds.Q^0x5151)
				var sinks64 []float64
				if sinks != nil {
					buf := mustAlloc(t, dev, uint64(4*len(sinks)))
					if err := cgo.Write(buf, sinks); err != nil {
						t.Fatal(err)
					}
					a.params.Sinks = buf.Ptr
					for _, x := range sinks {
						sinks64 = append(sinks64, float64(x))
					}
				}
				q := ref.Fill(a.dtype, a.seeds.Q, 1, a.shape.QElements())
				want, err := ref.AttentionWithSinks(a.shape, a.table, q, k, v, sinks64)
				if err != nil {
					t.Fatal(err)
				}
				for _, splits := range tc.splits {
					got, p := a.run(t, dev, splits)
					if splits > 0 && p.NumSplits != splits {
						t.Fatalf("plan changed the forced split count %d to %d", splits, p.NumSplits)
					}
					bounds := want.ElementBounds(a.dtype, p.NumSplits)
					if variant == cgo.AttentionMMA {
						bounds = want.ElementBoundsMMA(a.dtype, p.NumSplits)
					}
					if c := ref.Compare(got, want.Want, bounds, ref.AttentionTolerance(a.dtype)); !c.Passed {
						t.Fatalf("%d splits of %d tokens: %s", p.NumSplits, p.SplitTokens, c.Reason())
					}
					switch tc.sinks {
					case largeSinks:
						for i, x := range got {
							if x != 0 {
								t.Fatalf("%d splits: output %d = %g with a sink of 1e4, want 0", p.NumSplits, i, x)
							}
						}
					case negativeSinks: // bit for bit the output without sinks
						plain := a.params
						plain.Sinks = 0
						saved := a.params
						a.params = plain
						without, _ := a.run(t, dev, splits)
						a.params = saved
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(without[i]) {
								t.Fatalf("%d splits: output %d = %g with a sink of -1e4, %g without", p.NumSplits, i, got[i], without[i])
							}
						}
					}
				}
			})
		}
	}
}

// The plan covers the span, not the context: a window of 100 tokens over a 32k context is cut
// as 100 tokens (plus the tile that holds its start) would be, and never needs more splits than
// that span has tiles.
func TestAttentionSpanPlan(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	s := ref.AttentionShape{Batch: 1, QHeads: 8, KVHeads: 1, HeadDim: 128, Context: []int{32768}}
	a := newAttnSetup(t, dev, s, ref.BF16, 5)
	full, _, err := dev.AttentionPlan(a.params)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		window, chunk int
		most          int // tokens the splits may cover: the span and its first tile's head
	}{{window: 100, most: 100 + 31}, {window: 4096, most: 4096 + 31}, {chunk: 8192, most: 8192}, {chunk: 1000, most: 1000 + 31},
		{window: 1 << 20, most: 32768}} {
		p := a.params
		p.Window, p.Chunk = tc.window, tc.chunk
		got, _, err := dev.AttentionPlan(p)
		if err != nil {
			t.Fatal(err)
		}
		covered := got.NumSplits * got.SplitTokens
		if covered < tc.most || covered >= tc.most+got.NumSplits*32 {
			t.Errorf("window %d chunk %d: %d splits of %d tokens cover %d, want %d..%d", tc.window, tc.chunk,
				got.NumSplits, got.SplitTokens, covered, tc.most, tc.most+got.NumSplits*32-1)
		}
		if tc.most < 32768 && got.NumSplits > full.NumSplits {
			t.Errorf("window %d chunk %d: %d splits, more than the whole context's %d", tc.window, tc.chunk, got.NumSplits, full.NumSplits)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(p *cgo.AttentionParams)
		text string
	}{
		{"negative window", func(p *cgo.AttentionParams) { p.Window = -1 }, "window -1 and chunk 0 must be >= 0"},
		{"negative chunk", func(p *cgo.AttentionParams) { p.Chunk = -8 }, "window 0 and chunk -8 must be >= 0"},
		{"both", func(p *cgo.AttentionParams) { p.Window, p.Chunk = 4096, 8192 }, "window 4096 and chunk 8192 are both set"},
		{"misaligned sinks", func(p *cgo.AttentionParams) { p.Sinks = a.lens.Ptr + 2 }, "sinks must be 4-byte aligned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := a.params
			tc.edit(&bad)
			_, _, err := dev.AttentionPlan(bad)
			if !errors.Is(err, cgo.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("AttentionPlan = %v, want an invalid argument naming %q", err, tc.text)
			}
		})
	}
}
