package ref

import (
	"math"
	"testing"
)

// Known answers worked by hand from Hugging Face's recurrences (torch_recurrent_gated_delta_rule,
// the Mamba-2 torch_forward decode step, the conv's roll-and-sum), so the kernels' tests compare
// against the models' semantics and not only against a second reading of decodebench.h.

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.9g, want %.9g", what, got, want)
	}
}

func TestConv1DUpdateKnownAnswer(t *testing.T) {
	// window [1, 2, 3] (oldest first), taps [1, 10, 100]: 1 + 20 + 300; the state keeps [2, 3]
	want, _, st := Conv1DUpdate(F32, []float32{3}, []float32{1, 2}, []float32{1, 10, 100}, nil, 1, 3, false)
	near(t, "y", want[0], 321)
	if st[0] != 2 || st[1] != 3 {
		t.Errorf("state %v, want [2 3]", st)
	}
	want, _, _ = Conv1DUpdate(F32, []float32{3}, []float32{1, 2}, []float32{1, 10, 100}, []float32{-321.5}, 1, 3, true)
	near(t, "silu(y + bias)", want[0], -0.5/(1+math.Exp(0.5)))
}

func TestGDNStepKnownAnswer(t *testing.T) {
	// one head, dk 2, dv 1: q = [1, 0], k = [0, 1] (unit already); A_log 0, a 0, dt_bias 0:
	// g = -softplus(0) = -ln 2, decay 1/2; b 0: beta 1/2. S = [2, 4] -> [1, 2]; S^T k = 2;
	// delta = 1/2 (6 - 2) = 2; S = [1, 2 + 2] = [1, 4]; o = S^T q / sqrt(2).
	st := NewGDNState([]float32{2, 4})
	want, _ := GDNStep(F32, GDNShape{KHeads: 1, VHeads: 1, HeadK: 2, HeadV: 1}, st, GDNInputs{
		Q: []float32{1, 0}, K: []float32{0, 1}, V: []float32{6}, A: []float32{0}, B: []float32{0},
		ALog: []float32{0}, DtBias: []float32{0}})
	near(t, "o", want[0], float64(float32(1/math.Sqrt(2))))
	near(t, "S[0]", st.S[0], 1)
	near(t, "S[1]", st.S[1], 4)
	// two value heads on one key head: both read k head 0 (repeat_interleave)
	st = NewGDNState([]float32{2, 4, 2, 4})
	want, _ = GDNStep(F32, GDNShape{KHeads: 1, VHeads: 2, HeadK: 2, HeadV: 1}, st, GDNInputs{
		Q: []float32{1, 0}, K: []float32{0, 1}, V: []float32{6, 2}, A: []float32{0, 0}, B: []float32{0, 0},
		ALog: []float32{0, 0}, DtBias: []float32{0, 0}})
	near(t, "head 1 S[1]", st.S[3], 2) // delta = 1/2 (2 - 2) = 0
	near(t, "head 1 o", want[1], float64(float32(1/math.Sqrt(2))))
}

func TestMamba2StepKnownAnswer(t *testing.T) {
	// dt = softplus(0) = ln 2, A = -exp(0) = -1: dA = 1/2; state 2 -> 1 + ln 2 * 3 * 1;
	// y = 5 state + D x = 5 (1 + 3 ln 2) + 2
	st := NewGDNState([]float32{2})
	sh := Mamba2Shape{Heads: 1, Groups: 1, HeadDim: 1, StateSize: 1, DtMax: math.Inf(1)}
	in := Mamba2Inputs{X: []float32{1}, B: []float32{3}, C: []float32{5}, Dt: []float32{0},
		ALog: []float32{0}, D: []float32{2}, DtBias: []float32{0}}
	want, _ := Mamba2Step(F32, sh, st, in)
	near(t, "y", want[0], 5*(1+3*math.Ln2)+2)
	// time_step_limit (0, 0.25) clamps dt: dA = exp(-1/4)
	st = NewGDNState([]float32{2})
	sh.DtMax = 0.25
	want, _ = Mamba2Step(F32, sh, st, in)
	near(t, "clamped y", want[0], 5*(2*math.Exp(-0.25)+0.75)+2)
}

func TestGatedRMSNormOrder(t *testing.T) {
	// x = [3, 4], z = [big, big] (silu(z) = z): norm first: x / rms(x) * z; gate first: the
	// gated values normalised, z cancels
	x, z, w := []float32{3, 4}, []float32{30, 30}, []float32{1, 1}
	rms := math.Sqrt(12.5)
	after, _ := GatedRMSNorm(F32, x, z, w, 1, 2, true, true, 0)
	near(t, "norm then gate", after[0], 3/rms*silu(30))
	before, _ := GatedRMSNorm(F32, x, z, w, 1, 2, false, false, 0)
	near(t, "gate then norm", before[0], 3/rms)
}
