package ref

import "math"

// The recurrent layers' decode ops (decodebench.h's recurrent section: db_conv1d_update,
// db_gdn_step, db_gated_rmsnorm, db_sigmoid_gate, db_relu2, db_mamba2_step) in float64. Inputs
// are the exact values in the device buffers (widened to float32). The 16-bit outputs get
// elementBound's bound: one rounding to the dtype plus the fp32 arithmetic on the way. The
// recurrent states (fp32 on the device) are carried here in float64 beside an error bound that
// is carried too: each step the kernel's fp32 state may drift from the exact one by the
// previous bound, decayed and propagated through the step, plus recurrentRel of the
// magnitudes the step adds (a few ulps of fp32 for each product and sum, the exp, softplus and
// rsqrt in fp32).

func recurrentRel(terms int) float64 { return float64(4*terms+64) * fp32 }

func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// Conv1DUpdate is db_conv1d_update for a batch: x [batch, channels], state [batch, K-1,
// channels] (oldest first), weight [K, channels], bias [channels] or nil. It gives out's
// reference and the new state (the inputs shifted, exact: the kernel copies 16-bit values).
func Conv1DUpdate(d DType, x, state, weight, bias []float32, channels, kernel int, silu bool) (want, bounds []float64, newState []float32) {
	batch := len(x) / channels
	want, bounds = make([]float64, len(x)), make([]float64, len(x))
	newState = make([]float32, len(state))
	for b := 0; b < batch; b++ {
		st := state[b*(kernel-1)*channels : (b+1)*(kernel-1)*channels]
		ns := newState[b*(kernel-1)*channels : (b+1)*(kernel-1)*channels]
		for c := 0; c < channels; c++ {
			in := func(j int) float64 { // input j of the window, oldest first
				if j == kernel-1 {
					return float64(x[b*channels+c])
				}
				return float64(st[j*channels+c])
			}
			acc, mag := 0.0, 0.0
			if bias != nil {
				acc, mag = float64(bias[c]), math.Abs(float64(bias[c]))
			}
			for j := 0; j < kernel; j++ {
				p := float64(weight[j*channels+c]) * in(j)
				acc += p
				mag += math.Abs(p)
			}
			y, slope := acc, 1.0
			if silu {
				y, slope = siluAt(acc)
			}
			i := b*channels + c
			want[i] = y
			bounds[i] = elementBound(d, y, float64(kernel+2)*fp32*mag*slope+8*fp32*math.Abs(y))
			for j := 0; j < kernel-1; j++ {
				if j+1 == kernel-1 {
					ns[j*channels+c] = x[b*channels+c]
				} else {
					ns[j*channels+c] = st[(j+1)*channels+c]
				}
			}
		}
	}
	return want, bounds, newState
}

// siluAt gives silu(x) and a bound on its slope near x (|silu'| <= 1.1).
func siluAt(x float64) (float64, float64) { return silu(x), 1.1 }

// GDNShape is a Gated DeltaNet layer's recurrent shape.
type GDNShape struct {
	KHeads, VHeads, HeadK, HeadV int
	Scale                        float64 // 0 = 1/sqrt(HeadK)
}

// GDNState is the float64 state of every (sequence, value head), [batch, VHeads, HeadK, HeadV],
// with each element's bound on the kernel's drift from it.
type GDNState struct {
	S, Err []float64
}

// NewGDNState gives the state of batch sequences from the fp32 values the device holds.
func NewGDNState(init []float32) *GDNState {
	s := &GDNState{S: make([]float64, len(init)), Err: make([]float64, len(init))}
	for i, v := range init {
		s.S[i] = float64(v)
	}
	return s
}

// GDNInputs is one token's inputs of a batch, packed: q and k [batch, KHeads, HeadK], v [batch,
// VHeads, HeadV], a and b [batch, VHeads]; ALog and DtBias [VHeads].
type GDNInputs struct {
	Q, K, V, A, B, ALog, DtBias []float32
}

func l2normalise(x []float32, mul float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := mul / math.Sqrt(ss+float64(float32(1e-6)))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) * inv
	}
	return out
}

// GDNStep advances st by one token (the gated delta rule, as db_gdn_step states it) and gives
// out's reference [batch, VHeads, HeadV] with its bounds.
func GDNStep(d DType, sh GDNShape, st *GDNState, in GDNInputs) (want, bounds []float64) {
	dk, dv := sh.HeadK, sh.HeadV
	scale := sh.Scale
	if scale == 0 {
		scale = float64(float32(1 / math.Sqrt(float64(dk))))
	}
	batch := len(in.A) / sh.VHeads
	group := sh.VHeads / sh.KHeads
	rel := recurrentRel(dk)
	want, bounds = make([]float64, batch*sh.VHeads*dv), make([]float64, batch*sh.VHeads*dv)
	for b := 0; b < batch; b++ {
		for h := 0; h < sh.VHeads; h++ {
			hk := h / group
			qk := (b*sh.KHeads + hk) * dk
			q := l2normalise(in.Q[qk:qk+dk], scale)
			k := l2normalise(in.K[qk:qk+dk], 1)
			av, bv := float64(in.A[b*sh.VHeads+h]), float64(in.B[b*sh.VHeads+h])
			g := -math.Exp(float64(in.ALog[h])) * softplus(av+float64(in.DtBias[h]))
			decay, beta := math.Exp(g), sigmoid(bv)
			decayRel := rel * (1 + math.Abs(g)) // fp32 exp, softplus and products
			base := (b*sh.VHeads + h) * dk * dv
			S, E := st.S[base:base+dk*dv], st.Err[base:base+dk*dv]
			for j := 0; j < dv; j++ {
				kv, kvMag, kvErr := 0.0, 0.0, 0.0
				for i := 0; i < dk; i++ {
					s := S[i*dv+j] * decay
					E[i*dv+j] = E[i*dv+j]*decay + decayRel*math.Abs(s)
					S[i*dv+j] = s
					kv += s * k[i]
					kvMag += math.Abs(s * k[i])
					kvErr += E[i*dv+j] * math.Abs(k[i])
				}
				vj := float64(in.V[(b*sh.VHeads+h)*dv+j])
				delta := beta * (vj - kv)
				deltaErr := beta*(kvErr+rel*kvMag) + rel*(math.Abs(delta)+beta*math.Abs(vj))
				o, oMag, oErr := 0.0, 0.0, 0.0
				for i := 0; i < dk; i++ {
					upd := k[i] * delta
					s := S[i*dv+j] + upd
					E[i*dv+j] += math.Abs(k[i])*deltaErr + rel*(math.Abs(upd)+math.Abs(s))
					S[i*dv+j] = s
					o += s * q[i]
					oMag += math.Abs(s * q[i])
					oErr += E[i*dv+j] * math.Abs(q[i])
				}
				oi := (b*sh.VHeads+h)*dv + j
				want[oi] = o
				bounds[oi] = elementBound(d, o, oErr+rel*oMag)
			}
		}
	}
	return want, bounds
}

// GatedRMSNorm is db_gated_rmsnorm: rows of groups x groupSize elements; z [batch, width]
// packed; weight [groupSize] when shared, else [width].
func GatedRMSNorm(d DType, x, z, weight []float32, groups, groupSize int, shared, normBeforeGate bool, eps float64) (want, bounds []float64) {
	want, bounds = make([]float64, len(x)), make([]float64, len(x))
	slack := (float64(groupSize)/2 + 16) * fp32
	for g0 := 0; g0 < len(x)/groupSize; g0++ {
		base := g0 * groupSize
		wbase := 0
		if !shared {
			wbase = (g0 % groups) * groupSize
		}
		s := make([]float64, groupSize)
		gate := make([]float64, groupSize)
		sumsq := 0.0
		for i := range s {
			s[i], gate[i] = float64(x[base+i]), silu(float64(z[base+i]))
			if !normBeforeGate {
				s[i] *= gate[i]
			}
			sumsq += s[i] * s[i]
		}
		inv := 1 / math.Sqrt(sumsq/float64(groupSize)+eps)
		for i := range s {
			v := s[i] * inv * float64(weight[wbase+i])
			if normBeforeGate {
				v *= gate[i]
			}
			want[base+i] = v
			bounds[base+i] = elementBound(d, v, slack*math.Abs(v))
		}
	}
	return want, bounds
}

// SigmoidGate is db_sigmoid_gate on packed o and gate of one shape: o · sigmoid(gate).
func SigmoidGate(d DType, o, gate []float32) (want, bounds []float64) {
	want, bounds = make([]float64, len(o)), make([]float64, len(o))
	for i := range o {
		want[i] = float64(o[i]) * sigmoid(float64(gate[i]))
		bounds[i] = elementBound(d, want[i], 8*fp32*math.Abs(want[i]))
	}
	return want, bounds
}

// ReLU2 is db_relu2: max(x, 0)², NaN kept.
func ReLU2(d DType, x []float32) (want, bounds []float64) {
	want, bounds = make([]float64, len(x)), make([]float64, len(x))
	for i, v := range x {
		r := float64(v)
		if r < 0 {
			r = 0
		}
		want[i] = r * r
		bounds[i] = elementBound(d, want[i], fp32*want[i])
	}
	return want, bounds
}

// Mamba2Shape is a Mamba-2 mixer's recurrent shape.
type Mamba2Shape struct {
	Heads, Groups, HeadDim, StateSize int
	DtMin, DtMax                      float64 // time_step_limit
}

// Mamba2Inputs is one token's inputs, packed: x [batch, Heads, HeadDim], B and C [batch, Groups,
// StateSize], dt [batch, Heads]; ALog, D and DtBias [Heads].
type Mamba2Inputs struct {
	X, B, C, Dt, ALog, D, DtBias []float32
}

// Mamba2Step advances st ([batch, Heads, HeadDim, StateSize]) by one token (as db_mamba2_step
// states it) and gives y's reference [batch, Heads, HeadDim] with its bounds.
func Mamba2Step(d DType, sh Mamba2Shape, st *GDNState, in Mamba2Inputs) (want, bounds []float64) {
	ds, hd := sh.StateSize, sh.HeadDim
	batch := len(in.Dt) / sh.Heads
	group := sh.Heads / sh.Groups
	rel := recurrentRel(ds)
	want, bounds = make([]float64, batch*sh.Heads*hd), make([]float64, batch*sh.Heads*hd)
	for b := 0; b < batch; b++ {
		for h := 0; h < sh.Heads; h++ {
			dt := softplus(float64(in.Dt[b*sh.Heads+h]) + float64(in.DtBias[h]))
			dt = math.Max(sh.DtMin, math.Min(sh.DtMax, dt))
			a := -math.Exp(float64(in.ALog[h]))
			dA := math.Exp(dt * a)
			dARel := rel * (1 + math.Abs(dt*a))
			gb := (b*sh.Groups + h/group) * ds
			D := float64(in.D[h])
			for p := 0; p < hd; p++ {
				xp := float64(in.X[(b*sh.Heads+h)*hd+p])
				base := ((b*sh.Heads+h)*hd + p) * ds
				S, E := st.S[base:base+ds], st.Err[base:base+ds]
				y, yMag, yErr := 0.0, 0.0, 0.0
				for n := 0; n < ds; n++ {
					add := dt * float64(in.B[gb+n]) * xp
					s := S[n]*dA + add
					E[n] = E[n]*dA + dARel*math.Abs(S[n]*dA) + rel*(math.Abs(add)+math.Abs(s))
					S[n] = s
					c := float64(in.C[gb+n])
					y += s * c
					yMag += math.Abs(s * c)
					yErr += E[n] * math.Abs(c)
				}
				y += D * xp
				i := (b*sh.Heads+h)*hd + p
				want[i] = y
				bounds[i] = elementBound(d, y, yErr+rel*(yMag+math.Abs(D*xp)))
			}
		}
	}
	return want, bounds
}
