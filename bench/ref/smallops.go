package ref

import (
	"fmt"
	"math"
	"sort"
)

// The small ops of a decode step (db_embedding, db_rmsnorm, db_rope_kv_append, db_gated_act,
// db_bias_add, db_argmax, db_moe_*) in float64. Each gives what the kernel should write and,
// for float outputs, each element's bound: one rounding of the result to the dtype (u·|want|)
// plus the fp32 arithmetic the kernel does on the way (a few 2^-24 of the magnitudes it adds),
// plus half the spacing of the dtype's subnormals. Inputs are the exact values in the device
// buffers (widened to float32), so nothing else separates a right kernel from the reference.

// fp32 is the unit roundoff of float32.
const fp32 = 0x1p-24

func elementBound(d DType, want, fp32Terms float64) float64 {
	return d.UnitRoundoff()*(math.Abs(want)+fp32Terms) + fp32Terms + halfSubnormalSpacing(d)
}

// Embedding gives out[b] = table[ids[b]]·scale (rows of hidden elements; scale 0 or 1 is an
// exact copy, bound 0); an id outside the table gives a row of NaN, as db_embedding writes it.
func Embedding(d DType, table []float32, ids []int32, hidden int, scale float64) (want, bounds []float64) {
	vocab := len(table) / hidden
	if scale == 0 {
		scale = 1
	}
	want, bounds = make([]float64, len(ids)*hidden), make([]float64, len(ids)*hidden)
	for b, id := range ids {
		for i := 0; i < hidden; i++ {
			j := b*hidden + i
			if id < 0 || int(id) >= vocab {
				want[j] = math.NaN()
				continue
			}
			want[j] = float64(table[int(id)*hidden+i]) * scale
			if scale != 1 {
				bounds[j] = elementBound(d, want[j], fp32*math.Abs(want[j]))
			}
		}
	}
	return want, bounds
}

// RMSNormReference is what db_rmsnorm writes for each row.
type RMSNormReference struct {
	Want, Bounds []float64
	// Sum is round(x + residual) in d, bit for bit what the kernel stores into the residual
	// (nil without a residual).
	Sum []float32
}

// RMSNorm normalises rows of hidden elements: s = round_d(x + residual) when residual is not
// nil (the sum taken in float32, as the kernel takes it), else s = x; out = s / sqrt(mean(s²) +
// eps) · w', w' = weight or 1 + weight (unitOffset).
func RMSNorm(d DType, x, residual, weight []float32, hidden int, eps float64, unitOffset bool) RMSNormReference {
	r := RMSNormReference{Want: make([]float64, len(x)), Bounds: make([]float64, len(x))}
	s := x
	if residual != nil {
		r.Sum = make([]float32, len(x))
		for i := range x {
			r.Sum[i] = Round(d, x[i]+residual[i])
		}
		s = r.Sum
	}
	offset := 0.0
	if unitOffset {
		offset = 1
	}
	// fp32 sum of squares over hidden terms (relative error below hidden·2^-24), halved by the
	// square root, rsqrtf's 2 ulp and the two products
	slack := (float64(hidden)/2 + 8) * fp32
	for row := 0; row < len(x)/hidden; row++ {
		var sumsq float64
		for i := 0; i < hidden; i++ {
			v := float64(s[row*hidden+i])
			sumsq += v * v
		}
		inv := 1 / math.Sqrt(sumsq/float64(hidden)+eps)
		for i := 0; i < hidden; i++ {
			j := row*hidden + i
			r.Want[j] = float64(s[j]) * inv * (float64(weight[i]) + offset)
			r.Bounds[j] = elementBound(d, r.Want[j], slack*math.Abs(r.Want[j]))
		}
	}
	return r
}

// RopeScaling is a DB_ROPE_* frequency scaling (same values).
type RopeScaling int32

const (
	RopeDefault    RopeScaling = 0
	RopeLinear     RopeScaling = 1
	RopeDynamicNTK RopeScaling = 2
	RopeLlama3     RopeScaling = 3
)

// Rope is db_rope: the rotary frequencies as a Hugging Face config states them.
type Rope struct {
	Theta                         float64
	Scaling                       RopeScaling
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositions          int
	RotaryDim                     int
}

// InvFreq is pair i's inverse frequency for a sequence of seqLen tokens, as Hugging Face's
// rope_init functions give it: theta^(-2i/d) (d = RotaryDim), divided by Factor for linear
// scaling, with theta grown by dynamic NTK once seqLen passes OriginalMaxPositions, or
// Llama 3's by-wavelength mix.
func (r Rope) InvFreq(i, seqLen int) float64 {
	d := float64(r.RotaryDim)
	theta := r.Theta
	orig := float64(r.OriginalMaxPositions)
	if r.Scaling == RopeDynamicNTK && float64(seqLen) > orig {
		theta *= math.Pow(r.Factor*float64(seqLen)/orig-(r.Factor-1), d/(d-2))
	}
	inv := math.Pow(theta, -2*float64(i)/d)
	switch r.Scaling {
	case RopeLinear:
		return inv / r.Factor
	case RopeLlama3:
		wavelen := 2 * math.Pi / inv
		lowWavelen, highWavelen := orig/r.LowFreqFactor, orig/r.HighFreqFactor
		switch {
		case wavelen < highWavelen:
			return inv
		case wavelen > lowWavelen:
			return inv / r.Factor
		}
		smooth := (orig/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
		return (1-smooth)*inv/r.Factor + smooth*inv
	}
	return inv
}

// Validate says what db_rope_kv_append would refuse in r for heads of headDim.
func (r Rope) Validate(headDim int) error {
	if r.RotaryDim < 2 || r.RotaryDim > headDim || r.RotaryDim%2 != 0 {
		return fmt.Errorf("rotary_dim %d unsupported (want an even number from 2 to head_dim %d)", r.RotaryDim, headDim)
	}
	return nil
}

// RopeHead rotates one head (headDim elements) at position pos in the neox layout: element
// i < r/2 pairs with i + r/2 and turns by pos·InvFreq(i, pos+1); elements from r on pass
// through (bound 0: the kernel copies them).
func RopeHead(r Rope, d DType, head []float32, pos int) (want, bounds []float64) {
	want, bounds = make([]float64, len(head)), make([]float64, len(head))
	half := r.RotaryDim / 2
	for i := range head {
		want[i] = float64(head[i])
	}
	for i := 0; i < half; i++ {
		s, c := math.Sincos(float64(pos) * r.InvFreq(i, pos+1))
		x1, x2 := float64(head[i]), float64(head[i+half])
		want[i], want[i+half] = x1*c-x2*s, x2*c+x1*s
		// cos and sin rounded to fp32, two products and a sum in fp32
		terms := 4 * fp32 * (math.Abs(x1) + math.Abs(x2))
		bounds[i], bounds[i+half] = elementBound(d, want[i], terms), elementBound(d, want[i+half], terms)
	}
	return want, bounds
}

// Activation is a DB_ACT_* gated activation (same values).
type Activation int32

const (
	ActSiLU     Activation = 0
	ActGeLUTanh Activation = 1
)

// GatedAct gives out[b, i] = act(gate[b, i])·up[b, i] for rows of gateUp = [gate (ffn), up (ffn)].
func GatedAct(d DType, act Activation, gateUp []float32, ffn int) (want, bounds []float64) {
	rows := len(gateUp) / (2 * ffn)
	want, bounds = make([]float64, rows*ffn), make([]float64, rows*ffn)
	for b := 0; b < rows; b++ {
		for i := 0; i < ffn; i++ {
			g, u := float64(gateUp[b*2*ffn+i]), float64(gateUp[b*2*ffn+ffn+i])
			var a float64
			if act == ActGeLUTanh {
				a = 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g)))
			} else {
				a = g / (1 + math.Exp(-g))
			}
			j := b*ffn + i
			want[j] = a * u
			// expf / tanhf within a few ulp, of terms as large as |g·u|
			bounds[j] = elementBound(d, want[j], 16*fp32*(math.Abs(want[j])+math.Abs(g*u)))
		}
	}
	return want, bounds
}

// BiasAdd gives y[b, i] + bias[i] for rows of n elements.
func BiasAdd(d DType, y, bias []float32, n int) (want, bounds []float64) {
	want, bounds = make([]float64, len(y)), make([]float64, len(y))
	for j := range y {
		want[j] = float64(y[j]) + float64(bias[j%n])
		bounds[j] = elementBound(d, want[j], fp32*math.Abs(want[j]))
	}
	return want, bounds
}

// Argmax gives each row's index of the largest value, the lowest on a tie (a NaN above all).
func Argmax(logits []float32, vocab int) []int32 {
	rows := len(logits) / vocab
	out := make([]int32, rows)
	for b := 0; b < rows; b++ {
		best := 0
		for i := 1; i < vocab; i++ {
			v, w := logits[b*vocab+i], logits[b*vocab+best]
			if !math.IsNaN(float64(w)) && (math.IsNaN(float64(v)) || v > w) {
				best = i
			}
		}
		out[b] = int32(best)
	}
	return out
}

// MoERouting is a DB_MOE_* order of softmax and top-k (same values).
type MoERouting int32

const (
	MoESoftmaxTopK MoERouting = 0
	MoETopKSoftmax MoERouting = 1
)

// MoERoute gives each token's top k experts (best first, ties to the lower expert) and their
// weights: with SoftmaxTopK the softmax over all experts (divided by the k's sum when
// renormalize), with TopKSoftmax the softmax over the k chosen logits.
func MoERoute(logits []float32, experts, topK int, mode MoERouting, renormalize bool) (ids []int32, weights, bounds []float64) {
	tokens := len(logits) / experts
	ids, weights, bounds = make([]int32, tokens*topK), make([]float64, tokens*topK), make([]float64, tokens*topK)
	order := make([]int, experts)
	for t := 0; t < tokens; t++ {
		row := logits[t*experts : (t+1)*experts]
		for e := range order {
			order[e] = e
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		maxLogit := float64(row[order[0]])
		var all, top float64
		for _, v := range row {
			all += math.Exp(float64(v) - maxLogit)
		}
		for j := 0; j < topK; j++ {
			top += math.Exp(float64(row[order[j]]) - maxLogit)
		}
		denom := all
		if mode == MoETopKSoftmax || renormalize {
			denom = top
		}
		for j := 0; j < topK; j++ {
			w := math.Exp(float64(row[order[j]])-maxLogit) / denom
			ids[t*topK+j], weights[t*topK+j] = int32(order[j]), w
			// expf's ulps and an fp32 sum of up to experts terms
			bounds[t*topK+j] = float64(8*(experts+topK))*fp32*w + 0x1p-40
		}
	}
	return ids, weights, bounds
}

// MoEGrouping is what db_moe_group writes.
type MoEGrouping struct {
	Counts, Offsets       []int32 // [experts], [experts + 1]
	SortedSlots, SlotRows []int32 // row -> slot (ascending within an expert, -1 past the last), slot -> row
}

// MoEGroup groups the slots s (entries of ids) by expert, stably.
func MoEGroup(ids []int32, experts int) MoEGrouping {
	g := MoEGrouping{Counts: make([]int32, experts), Offsets: make([]int32, experts+1),
		SortedSlots: make([]int32, len(ids)), SlotRows: make([]int32, len(ids))}
	for _, e := range ids {
		if e >= 0 && int(e) < experts {
			g.Counts[e]++
		}
	}
	for e := 0; e < experts; e++ {
		g.Offsets[e+1] = g.Offsets[e] + g.Counts[e]
	}
	next := append([]int32(nil), g.Offsets[:experts]...)
	for i := range g.SortedSlots {
		g.SortedSlots[i] = -1
	}
	for s, e := range ids {
		if e < 0 || int(e) >= experts {
			g.SlotRows[s] = -1
			continue
		}
		g.SlotRows[s], g.SortedSlots[next[e]] = next[e], int32(s)
		next[e]++
	}
	return g
}

// MoECombine gives out[t] = sum_j weights[t·topK+j]·ySorted[slotRows[t·topK+j]] (rows of hidden).
func MoECombine(d DType, ySorted []float32, slotRows []int32, weights []float32, topK, hidden int) (want, bounds []float64) {
	tokens := len(slotRows) / topK
	want, bounds = make([]float64, tokens*hidden), make([]float64, tokens*hidden)
	for t := 0; t < tokens; t++ {
		for i := 0; i < hidden; i++ {
			var sum, abs float64
			for j := 0; j < topK; j++ {
				r := slotRows[t*topK+j]
				if r < 0 {
					continue
				}
				p := float64(weights[t*topK+j]) * float64(ySorted[int(r)*hidden+i])
				sum += p
				abs += math.Abs(p)
			}
			want[t*hidden+i] = sum
			bounds[t*hidden+i] = elementBound(d, sum, 2*float64(topK)*fp32*abs)
		}
	}
	return want, bounds
}
