package cgo_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The small ops against bench/ref's float64 references on the emulator: fresh hash inputs at
// round and odd shapes (hidden 4096, 4104, 136; batch 1, 7, 17; vocabularies that are and are
// not multiples of 8), every output poisoned with NaN (0xFF bytes) before the call.

// soFilled is a device buffer of n elements of d filled from the hash, with its values.
func soFilled(t *testing.T, dev *cgo.Device, d ref.DType, n int, seed uint64) (*cgo.Buffer, []float32) {
	t.Helper()
	b := mustAlloc(t, dev, uint64(n*d.Bytes()))
	if err := b.FillHash(cgo.DType(d), uint64(n), seed, 1); err != nil {
		t.Fatal(err)
	}
	return b, ref.Fill(d, seed, 1, n)
}

// soPoisoned is a device buffer of bytes, every byte 0xFF (NaN in every float dtype, -1 as int32).
func soPoisoned(t *testing.T, dev *cgo.Device, bytes int) *cgo.Buffer {
	t.Helper()
	b := mustAlloc(t, dev, uint64(bytes))
	if err := b.Memset(0xFF); err != nil {
		t.Fatal(err)
	}
	return b
}

func soInts(t *testing.T, dev *cgo.Device, v []int32) *cgo.Buffer {
	t.Helper()
	b := mustAlloc(t, dev, uint64(4*len(v)))
	if err := cgo.Write(b, v); err != nil {
		t.Fatal(err)
	}
	return b
}

func soReadInts(t *testing.T, b *cgo.Buffer, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	if err := cgo.Read(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func soReadFloats(t *testing.T, b *cgo.Buffer, d ref.DType, n int) []float32 {
	t.Helper()
	raw := make([]byte, n*d.Bytes())
	if err := b.CopyToHost(raw); err != nil {
		t.Fatal(err)
	}
	got, err := ref.Decode(d, raw)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// soEncode gives the bytes of values rounded to d.
func soEncode(d ref.DType, values []float32) []byte {
	out := make([]byte, len(values)*d.Bytes())
	for i, v := range values {
		if d == ref.BF16 {
			binary.LittleEndian.PutUint16(out[2*i:], ref.BF16FromFloat32(v))
		} else {
			binary.LittleEndian.PutUint16(out[2*i:], ref.FP16FromFloat32(v))
		}
	}
	return out
}

func soCheck(t *testing.T, what string, got []float32, want, bounds []float64) {
	t.Helper()
	c := ref.Compare(got, want, bounds, math.Inf(1))
	if !c.Passed {
		t.Fatalf("%s: %s", what, c.Reason())
	}
}

var soDTypes = []ref.DType{ref.BF16, ref.FP16}

// soRows are the (batch, row length) shapes of the row-wise ops, each run in both dtypes.
var soRows = []struct{ batch, hidden int }{{1, 4096}, {7, 4104}, {17, 136}}

func TestSmallOpEmbedding(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, vocab := range []int{1000, 1003} {
		for i, s := range soRows {
			d := soDTypes[i%2]
			t.Run(fmt.Sprintf("vocab%d batch%d hidden%d %v", vocab, s.batch, s.hidden, d), func(t *testing.T) {
				table, tv := soFilled(t, dev, d, vocab*s.hidden, 11)
				ids := make([]int32, s.batch)
				for b := range ids {
					ids[b] = int32(ref.Hash64(5, uint64(b)) % uint64(vocab))
				}
				ids[0] = int32(vocab - 1) // the last row
				idBuf := soInts(t, dev, ids)
				out := soPoisoned(t, dev, s.batch*s.hidden*d.Bytes())
				scale := float32(0) // a copy, exact
				if i == 1 {
					scale = float32(math.Sqrt(float64(s.hidden))) // Gemma's normaliser
				}
				if err := dev.Embedding(cgo.EmbeddingParams{Table: table.Ptr, IDs: idBuf.Ptr, Out: out.Ptr, Batch: s.batch,
					Vocab: vocab, Hidden: s.hidden, DType: cgo.DType(d), Scale: scale}); err != nil {
					t.Fatal(err)
				}
				want, bounds := ref.Embedding(d, tv, ids, s.hidden, float64(scale))
				soCheck(t, "embedding", soReadFloats(t, out, d, len(want)), want, bounds)
			})
		}
	}
}

func TestSmallOpRMSNorm(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range soRows {
		for _, d := range soDTypes {
			for _, residual := range []bool{false, true} {
				unit := i == 1 // Gemma's (1 + w) on one shape
				t.Run(fmt.Sprintf("batch%d hidden%d %v residual=%v unit=%v", s.batch, s.hidden, d, residual, unit), func(t *testing.T) {
					n := s.batch * s.hidden
					x, xv := soFilled(t, dev, d, n, 21)
					w, wv := soFilled(t, dev, d, s.hidden, 22)
					out := soPoisoned(t, dev, n*d.Bytes())
					p := cgo.RMSNormParams{X: x.Ptr, Weight: w.Ptr, Out: out.Ptr, Batch: s.batch, Hidden: s.hidden, Eps: 1e-5,
						UnitOffset: unit, DType: cgo.DType(d)}
					var rv []float32
					var res *cgo.Buffer
					if residual {
						res, rv = soFilled(t, dev, d, n, 23)
						p.Residual = res.Ptr
					}
					if err := dev.RMSNorm(p); err != nil {
						t.Fatal(err)
					}
					r := ref.RMSNorm(d, xv, rv, wv, s.hidden, float64(float32(1e-5)), unit)
					soCheck(t, "rmsnorm out", soReadFloats(t, out, d, n), r.Want, r.Bounds)
					if residual {
						sum := make([]float64, n)
						for j, v := range r.Sum {
							sum[j] = float64(v)
						}
						soCheck(t, "residual (x + residual, exact)", soReadFloats(t, res, d, n), sum, make([]float64, n))
					}
				})
			}
		}
	}
}

func TestSmallOpRMSNormInPlace(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	d := ref.BF16
	x, xv := soFilled(t, dev, d, 3*4104, 31)
	w, wv := soFilled(t, dev, d, 4104, 32)
	if err := dev.RMSNorm(cgo.RMSNormParams{X: x.Ptr, Weight: w.Ptr, Out: x.Ptr, Batch: 3, Hidden: 4104, Eps: 1e-6,
		DType: cgo.DType(d)}); err != nil {
		t.Fatal(err)
	}
	r := ref.RMSNorm(d, xv, nil, wv, 4104, float64(float32(1e-6)), false)
	soCheck(t, "in place", soReadFloats(t, x, d, len(xv)), r.Want, r.Bounds)
}

// soGatedAct runs the gated activation p names (its Activation, Limit and Alpha) on the batch
// rows of ffn gate | up pairs in gu (guv on the host) into a poisoned output, and returns what
// came back with the reference and its bounds.
func soGatedAct(t *testing.T, dev *cgo.Device, d ref.DType, gu *cgo.Buffer, guv []float32, batch, ffn int,
	p cgo.GatedActParams) (got []float32, want, bounds []float64) {
	t.Helper()
	out := soPoisoned(t, dev, batch*ffn*d.Bytes())
	p.GateUp, p.Out, p.Batch, p.FFN, p.DType = gu.Ptr, out.Ptr, batch, ffn, cgo.DType(d)
	if err := dev.GatedAct(p); err != nil {
		t.Fatal(err)
	}
	want, bounds = ref.GatedAct(d, ref.Activation(p.Activation), guv, ffn)
	return soReadFloats(t, out, d, len(want)), want, bounds
}

func TestSmallOpGatedAct(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range soRows {
		for _, act := range []cgo.Activation{cgo.ActSiLU, cgo.ActGeLUTanh} {
			d := soDTypes[(i+int(act))%2]
			t.Run(fmt.Sprintf("batch%d ffn%d %v %v", s.batch, s.hidden, d, act), func(t *testing.T) {
				gu, guv := soFilled(t, dev, d, 2*s.batch*s.hidden, 41)
				got, want, bounds := soGatedAct(t, dev, d, gu, guv, s.batch, s.hidden, cgo.GatedActParams{Activation: act})
				soCheck(t, "gated activation", got, want, bounds)
			})
		}
	}
}

func TestSmallOpBiasAdd(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range soRows {
		d := soDTypes[i%2]
		t.Run(fmt.Sprintf("batch%d n%d %v", s.batch, s.hidden, d), func(t *testing.T) {
			y, yv := soFilled(t, dev, d, s.batch*s.hidden, 51)
			bias, bv := soFilled(t, dev, d, s.hidden, 52)
			if err := dev.BiasAdd(cgo.BiasAddParams{Y: y.Ptr, Bias: bias.Ptr, Batch: s.batch, N: s.hidden, DType: cgo.DType(d)}); err != nil {
				t.Fatal(err)
			}
			want, bounds := ref.BiasAdd(d, yv, bv, s.hidden)
			soCheck(t, "bias add", soReadFloats(t, y, d, len(want)), want, bounds)
		})
	}
}

func TestSmallOpArgmax(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		batch, vocab, splits int
		d                    ref.DType
	}{
		{1, 32000, 0, ref.BF16},
		{1, 151936, 0, ref.FP16},
		{7, 32003, 0, ref.BF16}, // rows start off the 16-byte grid
		{17, 1001, 0, ref.FP16},
		{3, 100003, 5, ref.BF16},
		{2, 5, 1, ref.BF16}, // shorter than one chunk
	} {
		t.Run(fmt.Sprintf("batch%d vocab%d splits%d %v", tc.batch, tc.vocab, tc.splits, tc.d), func(t *testing.T) {
			n := tc.batch * tc.vocab
			logits := ref.Fill(tc.d, 61, 1, n)
			for b := 0; b < tc.batch; b++ {
				// plant the row's winner twice, later index first, then ties at the ends of the row
				row := logits[b*tc.vocab : (b+1)*tc.vocab]
				hi := int(ref.Hash64(62, uint64(b)) % uint64(tc.vocab))
				lo := int(ref.Hash64(63, uint64(b)) % uint64(tc.vocab))
				row[hi], row[lo] = 4, 4
				if b%3 == 1 {
					row[tc.vocab-1] = 8
				}
				if b%3 == 2 {
					row[0], row[tc.vocab-1] = 8, 8
				}
			}
			lb := mustAlloc(t, dev, uint64(n*tc.d.Bytes()))
			if err := lb.CopyFromHost(soEncode(tc.d, logits)); err != nil {
				t.Fatal(err)
			}
			ids := soPoisoned(t, dev, 4*tc.batch)
			p, ws, err := dev.ArgmaxPlan(cgo.ArgmaxParams{Logits: lb.Ptr, IDs: ids.Ptr, Batch: tc.batch, Vocab: tc.vocab,
				DType: cgo.DType(tc.d), NumSplits: tc.splits})
			if err != nil {
				t.Fatal(err)
			}
			if ws > 0 {
				wb := soPoisoned(t, dev, int(ws))
				p.Workspace, p.WorkspaceBytes = wb.Ptr, wb.Bytes
			}
			if err := dev.Argmax(p); err != nil {
				t.Fatal(err)
			}
			want := ref.Argmax(logits, tc.vocab)
			got := soReadInts(t, ids, tc.batch)
			for b := range want {
				if got[b] != want[b] {
					t.Fatalf("row %d (of %d, %d splits): argmax %d, want %d", b, tc.batch, p.NumSplits, got[b], want[b])
				}
			}
		})
	}
}

// soCache is a poisoned KV cache of one layout for the rope test.
type soCache struct {
	shape ref.AttentionShape
	table []int32
	k, v  *cgo.Buffer
	cache cgo.KVCache
}

func newSoCache(t *testing.T, dev *cgo.Device, d ref.DType, s ref.AttentionShape) *soCache {
	t.Helper()
	s = s.WithDefaults()
	c := &soCache{shape: s}
	bytes := s.CacheElements() * d.Bytes()
	c.k, c.v = soPoisoned(t, dev, bytes), soPoisoned(t, dev, bytes)
	c.cache = cgo.KVCache{K: c.k.Ptr, V: c.v.Ptr, Layout: cgo.KVLayout(s.Layout), DType: cgo.DType(d), KVHeads: s.KVHeads,
		HeadDim: s.HeadDim, Capacity: s.Capacity}
	if s.Layout == ref.KVPaged {
		c.table = s.ShuffledPageTable(77)
		pt := soInts(t, dev, c.table)
		c.cache.PageTable, c.cache.PageSize, c.cache.NumPages, c.cache.PagesPerSeq = pt.Ptr, s.PageSize, s.NumPages, s.PagesPerSeq
	}
	return c
}

func TestSmallOpRopeKVAppend(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	llama3 := ref.Rope{Theta: 500000, Scaling: ref.RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4,
		OriginalMaxPositions: 8192, RotaryDim: 128}
	for _, tc := range []struct {
		name            string
		rope            ref.Rope
		qHeads          int
		layout          ref.KVLayout
		d               ref.DType
		headDim         int
		positions       []int
		kvHeads, tokens int
	}{
		{"llama3 gqa contiguous", llama3, 8, ref.KVContiguous, ref.BF16, 128, []int{0, 131071, 9000}, 2, 131072},
		{"default partial rotary 20 of 80 paged", ref.Rope{Theta: 10000, RotaryDim: 20}, 3, ref.KVPaged, ref.FP16, 80,
			[]int{5, -1, 300, 47, 0, 31, 2, 100, 257, 6, 7, 8, 9, 10, 11, 12, 200}, 1, 320},
		{"linear partial 64 of 128", ref.Rope{Theta: 10000, Scaling: ref.RopeLinear, Factor: 4, RotaryDim: 64}, 7,
			ref.KVContiguous, ref.FP16, 128, []int{17, 4000, 3, 12, 900, 1, 2}, 1, 4096},
		{"dynamic ntk past the original", ref.Rope{Theta: 10000, Scaling: ref.RopeDynamicNTK, Factor: 2,
			OriginalMaxPositions: 2048, RotaryDim: 64}, 4, ref.KVPaged, ref.BF16, 64, []int{100, 2047, 5000}, 2, 8192},
		// the second sequence's position is one past its cache: skipped entirely
		{"head 256 full", ref.Rope{Theta: 1000000, RotaryDim: 256}, 2, ref.KVContiguous, ref.BF16, 256, []int{63, 64}, 1, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch, d, D := len(tc.positions), tc.d, tc.headDim
			s := ref.AttentionShape{Batch: batch, QHeads: tc.qHeads, KVHeads: tc.kvHeads, HeadDim: D, Layout: tc.layout,
				Capacity: tc.tokens, PageSize: 64}
			if tc.layout == ref.KVPaged {
				s.Capacity, s.PagesPerSeq = 0, (tc.tokens+63)/64
				s.Context = []int{tc.tokens}
			}
			c := newSoCache(t, dev, d, s)
			s = c.shape
			q, qv := soFilled(t, dev, d, batch*tc.qHeads*D, 81)
			kn, kv := soFilled(t, dev, d, batch*tc.kvHeads*D, 82)
			vn, vv := soFilled(t, dev, d, batch*tc.kvHeads*D, 83)
			pos := make([]int32, batch)
			for b, p := range tc.positions {
				pos[b] = int32(p)
			}
			pb := soInts(t, dev, pos)
			r := cgo.Rope{Theta: float32(tc.rope.Theta), Scaling: cgo.RopeScaling(tc.rope.Scaling), Factor: float32(tc.rope.Factor),
				LowFreqFactor: float32(tc.rope.LowFreqFactor), HighFreqFactor: float32(tc.rope.HighFreqFactor),
				OriginalMaxPositions: tc.rope.OriginalMaxPositions, RotaryDim: tc.rope.RotaryDim}
			if err := dev.RopeKVAppend(cgo.RopeAppendParams{Q: q.Ptr, KNew: kn.Ptr, VNew: vn.Ptr, Positions: pb.Ptr,
				Cache: c.cache, Rope: r, Batch: batch, QHeads: tc.qHeads}); err != nil {
				t.Fatal(err)
			}
			gotQ := soReadFloats(t, q, d, len(qv))
			gotK := soReadFloats(t, c.k, d, s.CacheElements())
			gotV := soReadFloats(t, c.v, d, s.CacheElements())
			written := make([]bool, s.CacheElements())
			for b, p := range tc.positions {
				skipped := p < 0 || p >= s.SeqCapacity()
				for h := 0; h < tc.qHeads; h++ {
					off := (b*tc.qHeads + h) * D
					want, bounds := ref.RopeHead(tc.rope, d, qv[off:off+D], p)
					if skipped {
						want, bounds = ref.RopeHead(ref.Rope{RotaryDim: 2}, d, qv[off:off+D], 0) // untouched
					}
					soCheck(t, fmt.Sprintf("q of sequence %d head %d at %d", b, h, p), gotQ[off:off+D], want, bounds)
				}
				if skipped {
					continue
				}
				for h := 0; h < tc.kvHeads; h++ {
					src := (b*tc.kvHeads + h) * D
					row := s.KVOffset(c.table, b, h, p)
					want, bounds := ref.RopeHead(tc.rope, d, kv[src:src+D], p)
					soCheck(t, fmt.Sprintf("k of sequence %d head %d at %d", b, h, p), gotK[row:row+D], want, bounds)
					wantV, zero := ref.RopeHead(ref.Rope{RotaryDim: 2}, d, vv[src:src+D], 0)
					soCheck(t, fmt.Sprintf("v of sequence %d head %d at %d", b, h, p), gotV[row:row+D], wantV, zero)
					for i := row; i < row+D; i++ {
						written[i] = true
					}
				}
			}
			for i, w := range written {
				if !w && (!math.IsNaN(float64(gotK[i])) || !math.IsNaN(float64(gotV[i]))) {
					t.Fatalf("cache element %d was written but is no sequence's new token", i)
				}
			}
		})
	}
}

// The fused QKV projection's output read in place (RowStride), the rotated q written packed to
// QOut, and a layer without rotary (RotaryDim 0): q copied, k and v appended.
func TestSmallOpRopeKVAppendFused(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		name                     string
		rope                     ref.Rope
		qHeads, kvHeads, headDim int
		d                        ref.DType
		inPlace                  bool
	}{
		{"gqa 3 rotary full into q_out", ref.Rope{Theta: 10000, RotaryDim: 64}, 6, 2, 64, ref.BF16, false},
		{"partial 20 of 80 into q_out", ref.Rope{Theta: 10000, RotaryDim: 20}, 4, 1, 80, ref.FP16, false},
		{"no rotary into q_out", ref.Rope{Theta: 10000}, 4, 2, 128, ref.BF16, false},
		{"strided in place", ref.Rope{Theta: 500000, RotaryDim: 128}, 2, 2, 128, ref.FP16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			D, qh, kvh, d := tc.headDim, tc.qHeads, tc.kvHeads, tc.d
			positions := []int{0, 37, 5, 99, 12}
			batch, row := len(positions), (qh+2*kvh)*D
			s := ref.AttentionShape{Batch: batch, QHeads: qh, KVHeads: kvh, HeadDim: D, Layout: ref.KVContiguous, Capacity: 128}
			c := newSoCache(t, dev, d, s)
			s = c.shape
			qkv, vals := soFilled(t, dev, d, batch*row, 91)
			qOut := soPoisoned(t, dev, batch*qh*D*2)
			pos := make([]int32, batch)
			for b, p := range positions {
				pos[b] = int32(p)
			}
			pb := soInts(t, dev, pos)
			el := uint64(2)
			p := cgo.RopeAppendParams{Q: qkv.Ptr, KNew: qkv.Ptr + uint64(qh*D)*el, VNew: qkv.Ptr + uint64((qh+kvh)*D)*el,
				Positions: pb.Ptr, Cache: c.cache, Rope: cgo.Rope{Theta: float32(tc.rope.Theta), RotaryDim: tc.rope.RotaryDim},
				Batch: batch, QHeads: qh, RowStride: row}
			if !tc.inPlace {
				p.QOut = qOut.Ptr
			}
			if err := dev.RopeKVAppend(p); err != nil {
				t.Fatal(err)
			}
			gotIn := soReadFloats(t, qkv, d, batch*row)
			gotOut := soReadFloats(t, qOut, d, batch*qh*D)
			gotK := soReadFloats(t, c.k, d, s.CacheElements())
			gotV := soReadFloats(t, c.v, d, s.CacheElements())
			rotate := func(head []float32, p int) ([]float64, []float64) {
				if tc.rope.RotaryDim == 0 {
					return ref.RopeHead(ref.Rope{RotaryDim: 2}, d, head, 0) // a copy
				}
				return ref.RopeHead(tc.rope, d, head, p)
			}
			for b, p := range positions {
				for h := 0; h < qh; h++ {
					src := b*row + h*D
					want, bounds := rotate(vals[src:src+D], p)
					got := gotOut[(b*qh+h)*D:][:D]
					if tc.inPlace {
						got = gotIn[src : src+D]
					} else {
						same, none := ref.RopeHead(ref.Rope{RotaryDim: 2}, d, vals[src:src+D], 0)
						soCheck(t, fmt.Sprintf("q of sequence %d head %d left in place", b, h), gotIn[src:src+D], same, none)
					}
					soCheck(t, fmt.Sprintf("q of sequence %d head %d at %d", b, h, p), got, want, bounds)
				}
				for h := 0; h < kvh; h++ {
					k, v := b*row+(qh+h)*D, b*row+(qh+kvh+h)*D
					at := s.KVOffset(nil, b, h, p)
					want, bounds := rotate(vals[k:k+D], p)
					soCheck(t, fmt.Sprintf("k of sequence %d head %d at %d", b, h, p), gotK[at:at+D], want, bounds)
					wantV, zero := ref.RopeHead(ref.Rope{RotaryDim: 2}, d, vals[v:v+D], 0)
					soCheck(t, fmt.Sprintf("v of sequence %d head %d at %d", b, h, p), gotV[at:at+D], wantV, zero)
				}
			}
		})
	}
	bad := cgo.RopeAppendParams{Q: 256, KNew: 256, VNew: 256, Positions: 256, Batch: 1, QHeads: 4, RowStride: 12,
		Rope:  cgo.Rope{Theta: 10000, RotaryDim: 64},
		Cache: cgo.KVCache{K: 256, V: 256, Layout: cgo.KVContiguous, DType: cgo.DTypeBF16, KVHeads: 1, HeadDim: 64, Capacity: 8}}
	if err := dev.RopeKVAppend(bad); err == nil || !strings.Contains(err.Error(), "row_stride 12") {
		t.Errorf("row_stride 12 (under a row of q): %v", err)
	}
}

func TestSmallOpMoE(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		batch, experts, topK, hidden int
		mode                         ref.MoERouting
		renorm                       bool
		d                            ref.DType
	}{
		{7, 8, 2, 136, ref.MoETopKSoftmax, false, ref.BF16}, // Mixtral
		{17, 60, 4, 4104, ref.MoESoftmaxTopK, false, ref.FP16},
		{1, 128, 8, 4096, ref.MoESoftmaxTopK, true, ref.BF16}, // Qwen3-MoE
		{33, 256, 8, 136, ref.MoESoftmaxTopK, true, ref.BF16}, // more slots than one tile, bf16 ties
		{5, 4, 4, 136, ref.MoETopKSoftmax, false, ref.FP16},   // every expert chosen
	} {
		t.Run(fmt.Sprintf("batch%d experts%d top%d %v mode%d renorm=%v", tc.batch, tc.experts, tc.topK, tc.d, tc.mode, tc.renorm), func(t *testing.T) {
			d, slots := tc.d, tc.batch*tc.topK
			logits, lv := soFilled(t, dev, d, tc.batch*tc.experts, 91)
			ids, weights := soPoisoned(t, dev, 4*slots), soPoisoned(t, dev, 4*slots)
			if err := dev.MoERoute(cgo.MoERouteParams{Logits: logits.Ptr, TopKIDs: ids.Ptr, TopKWeights: weights.Ptr,
				Batch: tc.batch, Experts: tc.experts, TopK: tc.topK, Mode: cgo.MoERouting(tc.mode), Renormalize: tc.renorm,
				DType: cgo.DType(d)}); err != nil {
				t.Fatal(err)
			}
			wantIDs, wantW, boundW := ref.MoERoute(lv, tc.experts, tc.topK, tc.mode, tc.renorm)
			gotIDs := soReadInts(t, ids, slots)
			for s := range wantIDs {
				if gotIDs[s] != wantIDs[s] {
					t.Fatalf("slot %d: expert %d, want %d (ids %v, want %v)", s, gotIDs[s], wantIDs[s], gotIDs, wantIDs)
				}
			}
			soCheck(t, "router weights", soReadFloats(t, weights, ref.F32, slots), wantW, boundW)

			x, xv := soFilled(t, dev, d, tc.batch*tc.hidden, 92)
			counts, offsets := soPoisoned(t, dev, 4*tc.experts), soPoisoned(t, dev, 4*(tc.experts+1))
			sorted, rows := soPoisoned(t, dev, 4*slots), soPoisoned(t, dev, 4*slots)
			xs := soPoisoned(t, dev, slots*tc.hidden*d.Bytes())
			if err := dev.MoEGroup(cgo.MoEGroupParams{TopKIDs: ids.Ptr, ExpertCounts: counts.Ptr, ExpertOffsets: offsets.Ptr,
				SortedSlots: sorted.Ptr, SlotRows: rows.Ptr, X: x.Ptr, XSorted: xs.Ptr, Batch: tc.batch, TopK: tc.topK,
				Experts: tc.experts, Hidden: tc.hidden, DType: cgo.DType(d)}); err != nil {
				t.Fatal(err)
			}
			g := ref.MoEGroup(wantIDs, tc.experts)
			for _, c := range []struct {
				name string
				got  []int32
				want []int32
			}{{"counts", soReadInts(t, counts, tc.experts), g.Counts}, {"offsets", soReadInts(t, offsets, tc.experts+1), g.Offsets},
				{"sorted slots", soReadInts(t, sorted, slots), g.SortedSlots}, {"slot rows", soReadInts(t, rows, slots), g.SlotRows}} {
				if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
					t.Fatalf("%s: %v, want %v", c.name, c.got, c.want)
				}
			}
			wantXS := make([]float64, slots*tc.hidden)
			for r, s := range g.SortedSlots {
				for i := 0; i < tc.hidden; i++ {
					wantXS[r*tc.hidden+i] = float64(xv[int(s)/tc.topK*tc.hidden+i])
				}
			}
			soCheck(t, "gathered rows", soReadFloats(t, xs, d, len(wantXS)), wantXS, make([]float64, len(wantXS)))

			y, yv := soFilled(t, dev, d, slots*tc.hidden, 93)
			out := soPoisoned(t, dev, tc.batch*tc.hidden*d.Bytes())
			if err := dev.MoECombine(cgo.MoECombineParams{YSorted: y.Ptr, SlotRows: rows.Ptr, TopKWeights: weights.Ptr,
				Out: out.Ptr, Batch: tc.batch, TopK: tc.topK, Hidden: tc.hidden, DType: cgo.DType(d)}); err != nil {
				t.Fatal(err)
			}
			w32 := soReadFloats(t, weights, ref.F32, slots)
			want, bounds := ref.MoECombine(d, yv, g.SlotRows, w32, tc.topK, tc.hidden)
			soCheck(t, "combine", soReadFloats(t, out, d, len(want)), want, bounds)
		})
	}
}

// Expert ids outside [0, experts) (a corrupt route) are dropped, not written out of bounds.
func TestSmallOpMoEGroupDropsBadExperts(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	ids := []int32{3, -1, 0, 4, 9, 1, 3, 0} // 4 is one past the last expert
	idBuf := soInts(t, dev, ids)
	counts, offsets := soPoisoned(t, dev, 4*4), soPoisoned(t, dev, 4*5)
	sorted, rows := soPoisoned(t, dev, 4*len(ids)), soPoisoned(t, dev, 4*len(ids))
	if err := dev.MoEGroup(cgo.MoEGroupParams{TopKIDs: idBuf.Ptr, ExpertCounts: counts.Ptr, ExpertOffsets: offsets.Ptr,
		SortedSlots: sorted.Ptr, SlotRows: rows.Ptr, Batch: 4, TopK: 2, Experts: 4}); err != nil {
		t.Fatal(err)
	}
	g := ref.MoEGroup(ids, 4)
	got := fmt.Sprint(soReadInts(t, counts, 4), soReadInts(t, offsets, 5), soReadInts(t, sorted, len(ids)), soReadInts(t, rows, len(ids)))
	if want := fmt.Sprint(g.Counts, g.Offsets, g.SortedSlots, g.SlotRows); got != want {
		t.Fatalf("grouping %s, want %s", got, want)
	}
}

func TestSmallOpBadInput(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 1<<16)
	p := buf.Ptr
	cache := cgo.KVCache{K: p, V: p, Layout: cgo.KVContiguous, DType: cgo.DTypeBF16, KVHeads: 1, HeadDim: 128, Capacity: 16}
	rope := func(r cgo.Rope, c cgo.KVCache) error {
		return dev.RopeKVAppend(cgo.RopeAppendParams{Q: p, KNew: p, VNew: p, Positions: p, Cache: c, Rope: r, Batch: 1, QHeads: 1})
	}
	badHead := cache
	badHead.HeadDim = 72
	for _, tc := range []struct {
		name, want string
		err        error
	}{
		{"rotary_dim odd", "rotary_dim 5", rope(cgo.Rope{Theta: 10000, RotaryDim: 5}, cache)},
		{"rotary_dim past head_dim", "rotary_dim 130", rope(cgo.Rope{Theta: 10000, RotaryDim: 130}, cache)},
		{"head_dim 72", "head_dim 72", rope(cgo.Rope{Theta: 10000, RotaryDim: 64}, badHead)},
		{"top_k past experts", "top_k 9", dev.MoERoute(cgo.MoERouteParams{Logits: p, TopKIDs: p, TopKWeights: p, Batch: 1,
			Experts: 8, TopK: 9, DType: cgo.DTypeBF16})},
		{"experts past the limit", "experts 400", dev.MoEGroup(cgo.MoEGroupParams{TopKIDs: p, ExpertCounts: p, ExpertOffsets: p,
			SortedSlots: p, SlotRows: p, Batch: 1, TopK: 2, Experts: 400})},
		{"groups that do not divide", "groups 3", dev.MoERoute(cgo.MoERouteParams{Logits: p, TopKIDs: p, TopKWeights: p, Batch: 1,
			Experts: 16, TopK: 2, Mode: cgo.MoESigmoidTopK, Groups: 3, GroupsKept: 1, DType: cgo.DTypeBF16})},
		{"groups of one", "groups 16", dev.MoERoute(cgo.MoERouteParams{Logits: p, TopKIDs: p, TopKWeights: p, Batch: 1,
			Experts: 16, TopK: 2, Mode: cgo.MoESigmoidTopK, Groups: 16, GroupsKept: 2, DType: cgo.DTypeBF16})},
		{"too few experts kept", "groups_kept 1", dev.MoERoute(cgo.MoERouteParams{Logits: p, TopKIDs: p, TopKWeights: p, Batch: 1,
			Experts: 16, TopK: 5, Mode: cgo.MoESigmoidTopK, Groups: 4, GroupsKept: 1, DType: cgo.DTypeBF16})},
		{"hidden not a multiple of 8", "hidden 4100", dev.RMSNorm(cgo.RMSNormParams{X: p, Weight: p, Out: p, Batch: 1,
			Hidden: 4100, Eps: 1e-5, DType: cgo.DTypeBF16})},
		{"hidden too long", "hidden 65536", dev.RMSNorm(cgo.RMSNormParams{X: p, Weight: p, Out: p, Batch: 1,
			Hidden: 65536, Eps: 1e-5, DType: cgo.DTypeBF16})},
		{"groups past the limit", "groups 64", dev.MoERoute(cgo.MoERouteParams{Logits: p, TopKIDs: p, TopKWeights: p, Batch: 1,
			Experts: 128, TopK: 2, Mode: cgo.MoESigmoidTopK, Groups: 64, GroupsKept: 2, DType: cgo.DTypeBF16})},
		{"ffn not a multiple of 8", "ffn 14", dev.GatedAct(cgo.GatedActParams{GateUp: p, Out: p, Batch: 1, FFN: 14, DType: cgo.DTypeFP16})},
		{"bias n", "n 3", dev.BiasAdd(cgo.BiasAddParams{Y: p, Bias: p, Batch: 1, N: 3, DType: cgo.DTypeFP16})},
		{"embedding hidden", "hidden 12", dev.Embedding(cgo.EmbeddingParams{Table: p, IDs: p, Out: p, Batch: 1, Vocab: 4,
			Hidden: 12, DType: cgo.DTypeBF16})},
		{"f32 dtype", "dtype 0 (f32)", dev.BiasAdd(cgo.BiasAddParams{Y: p, Bias: p, Batch: 1, N: 8, DType: cgo.DTypeF32})},
	} {
		if !errors.Is(tc.err, cgo.ErrUnsupportedShape) || !strings.Contains(fmt.Sprint(tc.err), tc.want) {
			t.Errorf("%s: got %v, want an unsupported-shape error naming %q", tc.name, tc.err, tc.want)
		}
	}
	// a workspace too small for the splits is refused before any launch
	_, _, err := dev.ArgmaxPlan(cgo.ArgmaxParams{Logits: p, IDs: p, Batch: 2, Vocab: 64, DType: cgo.DTypeBF16, NumSplits: 4})
	if err != nil {
		t.Fatal(err)
	}
	err = dev.Argmax(cgo.ArgmaxParams{Logits: p, IDs: p, Batch: 2, Vocab: 64, DType: cgo.DTypeBF16, NumSplits: 4})
	if !errors.Is(err, cgo.ErrWorkspace) {
		t.Errorf("argmax without its workspace: %v, want a workspace error", err)
	}
}
