package cgo_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The recurrent layers' ops (Gated DeltaNet, Mamba-2) against bench/ref's float64 references
// on the emulator: odd shapes and strided layouts as the layers' projections leave them, several
// steps in a row on one state (each step's output checked, then the fp32 state against the
// reference's, within the bound carried through the steps), both dtypes, every output poisoned
// with NaN before the call (a NaN never passes ref.Compare). Named TestSmallOp* so that
// `make emu-hazard-test` runs them under the emulator's hazard schedules too.

// rcF32 is a device buffer of n f32 values from the hash, scaled, with its values.
func rcF32(t *testing.T, dev *cgo.Device, n int, seed uint64, scale float32) (*cgo.Buffer, []float32) {
	t.Helper()
	b := mustAlloc(t, dev, uint64(4*n))
	if err := b.FillHash(cgo.DTypeF32, uint64(n), seed, scale); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := cgo.Read(b, got); err != nil {
		t.Fatal(err)
	}
	return b, got
}

// rcRows takes width elements at offset of each of batch rows of stride elements.
func rcRows(v []float32, batch, stride, offset, width int) []float32 {
	out := make([]float32, 0, batch*width)
	for b := 0; b < batch; b++ {
		out = append(out, v[b*stride+offset:b*stride+offset+width]...)
	}
	return out
}

func rcCheckState(t *testing.T, what string, b *cgo.Buffer, st *ref.GDNState) {
	t.Helper()
	got := make([]float32, len(st.S))
	if err := cgo.Read(b, got); err != nil {
		t.Fatal(err)
	}
	bounds := make([]float64, len(st.S))
	for i := range bounds {
		bounds[i] = st.Err[i] + 0x1p-24*math.Abs(st.S[i]) + 0x1p-140
	}
	soCheck(t, what, got, st.S, bounds)
}

func TestSmallOpConv1DUpdate(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range []struct {
		batch, channels, kernel, xStride, xOffset int
		bias, silu                                bool
	}{
		{3, 40, 4, 64, 8, false, true},  // Qwen3-Next: no bias, silu, x inside the projection's row
		{2, 136, 4, 0, 0, true, true},   // Nemotron-H: bias
		{5, 8, 3, 24, 16, true, false},  // odd kernel, no activation
		{1, 1032, 2, 0, 0, false, true}, // shortest kernel
	} {
		d := soDTypes[i%2]
		t.Run(fmt.Sprintf("batch%d ch%d k%d %v", s.batch, s.channels, s.kernel, d), func(t *testing.T) {
			xs := s.xStride
			if xs == 0 {
				xs = s.channels
			}
			stateBuf, state := soFilled(t, dev, d, s.batch*(s.kernel-1)*s.channels, 31)
			wBuf, w := soFilled(t, dev, d, s.kernel*s.channels, 32)
			var bias []float32
			var biasPtr uint64
			if s.bias {
				bb, bv := soFilled(t, dev, d, s.channels, 33)
				bias, biasPtr = bv, bb.Ptr
			}
			act := cgo.ConvActNone
			if s.silu {
				act = cgo.ConvActSiLU
			}
			for step := 0; step < 3; step++ {
				xBuf, xv := soFilled(t, dev, d, s.batch*xs, uint64(40+step))
				out := soPoisoned(t, dev, s.batch*s.channels*d.Bytes())
				err := dev.Conv1DUpdate(cgo.Conv1DUpdateParams{X: xBuf.Ptr + uint64(s.xOffset*d.Bytes()), State: stateBuf.Ptr,
					Weight: wBuf.Ptr, Bias: biasPtr, Out: out.Ptr, Batch: s.batch, Channels: s.channels, Kernel: s.kernel,
					XRowStride: s.xStride, Activation: act, DType: cgo.DType(d)})
				if err != nil {
					t.Fatal(err)
				}
				x := rcRows(xv, s.batch, xs, s.xOffset, s.channels)
				want, bounds, next := ref.Conv1DUpdate(d, x, state, w, bias, s.channels, s.kernel, s.silu)
				soCheck(t, fmt.Sprintf("step %d out", step), soReadFloats(t, out, d, len(want)), want, bounds)
				got := soReadFloats(t, stateBuf, d, len(next))
				for j := range next {
					if got[j] != next[j] {
						t.Fatalf("step %d: state element %d = %v, want %v (the inputs shifted)", step, j, got[j], next[j])
					}
				}
				state = next
			}
		})
	}
}

type gdnCase struct {
	batch, kHeads, vHeads, headK, headV int
	strided                             bool // q, k, v in the conv's output row (with padding), a and b in one row
}

func TestSmallOpGDNStep(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range []gdnCase{
		{3, 2, 6, 24, 40, true},   // grouped: 3 value heads a key head
		{2, 1, 1, 136, 8, false},  // key dim past 128 (the 8-row kernel), a narrow value head
		{1, 2, 4, 128, 128, true}, // Qwen3-Next's head dims
		{5, 3, 3, 8, 24, false},   // one value head a key head, tiny heads
	} {
		for _, d := range soDTypes {
			if i == 2 && d == ref.FP16 {
				continue // the long case once
			}
			t.Run(fmt.Sprintf("b%d hk%d hv%d dk%d dv%d %v", s.batch, s.kHeads, s.vHeads, s.headK, s.headV, d), func(t *testing.T) {
				gdnRun(t, dev, d, s, 4)
			})
		}
	}
}

func gdnRun(t *testing.T, dev *cgo.Device, d ref.DType, s gdnCase, steps int) {
	t.Helper()
	qkW, vW := s.kHeads*s.headK, s.vHeads*s.headV
	stride, abStride := 0, 0
	qOff, kOff, vOff := 0, 0, 0
	if s.strided {
		stride = 2*qkW + vW + 8
		qOff, kOff, vOff = 0, qkW, 2*qkW
		abStride = 2 * s.vHeads
	}
	sh := ref.GDNShape{KHeads: s.kHeads, VHeads: s.vHeads, HeadK: s.headK, HeadV: s.headV}
	stateBuf, stateInit := rcF32(t, dev, s.batch*s.vHeads*s.headK*s.headV, 51, 0.5)
	st := ref.NewGDNState(stateInit)
	aLogBuf, aLog := rcF32(t, dev, s.vHeads, 52, 1)
	dtBuf, dtBias := rcF32(t, dev, s.vHeads, 53, 1)
	for step := 0; step < steps; step++ {
		seed := uint64(60 + 10*step)
		p := cgo.GDNStepParams{ALog: aLogBuf.Ptr, DtBias: dtBuf.Ptr, State: stateBuf.Ptr, Batch: s.batch, KHeads: s.kHeads,
			VHeads: s.vHeads, HeadK: s.headK, HeadV: s.headV, QKVRowStride: stride, ABRowStride: abStride, DType: cgo.DType(d)}
		var in ref.GDNInputs
		in.ALog, in.DtBias = aLog, dtBias
		el := uint64(d.Bytes())
		if s.strided {
			buf, v := soFilled(t, dev, d, s.batch*stride, seed)
			p.Q, p.K, p.V = buf.Ptr+uint64(qOff)*el, buf.Ptr+uint64(kOff)*el, buf.Ptr+uint64(vOff)*el
			in.Q, in.K, in.V = rcRows(v, s.batch, stride, qOff, qkW), rcRows(v, s.batch, stride, kOff, qkW), rcRows(v, s.batch, stride, vOff, vW)
			ab, abv := soFilled(t, dev, d, s.batch*abStride, seed+1)
			p.BGate, p.A = ab.Ptr, ab.Ptr+uint64(s.vHeads)*el // in_proj_ba's row: b then a
			in.B, in.A = rcRows(abv, s.batch, abStride, 0, s.vHeads), rcRows(abv, s.batch, abStride, s.vHeads, s.vHeads)
		} else {
			qb, qv := soFilled(t, dev, d, s.batch*qkW, seed)
			kb, kv := soFilled(t, dev, d, s.batch*qkW, seed+1)
			vb, vv := soFilled(t, dev, d, s.batch*vW, seed+2)
			ab, av := soFilled(t, dev, d, s.batch*s.vHeads, seed+3)
			bb, bv := soFilled(t, dev, d, s.batch*s.vHeads, seed+4)
			p.Q, p.K, p.V, p.A, p.BGate = qb.Ptr, kb.Ptr, vb.Ptr, ab.Ptr, bb.Ptr
			in.Q, in.K, in.V, in.A, in.B = qv, kv, vv, av, bv
		}
		out := soPoisoned(t, dev, s.batch*vW*d.Bytes())
		p.Out = out.Ptr
		if err := dev.GDNStep(p); err != nil {
			t.Fatal(err)
		}
		want, bounds := ref.GDNStep(d, sh, st, in)
		soCheck(t, fmt.Sprintf("step %d out", step), soReadFloats(t, out, d, len(want)), want, bounds)
	}
	rcCheckState(t, fmt.Sprintf("state after %d steps", steps), stateBuf, st)
}

func TestSmallOpGatedRMSNorm(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range []struct {
		batch, groups, size, zStride int
		shared, normFirst            bool
	}{
		{3, 6, 40, 256, true, true},   // Qwen3-Next: one weight per head, norm then gate, z inside a row
		{2, 3, 136, 0, false, false},  // Mamba-2: d_inner weight, gate then norm
		{1, 2, 2048, 0, false, false}, // Nemotron-H 56B's group (d_inner / n_groups)
		{4, 1, 8, 16, true, false},
	} {
		d := soDTypes[i%2]
		t.Run(fmt.Sprintf("b%d g%d size%d %v", s.batch, s.groups, s.size, d), func(t *testing.T) {
			width := s.groups * s.size
			zs := s.zStride
			if zs == 0 {
				zs = width
			}
			xb, x := soFilled(t, dev, d, s.batch*width, 71)
			zb, zv := soFilled(t, dev, d, s.batch*zs, 72)
			wn := width
			if s.shared {
				wn = s.size
			}
			wb, w := soFilled(t, dev, d, wn, 73)
			out := soPoisoned(t, dev, s.batch*width*d.Bytes())
			if err := dev.GatedRMSNorm(cgo.GatedRMSNormParams{X: xb.Ptr, Z: zb.Ptr, Weight: wb.Ptr, Out: out.Ptr, Batch: s.batch,
				Groups: s.groups, GroupSize: s.size, ZRowStride: s.zStride, SharedWeight: s.shared, NormBeforeGate: s.normFirst,
				Eps: 1e-6, DType: cgo.DType(d)}); err != nil {
				t.Fatal(err)
			}
			want, bounds := ref.GatedRMSNorm(d, x, rcRows(zv, s.batch, zs, 0, width), w, s.groups, s.size, s.shared, s.normFirst,
				float64(float32(1e-6)))
			soCheck(t, "gated rmsnorm", soReadFloats(t, out, d, len(want)), want, bounds)
		})
	}
}

func TestSmallOpSigmoidGateReLU2(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, d := range soDTypes {
		batch, heads, hd := 3, 5, 24
		ob, o := soFilled(t, dev, d, batch*heads*hd, 81)
		// q_proj's output [q | gate] a head: the gate at hd, head stride 2 hd, row 2 heads hd
		gb, g := soFilled(t, dev, d, batch*heads*2*hd, 82)
		gates := make([]float32, 0, len(o))
		for b := 0; b < batch; b++ {
			for h := 0; h < heads; h++ {
				at := b*heads*2*hd + h*2*hd + hd
				gates = append(gates, g[at:at+hd]...)
			}
		}
		want, bounds := ref.SigmoidGate(d, o, gates)
		if err := dev.SigmoidGate(cgo.SigmoidGateParams{O: ob.Ptr, Gate: gb.Ptr + uint64(hd*d.Bytes()), Out: ob.Ptr,
			Batch: batch, Heads: heads, HeadDim: hd, GateRowStride: heads * 2 * hd, GateHeadStride: 2 * hd,
			DType: cgo.DType(d)}); err != nil {
			t.Fatal(err)
		}
		soCheck(t, fmt.Sprintf("sigmoid gate in place %v", d), soReadFloats(t, ob, d, len(want)), want, bounds)

		xb, x := soFilled(t, dev, d, 3*136, 83)
		out := soPoisoned(t, dev, 3*136*d.Bytes())
		if err := dev.ReLU2(xb.Ptr, out.Ptr, 3, 136, cgo.DType(d)); err != nil {
			t.Fatal(err)
		}
		want, bounds = ref.ReLU2(d, x)
		soCheck(t, fmt.Sprintf("relu2 %v", d), soReadFloats(t, out, d, len(want)), want, bounds)
	}
}

type mamba2Case struct {
	batch, heads, groups, headDim, state int
	strided                              bool    // x, B, C in the conv's output row
	dtMin, dtMax                         float64 // time_step_limit
}

func TestSmallOpMamba2Step(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	inf := math.Inf(1)
	for i, s := range []mamba2Case{
		{2, 4, 2, 24, 40, true, 0, inf},
		{1, 2, 1, 8, 256, false, 0.1, 0.5}, // the widest state (8 float4s a lane), dt clamped
		{3, 8, 8, 64, 128, true, 0, inf},   // Nemotron-3-Nano's head and state dims
		{2, 3, 3, 40, 8, false, 0, 1},
	} {
		for _, d := range soDTypes {
			if i == 2 && d == ref.FP16 {
				continue
			}
			t.Run(fmt.Sprintf("b%d h%d g%d hd%d ds%d %v", s.batch, s.heads, s.groups, s.headDim, s.state, d), func(t *testing.T) {
				mamba2Run(t, dev, d, s, 4)
			})
		}
	}
}

func mamba2Run(t *testing.T, dev *cgo.Device, d ref.DType, s mamba2Case, steps int) {
	t.Helper()
	xW, bcW := s.heads*s.headDim, s.groups*s.state
	stride := 0
	if s.strided {
		stride = xW + 2*bcW + 16
	}
	sh := ref.Mamba2Shape{Heads: s.heads, Groups: s.groups, HeadDim: s.headDim, StateSize: s.state, DtMin: s.dtMin, DtMax: s.dtMax}
	stateBuf, stateInit := rcF32(t, dev, s.batch*s.heads*s.headDim*s.state, 91, 0.5)
	st := ref.NewGDNState(stateInit)
	aLogBuf, aLog := rcF32(t, dev, s.heads, 92, 1)
	dBuf, dv := rcF32(t, dev, s.heads, 93, 1)
	dtbBuf, dtb := rcF32(t, dev, s.heads, 94, 1)
	el := uint64(d.Bytes())
	for step := 0; step < steps; step++ {
		seed := uint64(100 + 10*step)
		p := cgo.Mamba2StepParams{ALog: aLogBuf.Ptr, D: dBuf.Ptr, DtBias: dtbBuf.Ptr, State: stateBuf.Ptr, Batch: s.batch,
			Heads: s.heads, Groups: s.groups, HeadDim: s.headDim, StateSize: s.state, XRowStride: stride,
			DtMin: float32(s.dtMin), DtMax: float32(s.dtMax), DType: cgo.DType(d)}
		in := ref.Mamba2Inputs{ALog: aLog, D: dv, DtBias: dtb}
		if s.strided {
			buf, v := soFilled(t, dev, d, s.batch*stride, seed)
			p.X, p.B, p.C = buf.Ptr, buf.Ptr+uint64(xW)*el, buf.Ptr+uint64(xW+bcW)*el
			in.X, in.B, in.C = rcRows(v, s.batch, stride, 0, xW), rcRows(v, s.batch, stride, xW, bcW), rcRows(v, s.batch, stride, xW+bcW, bcW)
		} else {
			xb, xv := soFilled(t, dev, d, s.batch*xW, seed)
			bb, bv := soFilled(t, dev, d, s.batch*bcW, seed+1)
			cb, cv := soFilled(t, dev, d, s.batch*bcW, seed+2)
			p.X, p.B, p.C = xb.Ptr, bb.Ptr, cb.Ptr
			in.X, in.B, in.C = xv, bv, cv
		}
		dtBuf, dtv := soFilled(t, dev, d, s.batch*s.heads, seed+3)
		p.Dt, in.Dt = dtBuf.Ptr, dtv
		y := soPoisoned(t, dev, s.batch*xW*d.Bytes())
		p.Y = y.Ptr
		if err := dev.Mamba2Step(p); err != nil {
			t.Fatal(err)
		}
		want, bounds := ref.Mamba2Step(d, sh, st, in)
		soCheck(t, fmt.Sprintf("step %d y", step), soReadFloats(t, y, d, len(want)), want, bounds)
	}
	rcCheckState(t, fmt.Sprintf("state after %d steps", steps), stateBuf, st)
}

func TestSmallOpRecurrentBadInput(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 1<<16)
	p := buf.Ptr
	bf := cgo.DTypeBF16
	gdn := cgo.GDNStepParams{Q: p, K: p, V: p, A: p, BGate: p, ALog: p, DtBias: p, State: p, Out: p, Batch: 1, KHeads: 2,
		VHeads: 4, HeadK: 128, HeadV: 128, DType: bf}
	gdnBad := func(f func(*cgo.GDNStepParams)) error { q := gdn; f(&q); return dev.GDNStep(q) }
	m2 := cgo.Mamba2StepParams{X: p, B: p, C: p, Dt: p, ALog: p, D: p, DtBias: p, State: p, Y: p, Batch: 1, Heads: 8,
		Groups: 2, HeadDim: 64, StateSize: 128, DtMax: float32(math.Inf(1)), DType: bf}
	m2Bad := func(f func(*cgo.Mamba2StepParams)) error { q := m2; f(&q); return dev.Mamba2Step(q) }
	for _, tc := range []struct {
		name, want string
		err        error
	}{
		{"v heads not a multiple", "v_heads 5", gdnBad(func(q *cgo.GDNStepParams) { q.VHeads = 5 })},
		{"head_k_dim too large", "head_k_dim 264", gdnBad(func(q *cgo.GDNStepParams) { q.HeadK = 264 })},
		{"head_v_dim odd", "head_v_dim 12", gdnBad(func(q *cgo.GDNStepParams) { q.HeadV = 12 })},
		{"qkv stride short", "qkv_row_stride 256", gdnBad(func(q *cgo.GDNStepParams) { q.QKVRowStride = 256 })},
		{"gdn f32", "dtype 0", gdnBad(func(q *cgo.GDNStepParams) { q.DType = cgo.DTypeF32 })},
		{"state misaligned", "state", gdnBad(func(q *cgo.GDNStepParams) { q.State = p + 4 })},
		{"conv kernel 9", "kernel 9", dev.Conv1DUpdate(cgo.Conv1DUpdateParams{X: p, State: p, Weight: p, Out: p, Batch: 1,
			Channels: 64, Kernel: 9, DType: bf})},
		{"conv activation", "activation 3", dev.Conv1DUpdate(cgo.Conv1DUpdateParams{X: p, State: p, Weight: p, Out: p, Batch: 1,
			Channels: 64, Kernel: 4, Activation: 3, DType: bf})},
		{"conv channels", "channels 60", dev.Conv1DUpdate(cgo.Conv1DUpdateParams{X: p, State: p, Weight: p, Out: p, Batch: 1,
			Channels: 60, Kernel: 4, DType: bf})},
		{"norm group", "group_size 20", dev.GatedRMSNorm(cgo.GatedRMSNormParams{X: p, Z: p, Weight: p, Out: p, Batch: 1,
			Groups: 2, GroupSize: 20, Eps: 1e-6, DType: bf})},
		{"norm eps", "eps 0", dev.GatedRMSNorm(cgo.GatedRMSNormParams{X: p, Z: p, Weight: p, Out: p, Batch: 1,
			Groups: 2, GroupSize: 16, DType: bf})},
		{"gate head stride", "gate_head_stride 4", dev.SigmoidGate(cgo.SigmoidGateParams{O: p, Gate: p, Out: p, Batch: 1,
			Heads: 2, HeadDim: 8, GateRowStride: 64, GateHeadStride: 4, DType: bf})},
		{"relu2 n", "n 7", dev.ReLU2(p, p, 1, 7, bf)},
		{"mamba groups", "n_groups 3", m2Bad(func(q *cgo.Mamba2StepParams) { q.Groups = 3 })},
		{"mamba state", "state_size 264", m2Bad(func(q *cgo.Mamba2StepParams) { q.StateSize = 264 })},
		{"mamba dt limit", "time_step_limit", m2Bad(func(q *cgo.Mamba2StepParams) { q.DtMin, q.DtMax = 0.5, 0.1 })},
		{"mamba dt nan", "time_step_limit", m2Bad(func(q *cgo.Mamba2StepParams) { q.DtMin = float32(math.NaN()) })},
	} {
		if tc.err == nil || !(errors.Is(tc.err, cgo.ErrUnsupportedShape) || errors.Is(tc.err, cgo.ErrInvalidArgument)) ||
			!strings.Contains(fmt.Sprint(tc.err), tc.want) {
			t.Errorf("%s: got %v, want an argument or shape error naming %q", tc.name, tc.err, tc.want)
		}
	}
}

// The launches at the real shapes, for kernels/README.md: run with DB_EMU_SM_COUNT=132 to see
// an H200's grids (`go test ./cgo -run TestSmallOpRecurrentLaunches -v`).
func TestSmallOpRecurrentLaunches(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 1<<16)
	p := buf.Ptr
	for _, s := range []struct {
		name           string
		kHeads, vHeads int
	}{{"Qwen3-Next-80B", 16, 32}, {"Qwen3.5-27B", 16, 48}, {"Qwen3.5-397B", 16, 64}} {
		for _, batch := range []int{1, 16, 64, 256} {
			ls, err := dev.GDNStepLaunches(cgo.GDNStepParams{Q: p, K: p, V: p, A: p, BGate: p, ALog: p, DtBias: p, State: p,
				Out: p, Batch: batch, KHeads: s.kHeads, VHeads: s.vHeads, HeadK: 128, HeadV: 128, DType: cgo.DTypeBF16})
			if err != nil || len(ls) != 1 || ls[0].Units() != int64(batch*s.vHeads*8) {
				t.Fatalf("%s batch %d: %v %+v", s.name, batch, err, ls)
			}
			t.Logf("%s batch %d: %s grid %d, %d units", s.name, batch, ls[0].Kernel, ls[0].GridX, ls[0].Units())
		}
	}
	for _, s := range []struct {
		name                  string
		heads, groups, dstate int
	}{{"Nemotron-3-Nano-30B", 64, 8, 128}, {"Nemotron-H-56B", 256, 8, 256}} {
		for _, batch := range []int{1, 16, 64, 256} {
			ls, err := dev.Mamba2StepLaunches(cgo.Mamba2StepParams{X: p, B: p, C: p, Dt: p, ALog: p, D: p, DtBias: p, State: p,
				Y: p, Batch: batch, Heads: s.heads, Groups: s.groups, HeadDim: 64, StateSize: s.dstate,
				DtMax: float32(math.Inf(1)), DType: cgo.DTypeBF16})
			if err != nil || len(ls) != 1 || ls[0].Units() != int64(batch*s.heads*4) {
				t.Fatalf("%s batch %d: %v %+v", s.name, batch, err, ls)
			}
			t.Logf("%s batch %d: %s grid %d, %d units", s.name, batch, ls[0].Kernel, ls[0].GridX, ls[0].Units())
		}
	}
}
