package measure

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// KindSmallOp is one small op of a decode step, run once on hashed inputs (outputs poisoned
// with NaN first) and checked against bench/ref element by element. Small ops are verified,
// not timed: a step composes their time from bandwidth (see bench/step).
const KindSmallOp = "smallop"

// SmallOps are the ops a SmallOpSpec names.
var SmallOps = []string{"embedding", "rmsnorm", "rope", "act", "bias", "argmax", "moe"}

// SmallOpSpec is one small op and its shape; the fields an op has no use for are ignored.
type SmallOpSpec struct {
	Op     string    `json:"op"` // one of SmallOps
	DType  cgo.DType `json:"dtype"`
	Batch  int       `json:"batch"`           // rows: sequences or tokens
	Hidden int       `json:"hidden"`          // row length; the ffn width for act
	Vocab  int       `json:"vocab,omitempty"` // embedding, argmax
	// rmsnorm (epsilon 1e-5): add a residual first (and check the stored sum); scale by 1 +
	// weight (Gemma).
	Residual   bool `json:"residual,omitempty"`
	UnitOffset bool `json:"unit_offset,omitempty"`

	// rope: rotary embedding fused with the KV append at Position of every sequence.
	QHeads   int      `json:"q_heads,omitempty"`
	KVHeads  int      `json:"kv_heads,omitempty"`
	HeadDim  int      `json:"head_dim,omitempty"`
	Position int      `json:"position,omitempty"`
	Rope     ref.Rope `json:"rope,omitempty"` // RotaryDim 0: HeadDim

	Activation cgo.Activation `json:"activation,omitempty"` // act

	// moe: route, group and combine.
	Experts     int            `json:"experts,omitempty"`
	TopK        int            `json:"top_k,omitempty"`
	Routing     cgo.MoERouting `json:"routing,omitempty"`
	Renormalize bool           `json:"renormalize,omitempty"`
}

// Spec wraps s.
func (s SmallOpSpec) Spec() Spec { return Spec{Kind: KindSmallOp, SmallOp: &s} }

// OutputCheck is one output of a call that writes several, against its reference.
type OutputCheck struct {
	Output string
	ref.Comparison
}

// smallOpRmsEps is the rmsnorm epsilon every check uses.
const smallOpRmsEps = 1e-5

// smallOp runs the op once and compares every output. A shape the kernels refuse (an
// unsupported shape or an argument out of range, named by the library) is skipped.
func smallOp(dev *cgo.Device, s SmallOpSpec, o Options) (Outcome, Check) {
	kernel := "smallop:" + s.Op
	out := Outcome{Kernel: kernel, Spec: s.Spec()}
	if !slices.Contains(SmallOps, s.Op) {
		return merge(out, failed(kernel, "invalid spec: unknown small op %q (want %s)", s.Op, strings.Join(SmallOps, ", "))), noCheck
	}
	if info, err := readDevice(dev); err == nil {
		out.Emulated = info.emulated
	}
	r := &smallOpRun{s: s, d: ref.DType(s.DType), seed: o.Seed, bufs: buffers{dev: dev}}
	defer r.bufs.close()
	if err := r.run(); err != nil {
		if errors.Is(err, cgo.ErrUnsupportedShape) || errors.Is(err, cgo.ErrInvalidArgument) || errors.Is(err, errSmallOpShape) {
			return merge(out, skipped(kernel, "%v", err)), noCheck
		}
		return merge(out, failed(kernel, "%v", err)), noCheck
	}
	c := checkOf(Verification{Passed: true})
	c.Outputs = r.checks
	for _, oc := range r.checks {
		c.Checked += oc.Count
		c.NonFinite += oc.NonFinite
		c.OutOfBound += oc.OutOfBound
		if !oc.Passed && c.Passed {
			c.Passed, c.Reason = false, oc.Output+": "+oc.Reason()
		}
	}
	out.Verification = c.Verification
	out.Status = StatusOK
	return out, c
}

// errSmallOpShape marks a spec the op itself refuses before the library sees it.
var errSmallOpShape = errors.New("unsupported small-op shape")

// smallOpRun holds one verification's device buffers and the checks so far.
type smallOpRun struct {
	s      SmallOpSpec
	d      ref.DType
	seed   uint64
	next   uint64
	bufs   buffers
	checks []OutputCheck
}

// alloc is a buffer poisoned with all-ones bytes: NaN in every float dtype, -1 as int32.
func (v *smallOpRun) alloc(what string, bytes int) (*cgo.Buffer, error) {
	b, err := v.bufs.alloc(what, uint64(bytes))
	if err == nil {
		err = b.Memset(0xFF)
	}
	return b, err
}

// filled is n hashed elements of d (a fresh seed each call) and their values.
func (v *smallOpRun) filled(what string, d ref.DType, n int) (*cgo.Buffer, []float32, error) {
	b, err := v.alloc(what, n*d.Bytes())
	if err != nil {
		return nil, nil, err
	}
	seed := ref.Hash64(v.seed, v.next)
	v.next++
	return b, ref.Fill(d, seed, 1, n), b.FillHash(cgo.DType(d), uint64(n), seed, 1)
}

func (v *smallOpRun) ints(what string, vals []int32) (*cgo.Buffer, error) {
	b, err := v.alloc(what, 4*len(vals))
	if err == nil {
		err = cgo.Write(b, vals)
	}
	return b, err
}

func (v *smallOpRun) readInts(b *cgo.Buffer, n int) []float32 {
	got := make([]int32, n)
	if err := cgo.Read(b, got); err != nil {
		return make([]float32, n) // zeros: an unread buffer fails its check
	}
	f := make([]float32, n)
	for i, x := range got {
		f[i] = float32(x)
	}
	return f
}

func (v *smallOpRun) readFloats(b *cgo.Buffer, d ref.DType, n int) []float32 {
	raw := make([]byte, n*d.Bytes())
	if err := b.CopyToHost(raw); err != nil {
		return make([]float32, n)
	}
	got, _ := ref.Decode(d, raw)
	return got
}

// check records got against want with per-element bounds (nil: exact).
func (v *smallOpRun) check(output string, got []float32, want, bounds []float64) {
	if bounds == nil {
		bounds = make([]float64, len(want))
	}
	v.checks = append(v.checks, OutputCheck{Output: output, Comparison: ref.Compare(got, want, bounds, math.Inf(1))})
}

func widenInts(x []int32) []float64 {
	f := make([]float64, len(x))
	for i, e := range x {
		f[i] = float64(e)
	}
	return f
}

func (v *smallOpRun) run() error {
	s, d, batch, hidden := v.s, v.d, v.s.Batch, v.s.Hidden
	dev, dt := v.bufs.dev, s.DType
	switch s.Op {
	case "embedding":
		table, tv, err := v.filled("the table", d, s.Vocab*hidden)
		if err != nil {
			return err
		}
		ids := make([]int32, batch)
		for b := range ids {
			ids[b] = int32(ref.Hash64(v.seed, uint64(b)) % uint64(max(s.Vocab, 1)))
		}
		idBuf, err := v.ints("the ids", ids)
		if err != nil {
			return err
		}
		out, err := v.alloc("the output", batch*hidden*d.Bytes())
		if err != nil {
			return err
		}
		if err := dev.Embedding(cgo.EmbeddingParams{Table: table.Ptr, IDs: idBuf.Ptr, Out: out.Ptr, Batch: batch, Vocab: s.Vocab, Hidden: hidden, DType: dt}); err != nil {
			return err
		}
		want, bounds := ref.Embedding(d, tv, ids, hidden, 0)
		v.check("out", v.readFloats(out, d, batch*hidden), want, bounds)
	case "rmsnorm":
		return v.runRMSNorm()
	case "bias":
		y, yv, err := v.filled("y", d, batch*hidden)
		if err != nil {
			return err
		}
		bias, bv, err := v.filled("the bias", d, hidden)
		if err != nil {
			return err
		}
		if err := dev.BiasAdd(cgo.BiasAddParams{Y: y.Ptr, Bias: bias.Ptr, Batch: batch, N: hidden, DType: dt}); err != nil {
			return err
		}
		want, bounds := ref.BiasAdd(d, yv, bv, hidden)
		v.check("y", v.readFloats(y, d, batch*hidden), want, bounds)
	case "act":
		gu, guv, err := v.filled("gate_up", d, 2*batch*hidden)
		if err != nil {
			return err
		}
		out, err := v.alloc("the output", batch*hidden*d.Bytes())
		if err != nil {
			return err
		}
		if err := dev.GatedAct(cgo.GatedActParams{GateUp: gu.Ptr, Out: out.Ptr, Batch: batch, FFN: hidden, Activation: s.Activation, DType: dt}); err != nil {
			return err
		}
		want, bounds := ref.GatedAct(d, ref.Activation(s.Activation), guv, hidden)
		v.check("out", v.readFloats(out, d, batch*hidden), want, bounds)
	case "argmax":
		return v.runArgmax()
	case "rope":
		return v.runRope()
	case "moe":
		return v.runMoE()
	}
	return nil
}

func (v *smallOpRun) runRMSNorm() error {
	s, d, batch, hidden := v.s, v.d, v.s.Batch, v.s.Hidden
	x, xv, err := v.filled("x", d, batch*hidden)
	if err != nil {
		return err
	}
	w, wv, err := v.filled("the weight", d, hidden)
	if err != nil {
		return err
	}
	out, err := v.alloc("the output", batch*hidden*d.Bytes())
	if err != nil {
		return err
	}
	p := cgo.RMSNormParams{X: x.Ptr, Weight: w.Ptr, Out: out.Ptr, Batch: batch, Hidden: hidden, Eps: smallOpRmsEps, UnitOffset: s.UnitOffset, DType: s.DType}
	var res *cgo.Buffer
	var rv []float32
	if s.Residual {
		if res, rv, err = v.filled("the residual", d, batch*hidden); err != nil {
			return err
		}
		p.Residual = res.Ptr
	}
	if err := v.bufs.dev.RMSNorm(p); err != nil {
		return err
	}
	r := ref.RMSNorm(d, xv, rv, wv, hidden, float64(float32(smallOpRmsEps)), p.UnitOffset)
	v.check("out", v.readFloats(out, d, batch*hidden), r.Want, r.Bounds)
	if res != nil {
		sum := make([]float64, len(r.Sum))
		for i, s := range r.Sum {
			sum[i] = float64(s)
		}
		v.check("residual (the sum)", v.readFloats(res, d, batch*hidden), sum, nil)
	}
	return nil
}

func (v *smallOpRun) runArgmax() error {
	s, d, batch := v.s, v.d, v.s.Batch
	dev := v.bufs.dev
	logits, lv, err := v.filled("the logits", d, batch*s.Vocab)
	if err != nil {
		return err
	}
	ids, err := v.alloc("the ids", 4*batch)
	if err != nil {
		return err
	}
	p, ws, err := dev.ArgmaxPlan(cgo.ArgmaxParams{Logits: logits.Ptr, IDs: ids.Ptr, Batch: batch, Vocab: s.Vocab, DType: s.DType})
	if err != nil {
		return err
	}
	if ws > 0 {
		w, err := v.alloc("the workspace", int(ws))
		if err != nil {
			return err
		}
		p.Workspace, p.WorkspaceBytes = w.Ptr, w.Bytes
	}
	if err := dev.Argmax(p); err != nil {
		return err
	}
	v.check("ids", v.readInts(ids, batch), widenInts(ref.Argmax(lv, s.Vocab)), nil)
	return nil
}

func (v *smallOpRun) runRope() error {
	s, d, batch := v.s, v.d, v.s.Batch
	qh, kvh, hd, pos := s.QHeads, s.KVHeads, s.HeadDim, s.Position
	r := s.Rope
	if r.RotaryDim == 0 {
		r.RotaryDim = hd
	}
	if qh < 1 || kvh < 1 || pos < 0 || pos >= math.MaxInt32 {
		return fmt.Errorf("%w: q_heads %d, kv_heads %d, position %d: want heads >= 1 and a position 0..2^31-2", errSmallOpShape, qh, kvh, pos)
	}
	capacity := pos + 1
	k, err := v.alloc("the K cache", batch*kvh*capacity*hd*d.Bytes())
	if err != nil {
		return err
	}
	vc, err := v.alloc("the V cache", batch*kvh*capacity*hd*d.Bytes())
	if err != nil {
		return err
	}
	q, qv, err := v.filled("q", d, batch*qh*hd)
	if err != nil {
		return err
	}
	kn, knv, err := v.filled("k_new", d, batch*kvh*hd)
	if err != nil {
		return err
	}
	vn, vnv, err := v.filled("v_new", d, batch*kvh*hd)
	if err != nil {
		return err
	}
	positions := make([]int32, batch)
	for b := range positions {
		positions[b] = int32(pos)
	}
	pb, err := v.ints("the positions", positions)
	if err != nil {
		return err
	}
	cache := cgo.KVCache{K: k.Ptr, V: vc.Ptr, Layout: cgo.KVContiguous, DType: s.DType, KVHeads: kvh, HeadDim: hd, Capacity: capacity}
	if err := v.bufs.dev.RopeKVAppend(cgo.RopeAppendParams{Q: q.Ptr, KNew: kn.Ptr, VNew: vn.Ptr, Positions: pb.Ptr, Cache: cache,
		Rope: cgo.Rope{Theta: float32(r.Theta), Scaling: cgo.RopeScaling(r.Scaling), Factor: float32(r.Factor), LowFreqFactor: float32(r.LowFreqFactor),
			HighFreqFactor: float32(r.HighFreqFactor), OriginalMaxPositions: r.OriginalMaxPositions, RotaryDim: r.RotaryDim},
		Batch: batch, QHeads: qh}); err != nil {
		return err
	}
	rows := func(src []float32, heads int, rope ref.Rope, at int) (want, bounds []float64) {
		for h := 0; h < batch*heads; h++ {
			w, b := ref.RopeHead(rope, d, src[h*hd:(h+1)*hd], at)
			want, bounds = append(want, w...), append(bounds, b...)
		}
		return want, bounds
	}
	want, bounds := rows(qv, qh, r, pos)
	v.check("q (rotated)", v.readFloats(q, d, batch*qh*hd), want, bounds)
	gotK, gotV := v.readFloats(k, d, batch*kvh*capacity*hd), v.readFloats(vc, d, batch*kvh*capacity*hd)
	var newK, newV []float32
	for h := 0; h < batch*kvh; h++ {
		row := (h*capacity + pos) * hd
		newK, newV = append(newK, gotK[row:row+hd]...), append(newV, gotV[row:row+hd]...)
	}
	want, bounds = rows(knv, kvh, r, pos)
	v.check("k cache (rotated)", newK, want, bounds)
	want, _ = rows(vnv, kvh, ref.Rope{RotaryDim: 2}, 0) // position 0 turns nothing: a copy
	v.check("v cache", newV, want, nil)
	return nil
}
