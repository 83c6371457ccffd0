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
	ActSiLU        Activation = 0
	ActGeLUTanh    Activation = 1
	ActSwiGLUClamp Activation = 2 // gpt-oss
)

// gpt-oss's clamped SwiGLU: the sigmoid's slope (fixed in its modeling code) and the clamp
// (config.json's swiglu_limit), as float32 as the kernel takes them.
var (
	SwiGLUAlpha = float64(float32(1.702))
	SwiGLULimit = 7.0
)

// GatedAct gives out[b, i] = act(gate[b, i])·up[b, i] for rows of gateUp = [gate (ffn), up (ffn)]
// (ActSwiGLUClamp with gpt-oss's limit and alpha).
func GatedAct(d DType, act Activation, gateUp []float32, ffn int) (want, bounds []float64) {
	return GatedActClamp(d, act, gateUp, ffn, SwiGLULimit, SwiGLUAlpha)
}

// GatedActClamp is GatedAct with ActSwiGLUClamp's limit and alpha given.
func GatedActClamp(d DType, act Activation, gateUp []float32, ffn int, limit, alpha float64) (want, bounds []float64) {
	rows := len(gateUp) / (2 * ffn)
	want, bounds = make([]float64, rows*ffn), make([]float64, rows*ffn)
	for b := 0; b < rows; b++ {
		for i := 0; i < ffn; i++ {
			g, u := float64(gateUp[b*2*ffn+i]), float64(gateUp[b*2*ffn+ffn+i])
			j := b*ffn + i
			want[j] = GatedValue(act, g, u, limit, alpha)
			scale := math.Abs(g * u)
			if act == ActSwiGLUClamp {
				gc, uc := swigluClamp(g, u, limit)
				scale = math.Abs((uc + 1) * gc)
			}
			// expf / tanhf within a few ulp, of terms as large as |g·u|
			bounds[j] = elementBound(d, want[j], 16*fp32*(math.Abs(want[j])+scale))
		}
	}
	return want, bounds
}

// swigluClamp clamps gpt-oss's gate to at most limit and up to [-limit, limit]; a NaN stays NaN.
func swigluClamp(g, u, limit float64) (float64, float64) {
	if g > limit {
		g = limit
	}
	if u > limit {
		u = limit
	} else if u < -limit {
		u = -limit
	}
	return g, u
}

// GatedValue is one element of a gated activation: act(g)·u, or gpt-oss's
// (clamp(u) + 1)·g'·sigmoid(alpha·g'), g' = min(g, limit).
func GatedValue(act Activation, g, u, limit, alpha float64) float64 {
	switch act {
	case ActGeLUTanh:
		return 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g))) * u
	case ActSwiGLUClamp:
		g, u = swigluClamp(g, u, limit)
		return (u + 1) * g / (1 + math.Exp(-alpha*g))
	}
	return g / (1 + math.Exp(-g)) * u
}

// GatedPartials are d out / d g and d out / d u of GatedValue (0 past a clamp).
func GatedPartials(act Activation, g, u, limit, alpha float64) (dg, du float64) {
	switch act {
	case ActGeLUTanh:
		c := math.Sqrt(2 / math.Pi)
		t := math.Tanh(c * (g + 0.044715*g*g*g))
		a := 0.5 * g * (1 + t)
		return (0.5*(1+t) + 0.5*g*(1-t*t)*c*(1+3*0.044715*g*g)) * u, a
	case ActSwiGLUClamp:
		gc, uc := swigluClamp(g, u, limit)
		sig := 1 / (1 + math.Exp(-alpha*gc))
		glu := gc * sig
		if g <= limit {
			dg = (uc + 1) * sig * (1 + alpha*gc*(1-sig))
		}
		if math.Abs(u) <= limit {
			du = glu
		}
		return dg, du
	}
	sig := 1 / (1 + math.Exp(-g))
	return sig * (1 + g*(1-sig)) * u, g * sig
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

// MoERouting is a DB_MOE_* routing (same values).
type MoERouting int32

const (
	MoESoftmaxTopK MoERouting = 0 // softmax over all experts, then the top k (Mixtral, Qwen-MoE)
	MoETopKSoftmax MoERouting = 1 // top k of the logits, softmax over those k (gpt-oss)
	MoESigmoidTopK MoERouting = 2 // DeepSeek-V3 noaux_tc: sigmoid, correction bias, group limit
	MoETopKSigmoid MoERouting = 3 // Llama 4: top k of the logits, weight sigmoid(logit) in the dtype
)

// MoERoute gives each token's top k experts (best first, ties to the lower expert) and their
// weights: with SoftmaxTopK the softmax over all experts (divided by the k's sum when
// renormalize), with TopKSoftmax the softmax over the k chosen logits.
func MoERoute(logits []float32, experts, topK int, mode MoERouting, renormalize bool) (ids []int32, weights, bounds []float64) {
	return MoERouter{Mode: mode, Renormalize: renormalize}.Route(logits, experts, topK)
}

// MoERouter is one db_moe_route configuration.
type MoERouter struct {
	Mode        MoERouting
	Renormalize bool // SoftmaxTopK, SigmoidTopK: the k weights divided by their sum
	// SigmoidTopK: Bias (nil for none) is added to the scores for the choice alone; Groups > 1
	// limits the choice to the GroupsKept groups whose two best biased scores sum highest.
	Bias               []float32
	Groups, GroupsKept int
	Scaling            float64 // the weights times it; 0 means 1
	DType              DType   // TopKSigmoid: the dtype its weights are rounded to
}

// orderKey ranks as the kernel does: larger first, a NaN above everything.
func orderKey(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	return v
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Keys are what the choice ranks for one token's logits: sigmoid(logit) + bias for
// SigmoidTopK, else the logits.
func (r MoERouter) Keys(row []float32) []float64 {
	k := make([]float64, len(row))
	for e, v := range row {
		k[e] = float64(v)
		if r.Mode == MoESigmoidTopK {
			k[e] = sigmoid(float64(v))
			if r.Bias != nil {
				k[e] += float64(r.Bias[e])
			}
		}
	}
	return k
}

// grouped reports whether the choice is limited to groups.
func (r MoERouter) grouped() bool { return r.Mode == MoESigmoidTopK && r.Groups > 1 }

// GroupScores are each group's two best keys summed (nil without a group limit).
func (r MoERouter) GroupScores(keys []float64) []float64 {
	if !r.grouped() {
		return nil
	}
	size := len(keys) / r.Groups
	out := make([]float64, r.Groups)
	for g := range out {
		m := append([]float64(nil), keys[g*size:(g+1)*size]...)
		sort.SliceStable(m, func(a, b int) bool { return orderKey(m[a]) > orderKey(m[b]) })
		out[g] = m[0] + m[1]
	}
	return out
}

// best orders indices by key, larger first, ties (and NaNs among themselves) to the lower index.
func best(keys []float64, candidates []int) []int {
	out := append([]int(nil), candidates...)
	sort.SliceStable(out, func(a, b int) bool { return orderKey(keys[out[a]]) > orderKey(keys[out[b]]) })
	return out
}

// KeptGroups marks the groups the choice may take from (every group without a limit).
func (r MoERouter) KeptGroups(keys []float64) []bool {
	if !r.grouped() {
		return []bool{true}
	}
	scores := r.GroupScores(keys)
	all := make([]int, r.Groups)
	for g := range all {
		all[g] = g
	}
	kept := make([]bool, r.Groups)
	for _, g := range best(scores, all)[:r.GroupsKept] {
		kept[g] = true
	}
	return kept
}

// group is expert e's group (0 without a limit).
func (r MoERouter) group(e, experts int) int {
	if !r.grouped() {
		return 0
	}
	return e / (experts / r.Groups)
}

// Choose gives one token's top k experts, best first.
func (r MoERouter) Choose(row []float32, topK int) []int32 {
	keys := r.Keys(row)
	kept := r.KeptGroups(keys)
	var candidates []int
	for e := range row {
		if kept[r.group(e, len(row))] {
			candidates = append(candidates, e)
		}
	}
	ids := make([]int32, topK)
	for j, e := range best(keys, candidates)[:topK] {
		ids[j] = int32(e)
	}
	return ids
}

// scaling is Scaling with 0 read as 1.
func (r MoERouter) scaling() float64 {
	if r.Scaling == 0 {
		return 1
	}
	return r.Scaling
}

// Weights are the weights of experts ids for one token's logits.
func (r MoERouter) Weights(row []float32, ids []int32) []float64 {
	w := make([]float64, len(ids))
	switch r.Mode {
	case MoESigmoidTopK, MoETopKSigmoid:
		var sum float64
		for j, id := range ids {
			w[j] = sigmoid(float64(row[id]))
			if r.Mode == MoETopKSigmoid {
				w[j] = float64(Round(r.DType, float32(w[j])))
			}
			sum += w[j]
		}
		for j := range w {
			if r.Mode == MoESigmoidTopK && r.Renormalize {
				w[j] /= sum + 1e-20
			}
			w[j] *= r.scaling()
		}
		return w
	}
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var z float64
	if r.Mode == MoETopKSoftmax || r.Renormalize {
		for _, id := range ids {
			z += math.Exp(float64(row[id]) - mx)
		}
	} else {
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
	}
	for j, id := range ids {
		w[j] = math.Exp(float64(row[id])-mx) / z * r.scaling()
	}
	return w
}

// WeightBound is weight w's bound from the kernel's fp32 arithmetic: expf's ulps and fp32 sums
// of up to experts terms, and for TopKSigmoid the rounding to the dtype.
func (r MoERouter) WeightBound(w float64, experts, topK int) float64 {
	b := float64(8*(experts+topK))*fp32*math.Abs(w) + 0x1p-40
	if r.Mode == MoETopKSigmoid {
		b += r.DType.UnitRoundoff() * math.Abs(w) * r.scaling()
	}
	return b
}

// Route gives each token's experts (best first) and weights, with each weight's bound.
func (r MoERouter) Route(logits []float32, experts, topK int) (ids []int32, weights, bounds []float64) {
	tokens := len(logits) / experts
	ids, weights, bounds = make([]int32, tokens*topK), make([]float64, tokens*topK), make([]float64, tokens*topK)
	for t := 0; t < tokens; t++ {
		row := logits[t*experts : (t+1)*experts]
		chosen := r.Choose(row, topK)
		copy(ids[t*topK:], chosen)
		for j, w := range r.Weights(row, chosen) {
			weights[t*topK+j], bounds[t*topK+j] = w, r.WeightBound(w, experts, topK)
		}
	}
	return ids, weights, bounds
}

// Admissible checks that experts ids are a choice of r for one token's logits when each key
// may be off by up to tol[e] (and a group score by its two largest tols): distinct, in range,
// from at most GroupsKept groups, none from a group clearly below GroupsKept others, and none
// clearly below an expert left out of a group it chose from. "Clearly" is more than
// BoundSigmas times the two tolerances in quadrature (tol are sigmas; a test passes bounds
// divided by BoundSigmas). A group that was kept but gave no expert cannot be seen, so its
// experts are not compared.
func (r MoERouter) Admissible(row []float32, tol []float64, ids []int32) error {
	n := len(row)
	keys, ktol := r.Keys(row), r.keyTolerances(row, tol)
	chosen := make([]bool, n)
	for _, id := range ids {
		if id < 0 || int(id) >= n || chosen[id] {
			return fmt.Errorf("experts %v are not %d distinct experts of 0..%d", ids, len(ids), n-1)
		}
		chosen[id] = true
	}
	clearly := func(a, b, ta, tb float64) bool { return orderKey(a)-orderKey(b) > BoundSigmas*math.Hypot(ta, tb) }
	used := map[int]bool{}
	for _, id := range ids {
		used[r.group(int(id), n)] = true
	}
	if r.grouped() {
		if len(used) > r.GroupsKept {
			return fmt.Errorf("experts %v come from %d groups, more than the %d kept", ids, len(used), r.GroupsKept)
		}
		scores, stol := r.GroupScores(keys), r.groupTolerances(keys, ktol)
		for g := range used {
			above := 0
			for x := range scores {
				if clearly(scores[x], scores[g], stol[x], stol[g]) {
					above++
				}
			}
			if above >= r.GroupsKept {
				return fmt.Errorf("experts %v: group %d (score %g) is clearly below %d other groups", ids, g, scores[g], above)
			}
		}
	}
	for _, id := range ids {
		for x := 0; x < n; x++ {
			if !chosen[x] && used[r.group(x, n)] && clearly(keys[x], keys[id], ktol[x], ktol[id]) {
				return fmt.Errorf("experts %v are not a top %d within their bounds: expert %d (%g) is clearly above expert %d (%g)",
					ids, len(ids), x, keys[x], id, keys[id])
			}
		}
	}
	return nil
}

// Close reports whether the choice of experts ids for one token could change within the
// logits' sigmas tol: a kept group not clear of a dropped one, or a chosen expert not clear of
// a candidate left out, by BoundSigmas sigmas.
func (r MoERouter) Close(row []float32, tol []float64, ids []int32) bool {
	n := len(row)
	keys, ktol := r.Keys(row), r.keyTolerances(row, tol)
	kept := r.KeptGroups(keys)
	near := func(a, b, ta, tb float64) bool { return !(orderKey(a)-orderKey(b) > BoundSigmas*math.Hypot(ta, tb)) }
	if r.grouped() {
		scores, stol := r.GroupScores(keys), r.groupTolerances(keys, ktol)
		for g := range scores {
			for x := range scores {
				if kept[g] && !kept[x] && near(scores[g], scores[x], stol[g], stol[x]) {
					return true
				}
			}
		}
	}
	chosen := make([]bool, n)
	for _, id := range ids {
		chosen[id] = true
	}
	for _, id := range ids {
		for x := 0; x < n; x++ {
			if !chosen[x] && kept[r.group(x, n)] && near(keys[id], keys[x], ktol[id], ktol[x]) {
				return true
			}
		}
	}
	return false
}

// keyTolerances carries the logits' tolerances to the keys (the sigmoid's slope).
func (r MoERouter) keyTolerances(row []float32, tol []float64) []float64 {
	if r.Mode != MoESigmoidTopK {
		return tol
	}
	out := make([]float64, len(tol))
	for e, t := range tol {
		s := sigmoid(float64(row[e]))
		out[e] = s * (1 - s) * t
	}
	return out
}

// groupTolerances bounds each group score's tolerance by its two largest key tolerances.
func (r MoERouter) groupTolerances(keys, ktol []float64) []float64 {
	size := len(keys) / r.Groups
	out := make([]float64, r.Groups)
	for g := range out {
		m := append([]float64(nil), ktol[g*size:(g+1)*size]...)
		sort.Float64s(m)
		out[g] = m[len(m)-1] + m[len(m)-2]
	}
	return out
}

// WeightSigmas propagates the logits' sigmas tol to first order into the weights of experts
// ids: a softmax moves w_j by w_j (sigma_j + sum_i p_i sigma_i) over its support, a sigmoid by
// s_j (1 - s_j) sigma_j, and the renormalisation by w_j times the sum's relative change.
func (r MoERouter) WeightSigmas(row []float32, tol []float64, ids []int32) []float64 {
	w := r.Weights(row, ids)
	out := make([]float64, len(ids))
	switch r.Mode {
	case MoESigmoidTopK, MoETopKSigmoid:
		var sum, moved float64
		ds := make([]float64, len(ids))
		for j, id := range ids {
			s := sigmoid(float64(row[id]))
			ds[j] = s * (1 - s) * tol[id]
			sum += s
			moved += ds[j]
		}
		for j := range ids {
			if r.Mode == MoESigmoidTopK && r.Renormalize {
				out[j] = (ds[j] + w[j]/r.scaling()*moved) / sum * r.scaling()
			} else {
				out[j] = ds[j] * r.scaling()
			}
		}
		return out
	}
	var mean float64
	if r.Mode == MoETopKSoftmax || r.Renormalize {
		for j, id := range ids {
			mean += w[j] / r.scaling() * tol[id]
		}
	} else {
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		for x, v := range row {
			mean += math.Exp(float64(v)-mx) / z * tol[x]
		}
	}
	for j, id := range ids {
		out[j] = w[j] * (tol[id] + mean)
	}
	return out
}

// MoEGatherWeighted gives x_sorted[r] = x[token of slot] * rowWeights[slot] for the rows of
// grouping g (tokens of hidden elements), what db_moe_group gathers with row_weights.
func MoEGatherWeighted(d DType, x []float32, sortedSlots []int32, rowWeights []float32, topK, hidden int) (want, bounds []float64) {
	want, bounds = make([]float64, len(sortedSlots)*hidden), make([]float64, len(sortedSlots)*hidden)
	for r, s := range sortedSlots {
		if s < 0 {
			continue
		}
		for i := 0; i < hidden; i++ {
			v := float64(x[int(s)/topK*hidden+i]) * float64(rowWeights[s])
			want[r*hidden+i], bounds[r*hidden+i] = v, elementBound(d, v, 0)
		}
	}
	return want, bounds
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
