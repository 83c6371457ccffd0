package ref

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// The float64 forward pass of a whole decode step, what the engine (bench/step) is checked
// against: the same synthetic weights and caches (Fill with TensorSeed and the scales of
// stepseeds.go), every op's output rounded to the step's dtype where the engine's kernel stores
// it and nowhere else, everything between in float64. The per-op references of this package
// (RMSNorm, RopeHead, GatedAct, BiasAdd, MoERoute, MoECombine, Embedding, LinearElementBound,
// the attention element bounds) do each op; attention itself is computed here (attendHead)
// because it needs the sliding window, the chunk and the sinks, and the softmax weights for the
// error propagation.
//
// The step (each stored value rounded to the dtype d):
//
//	x = embedding[ids] * (sqrt(hidden) for the Gemma families), r = x
//	per layer: a = rmsnorm(r) * attn_norm (from layer 1 on r = r + mlp_out first, fused)
//	           qkv = a qkv^T (+ qkv_bias); QK-norm per head; rope on q and k; k, v appended
//	           o = attention over the cache (window, chunk, sinks); y = o o^T (+ o_bias)
//	           Gemma 2/3: y = rmsnorm(y) * post_attn_norm
//	           m = rmsnorm(r + y) * mlp_norm, r = r + y
//	           dense: mlp_out = act(m gate^T) (m up^T) down^T (each rounded, biases apart)
//	           MoE: router (+ bias), top-k, experts (bias fused), combine, + shared experts
//	           Gemma 2/3: mlp_out = rmsnorm(mlp_out) * post_mlp_norm
//	f = rmsnorm(r + mlp_out) * final_norm; logits = f (lm_head or embedding)^T (+ bias)

// The step's fixed constants.
const (
	StepRMSNormEps = 1e-5
	StepRopeTheta  = 10000
)

// BoundSigmas is how many estimated standard deviations of the engine-reference difference a
// logit's bound allows (see Forward).
const BoundSigmas = 4

// uniformSigma is the standard deviation of an error spread evenly over [-1, 1]: an op whose
// kernel and reference roundings may differ by up to b adds b/sqrt(3) of sigma.
var uniformSigma = 1 / math.Sqrt(3)

// maxForwardElements caps what the reference holds in host memory (the layers' weights and
// caches, as float32; the embedding and the LM head are made row by row): 2^30 elements,
// 4 GiB, which one Llama-3-70B layer (855M) fits. The whole-step check runs a layer of each
// kind (bench/step's VerifyConfig), not a whole real model.
const maxForwardElements = 1 << 30

// StepArch is what a model's family implies for the step beyond its Shape.
type StepArch struct {
	EmbeddingScale float32 // the embedding rows are multiplied by it: float32(sqrt(hidden)) for Gemma, else 1
	UnitOffset     bool    // norms multiply by 1 + weight (Gemma)
	Activation     Activation
	PostNorms      bool // Gemma 2 and 3: a norm after attention and one after the MLP (4 a layer)
	// Router is the mixture of experts' routing (its Bias, the correction bias, is per layer);
	// WeighInput: the weights scale each expert's input and the outputs sum unweighted (Llama
	// 4). See RouterOf.
	Router     MoERouter
	WeighInput bool
	// SwiGLULimit is ActSwiGLUClamp's limit (gpt-oss's swiglu_limit).
	SwiGLULimit float64
}

// ArchOf gives the step's treatment of s, or an error naming the feature the step does not
// implement: multi-head latent attention other than the kernels' 512 + 64 (forward_mla.go runs
// that in the absorbed form), soft-capping (Gemma 2), LayerNorm with a bias, a
// non-gated MLP, quantized experts and weight formats no kernel
// takes (StepQuantRefusal), and PhiMoE's sparsemixer router.
func ArchOf(s model.Shape) (StepArch, error) {
	refuse := func(feature string) (StepArch, error) {
		return StepArch{}, fmt.Errorf("model %s: %s is not implemented by the step", s.Name, feature)
	}
	switch {
	case s.RecurrentFeature() != "":
		return refuse(s.RecurrentFeature())
	case s.IsMLA() && (s.KVLoRARank != cgo.MLALatentDim || s.RoPEHeadDim != cgo.MLARoPEDim):
		return refuse(fmt.Sprintf("multi-head latent attention of kv_lora_rank %d and rope %d (the kernels' are %d and %d)",
			s.KVLoRARank, s.RoPEHeadDim, cgo.MLALatentDim, cgo.MLARoPEDim))
	case s.IsMLA() && (s.NormsPerLayer() == 4 || s.AttnBias || s.OProjBias || s.QKNorm != "" || s.AttentionSinks):
		return refuse("multi-head latent attention with Gemma's norms, attention biases, QK-norm or sinks")
	case s.Family == "gemma2":
		return refuse("soft-capping (gemma2's attention and final logit soft-capping)")
	case s.NormBias:
		return refuse("LayerNorm with a bias (NormBias)")
	case !s.GatedMLP:
		return refuse("a non-gated MLP (GatedMLP = false; the step's MLPs are act(gate) * up)")
	case StepQuantRefusal(s) != "":
		return refuse(StepQuantRefusal(s))
	}
	a := StepArch{EmbeddingScale: 1, Activation: ActSiLU}
	switch s.Family {
	case "gemma", "gemma3_text":
		a.EmbeddingScale = float32(math.Sqrt(float64(s.Hidden)))
		a.UnitOffset, a.Activation = true, ActGeLUTanh
		a.PostNorms = s.NormsPerLayer() == 4
	}
	if s.Family == "gpt_oss" {
		a.Activation, a.SwiGLULimit = ActSwiGLUClamp, GptOSSLimit(s)
	}
	if s.IsMoE() {
		if s.Family == "phimoe" {
			return refuse("PhiMoE's sparsemixer routing")
		}
		a.Router, a.WeighInput = RouterOf(s)
	}
	return a, nil
}

// Forward is the float64 forward pass of batch sequences decoding steps tokens after a cache
// filled to context, in dtype d: the activations, the dense weights and a 16-bit cache. The
// Shape's weight format quantizes its projections (StepQuantized, forward_quant.go) and a KV
// dtype of fp8 makes the caches e4m3; its other dtypes are not read.
//
// Bounds. Each stored value v carries sigma, an estimate from above of the standard deviation
// of |engine - reference| at v, computed alongside the value (first-order propagation):
//
//   - Each op adds, in quadrature, the standard deviation of an error spread evenly over its
//     kernel's element bound from this package (the kernel's rounding plus its fp32
//     arithmetic, worst case) plus the reference's own rounding u|v|: b/sqrt(3) for that sum b.
//     Rounding errors are close to uniform; the fp32 terms are worst cases, far above what fp32
//     sums err. Ops that the reference reproduces bit for bit (the residual adds, copies) add
//     nothing while their inputs agree exactly.
//   - What comes in is propagated to first order through each op: a linear sums W^2 sigma^2
//     over k (its input errors are independent roundings), RMSNorm scales by the inverse rms
//     and adds the shared change of the rms, rotary turns the pair, the activation multiplies
//     by its derivatives, the router's softmax moves each weight by w (sigma_j + sum w sigma),
//     and attention by the first-order change of the softmax-weighted sum: q's error, shared
//     by every score, through the covariance of k and v under the weights, and the appended k
//     and v of earlier steps, whose sigmas the cache keeps (the filled ones are exact).
//
// A logit's bound is BoundSigmas sigmas. This is a stated, empirically checked estimate, not a
// rigorous bound: the worst case of independent roundings aligning in sign grows as sqrt(k)
// per linear and says nothing useful after a layer. Four sigmas cover a single rounding flip
// anywhere (2u|v|, an ulp) and both roundings of the logit itself. forward_test.go checks the
// bound against an adversarial engine that errs at every op by a uniform draw over the whole
// fp32 part of that op's kernel bound (far more than real fp32 sums err), teacher-forced, on
// every tiny model in bf16 and fp16: it reaches at most about half of each bound, and the
// bounds are about 10-20% of the logits' rms in bf16 (2-3% in fp16) after 2 to 4 layers.
//
// A routing decision cannot be bounded: when a token's k-th and (k+1)-th router logits are
// closer than BoundSigmas sigmas the engine may choose another expert, and from then on that
// sequence's bounds are +Inf (Lost reports which), unless the caller teacher-forces the
// engine's experts too (StepRouted).
type Forward struct {
	shape                                   model.Shape
	arch                                    StepArch
	d                                       DType
	batch, context, steps, capacity, step   int
	hidden, qHeads, kvHeads, headDim, vocab int
	rope                                    Rope

	// The embedding and the LM head are vocab x hidden each (a gigabyte of float32 at
	// Llama-3's 128256 x 4096): never held, their rows made from the hash when read (table).
	embedding, lmHead     table
	lmHeadBias, finalNorm []float32
	layers                []layerWeights

	kCache, vCache [][]float32 // per layer [batch, kv_heads, capacity, head_dim]
	kSigma, vSigma [][]float64 // per layer [batch, kv_heads, steps, head_dim]: appended tokens
	lost           []bool
	routes         map[int][]int32 // the experts each MoE layer followed in the last step

	// base is the step's seed; codeScales the scales of the fp8 and int8 weights held as codes,
	// weights, by their first element (forward_quant.go).
	base        uint64
	codeScales  map[*float32]*codeScales
	latent      [][]float32 // MLA: per layer [batch, capacity, 576]
	latentSigma [][]float64 // MLA: per layer [batch, steps, 576]: appended tokens

	// noise, when set (tests), is added before every rounding of an op the engine computes in
	// fp32, times that op's fp32 error bound: an adversarial engine.
	noise func() float64
}

type layerWeights struct {
	spec                            model.Layer
	attnNorm, mlpNorm               []float32
	postAttnNorm, postMLPNorm       []float32
	qkv, qkvBias, qNorm, kNorm      []float32
	o, oBias, sinks                 []float32
	gateUp, gateUpBias, down, dBias []float32 // dense MLP, or shared experts in an MoE layer
	router, routerBias, corrBias    []float32 // corrBias: sigmoid routing's correction bias (f32)
	expUpBias, expDB                []float32
	expUp, expDown                  *experts    // made an expert at a time where dense (table.go)
	mla                             *mlaWeights // multi-head latent attention (qkv and the KV caches unused)
}

// NewForward fills the weights and caches of a step of shape with base seed base: batch
// sequences, a cache holding context tokens each and room for steps more, dtype d (BF16 or
// FP16). A shape with zero layers is accepted (embedding, final norm, LM head).
func NewForward(shape model.Shape, base uint64, batch, context, steps int, d DType) (*Forward, error) {
	switch {
	case d != BF16 && d != FP16:
		return nil, fmt.Errorf("dtype %v: the step runs in bf16 or fp16", d)
	case batch < 1 || batch > cgo.MaxBatch:
		return nil, fmt.Errorf("batch %d out of range 1..%d", batch, cgo.MaxBatch)
	case steps < 1:
		return nil, fmt.Errorf("steps %d: want at least 1", steps)
	case context < 0:
		return nil, fmt.Errorf("context %d: want 0 or more tokens", context)
	case int64(context)+int64(steps) > math.MaxInt32:
		return nil, fmt.Errorf("context %d plus steps %d: positions past %d do not fit the device's int32 positions", context, steps, math.MaxInt32)
	}
	check := shape
	if check.Layers == 0 {
		check.Layers = 1 // Validate wants a layer; the reference also runs none
	}
	if shape.Layers < 0 {
		return nil, fmt.Errorf("model %s: Layers = %d: want 0 or more", shape.Name, shape.Layers)
	}
	if err := check.Validate(); err != nil {
		return nil, err
	}
	arch, err := ArchOf(shape)
	if err != nil {
		return nil, err
	}
	f := &Forward{shape: shape, arch: arch, d: d, batch: batch, context: context, steps: steps,
		capacity: context + steps, hidden: shape.Hidden, qHeads: shape.QHeads, kvHeads: shape.KVHeads,
		headDim: shape.HeadDim, vocab: shape.Vocab, lost: make([]bool, batch), routes: map[int][]int32{}, base: base}
	f.rope = Rope{Theta: StepRopeTheta, Scaling: RopeDefault, RotaryDim: shape.HeadDim}
	if shape.RotaryDim > 0 {
		f.rope.RotaryDim = shape.RotaryDim
	}
	if shape.RotaryLayers() > 0 {
		if err := f.rope.Validate(shape.HeadDim); err != nil {
			return nil, fmt.Errorf("model %s: %v", shape.Name, err)
		}
	}
	if n := f.elements(); n > maxForwardElements {
		return nil, fmt.Errorf("model %s at batch %d, context %d + %d steps: %d weight and cache elements, more than the %d the float64 reference holds",
			shape.Name, batch, context, steps, n, maxForwardElements)
	}
	f.fill(base)
	return f, nil
}

// elements counts the weights and cache elements the reference holds.
func (f *Forward) elements() int64 {
	s := f.shape
	h, hd := int64(s.Hidden), int64(s.HeadDim)
	var n int64 // the embedding and the LM head are not held (table)
	for l := 0; l < s.Layers; l++ {
		ly := s.Layer(l)
		if s.IsMLA() {
			n += f.mlaLayerElements() // its projections and latent cache, in place of qkv, o and the KV caches
		} else {
			n += (int64(s.QHeads)+2*int64(s.KVHeads))*hd*h + int64(s.QHeads)*hd*h
		}
		n += 3 * h * int64(ly.FFN)
		if ly.MoE {
			// The router, and the experts of a quantized format (dense ones are made as read).
			n += int64(s.Experts) * h
			if StepQuantized(s, TensorExpertUp) {
				n += int64(s.Experts) * 2 * h * int64(s.ExpertFFN)
			}
			if StepQuantized(s, TensorExpertDown) {
				n += int64(s.Experts) * h * int64(s.ExpertFFN)
			}
		}
		if !s.IsMLA() {
			n += 2 * int64(f.batch) * int64(s.KVHeads) * int64(f.capacity) * hd
		}
	}
	return n
}

func (f *Forward) fill(base uint64) {
	s, d := f.shape, f.d
	h, hd := s.Hidden, s.HeadDim
	get := func(layer int, name string, scale float32, n int) []float32 {
		return Fill(d, TensorSeed(base, layer, name), scale, n)
	}
	f.embedding = table{d: d, seed: TensorSeed(base, -1, TensorEmbedding), scale: UnitScale, width: h}
	f.lmHead = f.embedding
	if !s.TiedEmbeddings {
		f.lmHead = table{d: d, seed: TensorSeed(base, -1, TensorLMHead), scale: LinearWeightScale(h), width: h}
	}
	if s.LMHeadBias {
		f.lmHeadBias = get(-1, TensorLMHeadBias, BiasScale, s.Vocab)
	}
	f.finalNorm = get(-1, TensorFinalNorm, UnitScale, h)
	qkvN := (s.QHeads + 2*s.KVHeads) * hd
	for l := 0; l < s.Layers; l++ {
		ly := s.Layer(l)
		w := layerWeights{spec: ly}
		w.attnNorm = get(l, TensorAttnNorm, UnitScale, h)
		w.mlpNorm = get(l, TensorMLPNorm, UnitScale, h)
		if f.arch.PostNorms {
			w.postAttnNorm = get(l, TensorPostAttnNorm, UnitScale, h)
			w.postMLPNorm = get(l, TensorPostMLPNorm, UnitScale, h)
		}
		if s.IsMLA() {
			f.fillMLA(&w, l, get) // its q, kv and o projections and the latent cache
		} else {
			w.qkv = f.projection(base, l, TensorQKV, qkvN, h)
		}
		if s.AttnBias {
			w.qkvBias = get(l, TensorQKVBias, BiasScale, qkvN)
		}
		switch {
		case s.QKNorm == "rms":
			w.qNorm = get(l, TensorQNorm, UnitScale, hd)
			w.kNorm = get(l, TensorKNorm, UnitScale, hd)
		case s.QKNorm == "l2" && s.Layer(l).RoPE:
			// Llama 4's unweighted norm, in the layers with rotary: w' = 1 exactly.
			one := float32(1)
			if f.arch.UnitOffset {
				one = 0
			}
			w.qNorm = make([]float32, hd)
			for i := range w.qNorm {
				w.qNorm[i] = one
			}
			w.kNorm = w.qNorm
		}
		if !s.IsMLA() {
			w.o = f.projection(base, l, TensorO, h, s.QHeads*hd)
		}
		if s.OProjBias {
			w.oBias = get(l, TensorOBias, BiasScale, h)
		}
		if s.AttentionSinks {
			w.sinks = Fill(F32, TensorSeed(base, l, TensorSinks), UnitScale, s.QHeads)
		}
		upName, downName, upBias, downBias := TensorGateUp, TensorDown, TensorGateUpBias, TensorDownBias
		if ly.MoE {
			upName, downName, upBias, downBias = TensorSharedUp, TensorSharedDown, TensorSharedUpBias, TensorSharedDownBias
		}
		if ffn := ly.FFN; ffn > 0 {
			w.gateUp = f.projection(base, l, upName, 2*ffn, h)
			w.down = f.projection(base, l, downName, h, ffn)
			if s.MLPBias {
				w.gateUpBias = get(l, upBias, BiasScale, 2*ffn)
				w.dBias = get(l, downBias, BiasScale, h)
			}
		}
		if ly.MoE {
			e, effn := s.Experts, s.ExpertFFN
			w.router = get(l, TensorRouter, LinearWeightScale(h), e*h)
			if CorrectionBias(s) {
				w.corrBias = Fill(F32, TensorSeed(base, l, TensorRouterBias), BiasScale, e)
			} else if s.RouterBias {
				w.routerBias = get(l, TensorRouterBias, BiasScale, e)
			}
			w.expUp = f.newExperts(base, l, TensorExpertUp, e, 2*effn, h)
			w.expDown = f.newExperts(base, l, TensorExpertDown, e, h, effn)
			if s.MLPBias {
				w.expUpBias = get(l, TensorExpertUpBias, BiasScale, e*2*effn)
				w.expDB = get(l, TensorExpertDownBias, BiasScale, e*h)
			}
		}
		f.layers = append(f.layers, w)
		if s.IsMLA() {
			continue // the latent cache is fillMLA's
		}
		cache := f.batch * s.KVHeads * f.capacity * hd
		f.kCache = append(f.kCache, f.cacheFill(base, l, TensorKCache, cache))
		f.vCache = append(f.vCache, f.cacheFill(base, l, TensorVCache, cache))
		f.kSigma = append(f.kSigma, make([]float64, f.batch*s.KVHeads*f.steps*hd))
		f.vSigma = append(f.vSigma, make([]float64, f.batch*s.KVHeads*f.steps*hd))
	}
}

// FirstTokens are the input ids of the first step: TokenID(base, b, vocab).
func FirstTokens(base uint64, batch, vocab int) []int32 {
	ids := make([]int32, batch)
	for b := range ids {
		ids[b] = TokenID(base, b, vocab)
	}
	return ids
}

// Arch is the family's treatment the step follows.
func (f *Forward) Arch() StepArch { return f.arch }

// Routes gives the experts the last step followed in each MoE layer: [batch * top_k], best
// first when the reference chose them.
func (f *Forward) Routes() map[int][]int32 {
	out := make(map[int][]int32, len(f.routes))
	for l, r := range f.routes {
		out[l] = append([]int32(nil), r...)
	}
	return out
}

// Lost reports, per sequence, whether a routing decision so far was too close to call, so that
// its bounds are +Inf.
func (f *Forward) Lost() []bool { return append([]bool(nil), f.lost...) }

// vec is a stored activation: rows of values as the device holds them and each one's sigma.
type vec struct {
	v []float32
	s []float64
}

func newVec(n int) vec { return vec{make([]float32, n), make([]float64, n)} }

// store rounds an op's float64 results want to d as its kernel stores them; kernel is each
// one's element bound for the kernel and in its sigma propagated from the op's inputs.
func (f *Forward) store(want, kernel, in []float64) vec {
	u := f.d.UnitRoundoff()
	out := newVec(len(want))
	for i, w := range want {
		if f.noise != nil {
			w += f.noise() * math.Max(0, kernel[i]-u*math.Abs(w)-halfSubnormalSpacing(f.d))
		}
		out.v[i] = Round(f.d, float32(w))
		out.s[i] = math.Hypot(in[i], (kernel[i]+u*math.Abs(w))*uniformSigma)
	}
	return out
}

// exactSigma is the sigma of a value the reference computes bit for bit as the kernel does
// from inputs of sigma in: unchanged while the inputs agree, else the two roundings apart.
func (f *Forward) exactSigma(v float32, in float64) float64 {
	if in == 0 {
		return 0
	}
	return math.Hypot(in, (2*f.d.UnitRoundoff()*math.Abs(float64(v))+2*halfSubnormalSpacing(f.d))*uniformSigma)
}

// add is round(a + b), the fp32 sum of two stored values.
func (f *Forward) add(a, b vec) vec {
	out := newVec(len(a.v))
	for i := range a.v {
		out.v[i] = Round(f.d, a.v[i]+b.v[i])
		out.s[i] = f.exactSigma(out.v[i], math.Hypot(a.s[i], b.s[i]))
	}
	return out
}

// linear is x W^T for rows of x (k each) and W [n, k], with bias (n, may be nil) fused into
// the one rounding when fused, else added and rounded apart as db_bias_add does.
func (f *Forward) linear(x vec, w, bias []float32, n, k int, fused bool) vec {
	row := func(j int, _ []float32) []float32 { return w[j*k : (j+1)*k] }
	return f.linearRows(x, row, f.scalesOf(w), bias, n, k, fused)
}

// linearRows is linear with W's rows read through row (which may fill and return buf, k long),
// and the codes' scales of fp8 and int8 weights (nil for others). The rows are shared out
// among the CPUs: a Llama-3-8B LM head is 525M products a sequence.
func (f *Forward) linearRows(x vec, row func(j int, buf []float32) []float32, scales *codeScales, bias []float32, n, k int, fused bool) vec {
	rows := len(x.v) / k
	want, kernel, in := make([]float64, rows*n), make([]float64, rows*n), make([]float64, rows*n)
	work := func(lo, hi int) {
		buf := make([]float32, k)
		for j := lo; j < hi; j++ {
			wj := row(j, buf)
			for b := 0; b < rows; b++ {
				xv, xs := x.v[b*k:(b+1)*k], x.s[b*k:(b+1)*k]
				var sum, abs, variance float64
				for kk, wv := range wj {
					wk := float64(wv)
					if scales != nil {
						wk *= scales.at(j, kk)
					}
					p := float64(xv[kk]) * wk
					sum += p
					abs += math.Abs(p)
					e := wk * xs[kk]
					variance += e * e
				}
				if fused && bias != nil {
					sum += float64(bias[j])
					abs += math.Abs(float64(bias[j]))
				}
				i := b*n + j
				want[i], kernel[i], in[i] = sum, LinearElementBound(f.d, k, sum, abs), math.Sqrt(variance)
			}
		}
	}
	parallelRows(n, n*k, work)
	y := f.store(want, kernel, in)
	if bias != nil && !fused {
		bw, bb := BiasAdd(f.d, y.v, bias, n)
		y = f.store(bw, bb, y.s)
	}
	return y
}

// rmsnorm is db_rmsnorm on rows of n: out = rmsnorm(s) * w', s = round(x + residual) (x when
// residual is nil), which is also returned (the new residual).
func (f *Forward) rmsnorm(x vec, residual *vec, w []float32, n int) (out, sum vec) {
	var r RMSNormReference
	sum = x
	if residual != nil {
		r = RMSNorm(f.d, x.v, residual.v, w, n, StepRMSNormEps, f.arch.UnitOffset)
		sum = newVec(len(x.v))
		for i := range sum.v {
			sum.v[i] = r.Sum[i]
			sum.s[i] = f.exactSigma(r.Sum[i], math.Hypot(x.s[i], residual.s[i]))
		}
	} else {
		r = RMSNorm(f.d, x.v, nil, w, n, StepRMSNormEps, f.arch.UnitOffset)
	}
	offset := 0.0
	if f.arch.UnitOffset {
		offset = 1
	}
	in := make([]float64, len(x.v))
	for row := 0; row < len(x.v)/n; row++ {
		s, ss := sum.v[row*n:(row+1)*n], sum.s[row*n:(row+1)*n]
		var sumsq, shared float64
		for i, v := range s {
			sumsq += float64(v) * float64(v)
			e := float64(v) * ss[i]
			shared += e * e
		}
		inv := 1 / math.Sqrt(sumsq/float64(n)+StepRMSNormEps)
		shared = math.Sqrt(shared) / float64(n) * inv * inv // the rms's relative change
		for i := range s {
			j := row*n + i
			in[j] = math.Abs(float64(w[i])+offset)*inv*ss[i] + math.Abs(r.Want[j])*shared
		}
	}
	return f.store(r.Want, r.Bounds, in), sum
}

// ropeRows rotates rows of head_dim, every one at position pos.
func (f *Forward) ropeRows(x vec, pos int) vec { return f.ropeRowsOf(x, f.rope, f.headDim, pos) }

// ropeRowsOf rotates rows of hd elements by rope r, every one at position pos.
func (f *Forward) ropeRowsOf(x vec, rope Rope, hd, pos int) vec {
	half := rope.RotaryDim / 2
	want, kernel, in := make([]float64, len(x.v)), make([]float64, len(x.v)), make([]float64, len(x.v))
	for row := 0; row < len(x.v)/hd; row++ {
		o := row * hd
		w, b := RopeHead(rope, f.d, x.v[o:o+hd], pos)
		copy(want[o:], w)
		copy(kernel[o:], b)
		for i := 0; i < hd; i++ {
			in[o+i] = x.s[o+i]
		}
		for i := 0; i < half; i++ {
			sn, c := math.Sincos(float64(pos) * rope.InvFreq(i, pos+1))
			s1, s2 := x.s[o+i], x.s[o+i+half]
			in[o+i], in[o+i+half] = math.Hypot(c*s1, sn*s2), math.Hypot(c*s2, sn*s1)
		}
	}
	y := f.store(want, kernel, in)
	for row := 0; row < len(x.v)/hd; row++ { // elements past the rotary part are copies
		for i := 2 * half; i < hd; i++ {
			y.v[row*hd+i], y.s[row*hd+i] = x.v[row*hd+i], x.s[row*hd+i]
		}
	}
	return y
}

// gatedAct is db_gated_act on rows of [gate (ffn), up (ffn)].
func (f *Forward) gatedAct(gu vec, ffn int) vec {
	act, limit, alpha := f.arch.Activation, f.arch.SwiGLULimit, SwiGLUAlpha
	want, kernel := GatedActClamp(f.d, act, gu.v, ffn, limit, alpha)
	in := make([]float64, len(want))
	for b := 0; b < len(want)/ffn; b++ {
		for i := 0; i < ffn; i++ {
			g, u := float64(gu.v[b*2*ffn+i]), float64(gu.v[b*2*ffn+ffn+i])
			sg, su := gu.s[b*2*ffn+i], gu.s[b*2*ffn+ffn+i]
			dg, du := GatedPartials(act, g, u, limit, alpha)
			in[b*ffn+i] = math.Hypot(dg*sg, du*su)
		}
	}
	return f.store(want, kernel, in)
}

// mlp is a dense gated MLP of width ffn on m.
func (f *Forward) mlp(m vec, gateUp, gateUpBias, down, downBias []float32, ffn int) vec {
	gu := f.linear(m, gateUp, gateUpBias, 2*ffn, f.hidden, false)
	return f.linear(f.gatedAct(gu, ffn), down, downBias, f.hidden, ffn, false)
}

// span is the first token a sequence of length L attends to in layer ly.
func span(ly model.Layer, L int) int {
	switch {
	case ly.Window > 0:
		return max(0, L-ly.Window)
	case ly.Chunk > 0:
		return (L - 1) / ly.Chunk * ly.Chunk
	}
	return 0
}

// attendHead is one query head's attention over tokens lo..L-1 of its KV head's cache rows
// (k, v with sigmas ks, vs, nil before the appended tokens start at first), with an optional
// sink logit: the output, its kernel bound and its propagated sigma.
func (f *Forward) attendHead(q []float32, qs []float64, kv func(t int) (k, v []float32, ks, vs []float64), lo, L int, sink *float32) (want, kernel, in []float64) {
	hd := len(q) // head_dim; MLA's 576, its values attended as wide (the caller keeps 512)
	scale := f.attnScale()
	n := L - lo
	scores, sigmaS := make([]float64, n), make([]float64, n)
	m, scoreAbs := math.Inf(-1), 0.0
	for t := lo; t < L; t++ {
		k, _, ks, _ := kv(t)
		var dot, abs, variance float64
		for i := 0; i < hd; i++ {
			p := float64(q[i]) * float64(k[i])
			dot += p
			abs += math.Abs(p)
			if ks != nil {
				e := float64(q[i]) * ks[i]
				variance += e * e
			}
		}
		scores[t-lo], sigmaS[t-lo] = dot*scale, math.Sqrt(variance)*scale
		m, scoreAbs = math.Max(m, dot*scale), math.Max(scoreAbs, abs*scale)
	}
	if sink != nil {
		m = math.Max(m, float64(*sink))
	}
	denom := 0.0
	for i := range scores {
		scores[i] = math.Exp(scores[i] - m)
		denom += scores[i]
	}
	if sink != nil {
		denom += math.Exp(float64(*sink) - m)
	}
	want, absW := make([]float64, hd), make([]float64, hd)
	for t := lo; t < L; t++ {
		_, v, _, _ := kv(t)
		p := scores[t-lo] / denom
		scores[t-lo] = p
		for i := range want {
			want[i] += p * float64(v[i])
			absW[i] += p * math.Abs(float64(v[i]))
		}
	}
	// First order: d out_i = sum_t p_t (v_ti - out_i) d s_t + sum_t p_t d v_ti, with
	// d s_t = scale (dq . k_t + q . dk_t). q's error is shared by every score, so its part is
	// scale sum_d dq_d C_di with C_di = sum_t p_t (v_ti - out_i) k_td; the appended tokens' k and
	// v errors are their own.
	c := make([]float64, hd*hd)
	variance, dev := make([]float64, hd), make([]float64, hd)
	for t := lo; t < L; t++ {
		k, v, _, vs := kv(t)
		p := scores[t-lo]
		for i := range variance {
			dev[i] = p * (float64(v[i]) - want[i])
			e := dev[i] * sigmaS[t-lo]
			variance[i] += e * e
			if vs != nil {
				e = p * vs[i]
				variance[i] += e * e
			}
		}
		for dd, kd := range k {
			row := c[dd*hd : (dd+1)*hd]
			for i, x := range dev {
				row[i] += x * float64(kd)
			}
		}
	}
	in = make([]float64, hd)
	for i := range in {
		for dd := 0; dd < hd; dd++ {
			e := scale * qs[dd] * c[dd*hd+i]
			variance[i] += e * e
		}
		in[i] = math.Sqrt(variance[i])
	}
	r := AttentionReference{Want: want, AbsWeighted: absW, ScoreAbs: []float64{scoreAbs}, Context: []int{n}, HeadDim: hd}
	return want, r.ElementBoundsMMA(f.d, n), in
}

// attention runs layer l's attention for every sequence after the step's token was appended.
func (f *Forward) attention(l int, q vec) vec {
	w := f.layers[l]
	hd, group := f.headDim, f.qHeads/f.kvHeads
	L := f.context + f.step + 1
	lo := span(w.spec, L)
	rows := f.batch * f.qHeads
	want, kernel, in := make([]float64, rows*hd), make([]float64, rows*hd), make([]float64, rows*hd)
	for b := 0; b < f.batch; b++ {
		for hq := 0; hq < f.qHeads; hq++ {
			h := hq / group
			kv := func(t int) (k, v []float32, ks, vs []float64) {
				o := ((b*f.kvHeads+h)*f.capacity + t) * hd
				k, v = f.kCache[l][o:o+hd], f.vCache[l][o:o+hd]
				if t >= f.context {
					so := ((b*f.kvHeads+h)*f.steps + t - f.context) * hd
					ks, vs = f.kSigma[l][so:so+hd], f.vSigma[l][so:so+hd]
				}
				return k, v, ks, vs
			}
			var sink *float32
			if w.sinks != nil {
				sink = &w.sinks[hq]
			}
			row := b*f.qHeads + hq
			a, k, s := f.attendHead(q.v[row*hd:(row+1)*hd], q.s[row*hd:(row+1)*hd], kv, lo, L, sink)
			copy(want[row*hd:], a)
			copy(kernel[row*hd:], k)
			copy(in[row*hd:], s)
		}
	}
	return f.store(want, kernel, in)
}

// moe is layer l's routed experts on m (rows of hidden), combined: the router (its bias on the
// logits, or the correction bias in the choice), the choice and the weights of the family's
// router, each expert's gated MLP (on its input times its weight where the family weighs the
// input), and the weighted sum. A choice too close to call within the logits' sigmas loses the
// sequence; a forced one (the engine's) must be admissible.
func (f *Forward) moe(l int, m vec, forced []int32) (vec, error) {
	w, s := f.layers[l], f.shape
	e, k, effn, h := s.Experts, s.ExpertsPerToken, s.ExpertFFN, f.hidden
	r := f.arch.Router
	r.Bias, r.DType = w.corrBias, f.d
	logits := f.linear(m, w.router, w.routerBias, e, h, false)
	out := newVec(f.batch * h)
	f.routes[l] = make([]int32, f.batch*k)
	for b := 0; b < f.batch; b++ {
		lv, ls := logits.v[b*e:(b+1)*e], logits.s[b*e:(b+1)*e]
		ids := r.Choose(lv, k)
		if forced != nil {
			ids = forced[b*k : (b+1)*k]
			if err := r.Admissible(lv, ls, ids); err != nil {
				return vec{}, fmt.Errorf("layer %d sequence %d: %v", l, b, err)
			}
		} else if r.Close(lv, ls, ids) {
			f.lost[b] = true
		}
		copy(f.routes[l][b*k:], ids)
		weights, wSigma := r.Weights(lv, ids), r.WeightSigmas(lv, ls, ids)
		mb := vec{m.v[b*h : (b+1)*h], m.s[b*h : (b+1)*h]}
		ys := newVec(k * h)
		w32 := make([]float32, k)
		for j, id := range ids {
			x := int(id)
			var upBias, downBias []float32
			if w.expUpBias != nil {
				upBias, downBias = w.expUpBias[x*2*effn:(x+1)*2*effn], w.expDB[x*h:(x+1)*h]
			}
			in := mb
			w32[j] = float32(weights[j])
			if f.arch.WeighInput {
				in = f.weighRow(mb, w32[j], wSigma[j]+r.WeightBound(weights[j], e, k))
				w32[j] = 1
			}
			gu := f.expertLinear(in, w.expUp, x, upBias)
			y := f.expertLinear(f.gatedAct(gu, effn), w.expDown, x, downBias)
			copy(ys.v[j*h:], y.v)
			copy(ys.s[j*h:], y.s)
		}
		slots := make([]int32, k)
		for j := range slots {
			slots[j] = int32(j)
		}
		want, kernel := MoECombine(f.d, ys.v, slots, w32, k, h)
		in := make([]float64, h)
		for i := 0; i < h; i++ {
			var sq, moved float64
			for j := range ids {
				ey := float64(w32[j]) * ys.s[j*h+i]
				sq += ey * ey
				if !f.arch.WeighInput {
					moved += (wSigma[j] + r.WeightBound(weights[j], e, k)) * math.Abs(float64(ys.v[j*h+i]))
				}
			}
			in[i] = math.Sqrt(sq) + moved
		}
		c := f.store(want, kernel, in)
		copy(out.v[b*h:], c.v)
		copy(out.s[b*h:], c.s)
	}
	return out, nil
}

// weighRow is db_moe_group's weighted gather of one row: round(x * w), w's own error sigmaW.
func (f *Forward) weighRow(x vec, w float32, sigmaW float64) vec {
	want, kernel, in := make([]float64, len(x.v)), make([]float64, len(x.v)), make([]float64, len(x.v))
	for i, v := range x.v {
		want[i] = float64(v) * float64(w)
		kernel[i] = elementBound(f.d, want[i], 0)
		in[i] = math.Hypot(float64(w)*x.s[i], float64(v)*sigmaW)
	}
	return f.store(want, kernel, in)
}

// Step runs one decode step with each sequence's input token (teacher-forced: the caller feeds
// the engine's tokens) and gives the logits [batch * vocab], rounded to the dtype as the engine
// stores them, and each one's bound (+Inf for a Lost sequence).
func (f *Forward) Step(tokens []int32) (logits, bounds []float64, err error) {
	return f.StepRouted(tokens, nil)
}

// StepRouted is Step with the experts teacher-forced too: routes[l] is the engine's topk_ids
// of MoE layer l ([batch * top_k], as db_moe_route wrote them), or nil to route by the
// reference's own logits. A choice that is not a top k of the reference's router logits within
// their bounds is an error naming the layer, the sequence and the experts; an admissible one is
// followed (the weights from the reference's logits), so that no sequence is Lost to routing
// and the later steps stay checkable.
func (f *Forward) StepRouted(tokens []int32, routes map[int][]int32) (logits, bounds []float64, err error) {
	for l, r := range routes {
		if l < 0 || l >= len(f.layers) || !f.layers[l].spec.MoE {
			return nil, nil, fmt.Errorf("routes for layer %d, which does not route to experts", l)
		}
		if len(r) != f.batch*f.shape.ExpertsPerToken {
			return nil, nil, fmt.Errorf("layer %d: %d routed experts for a batch of %d with top %d", l, len(r), f.batch, f.shape.ExpertsPerToken)
		}
	}
	if f.step >= f.steps {
		return nil, nil, fmt.Errorf("step %d: the cache holds %d steps after the context of %d", f.step, f.steps, f.context)
	}
	if len(tokens) != f.batch {
		return nil, nil, fmt.Errorf("%d tokens for a batch of %d", len(tokens), f.batch)
	}
	for b, t := range tokens {
		if t < 0 || int(t) >= f.vocab {
			return nil, nil, fmt.Errorf("token %d of sequence %d outside the vocabulary 0..%d", t, b, f.vocab-1)
		}
	}
	s, h, hd := f.shape, f.hidden, f.headDim
	pos := f.context + f.step

	x := newVec(f.batch * h)
	rows, ids := f.embedding.gather(tokens)
	ew, eb := Embedding(f.d, rows, ids, h, float64(f.arch.EmbeddingScale))
	if f.arch.EmbeddingScale == 1 {
		for i, v := range ew {
			x.v[i] = float32(v)
		}
	} else {
		x = f.store(ew, eb, make([]float64, len(ew)))
	}
	r := x
	var pending *vec // the previous layer's MLP output, added to r by the next norm
	for l := range f.layers {
		w := f.layers[l]
		var a vec
		if pending == nil {
			a, _ = f.rmsnorm(r, nil, w.attnNorm, h)
		} else {
			a, r = f.rmsnorm(*pending, &r, w.attnNorm, h)
		}
		if w.mla != nil {
			var m vec
			m, r = f.rmsnorm(f.mlaAttention(l, a, pos), &r, w.mlpNorm, h)
			if pending, err = f.mlpBlock(l, m, routes); err != nil {
				return nil, nil, err
			}
			continue
		}
		qkvN := (f.qHeads + 2*f.kvHeads) * hd
		qkv := f.linear(a, w.qkv, w.qkvBias, qkvN, h, false)
		q, k, v := newVec(f.batch*f.qHeads*hd), newVec(f.batch*f.kvHeads*hd), newVec(f.batch*f.kvHeads*hd)
		for b := 0; b < f.batch; b++ {
			row := qkvN * b
			qn, kn := f.qHeads*hd, f.kvHeads*hd
			copy(q.v[b*qn:], qkv.v[row:row+qn])
			copy(q.s[b*qn:], qkv.s[row:row+qn])
			copy(k.v[b*kn:], qkv.v[row+qn:row+qn+kn])
			copy(k.s[b*kn:], qkv.s[row+qn:row+qn+kn])
			copy(v.v[b*kn:], qkv.v[row+qn+kn:row+qn+2*kn])
			copy(v.s[b*kn:], qkv.s[row+qn+kn:row+qn+2*kn])
		}
		if w.qNorm != nil {
			// Llama 4 norms after rotary, the step before it: the same in exact arithmetic, as an
			// unweighted norm commutes with a rotation.
			q, _ = f.rmsnorm(q, nil, w.qNorm, hd)
			k, _ = f.rmsnorm(k, nil, w.kNorm, hd)
		}
		if w.spec.RoPE {
			q, k = f.ropeRows(q, pos), f.ropeRows(k, pos)
		}
		for b := 0; b < f.batch; b++ { // the append: k and v into the cache at pos
			for kh := 0; kh < f.kvHeads; kh++ {
				src := (b*f.kvHeads + kh) * hd
				dst := ((b*f.kvHeads+kh)*f.capacity + pos) * hd
				so := ((b*f.kvHeads+kh)*f.steps + f.step) * hd
				f.appendKV(l, dst, so, src, k, v)
			}
		}
		o := f.attention(l, q)
		y := f.linear(o, w.o, w.oBias, h, f.qHeads*hd, false)
		if w.postAttnNorm != nil {
			y, _ = f.rmsnorm(y, nil, w.postAttnNorm, h)
		}
		var m vec
		m, r = f.rmsnorm(y, &r, w.mlpNorm, h)
		if pending, err = f.mlpBlock(l, m, routes); err != nil {
			return nil, nil, err
		}
	}
	var fin vec
	if pending == nil {
		fin, _ = f.rmsnorm(r, nil, f.finalNorm, h)
	} else {
		fin, _ = f.rmsnorm(*pending, &r, f.finalNorm, h)
	}
	out := f.linearRows(fin, f.lmHead.row, nil, f.lmHeadBias, s.Vocab, h, false)
	f.step++
	logits, bounds = make([]float64, len(out.v)), make([]float64, len(out.v))
	for i, v := range out.v {
		logits[i], bounds[i] = float64(v), BoundSigmas*out.s[i]
		if f.lost[i/s.Vocab] {
			bounds[i] = math.Inf(1)
		}
	}
	return logits, bounds, nil
}

// mlpBlock is the MLP half of layer l on its normed input m: the dense MLP, or the mixture of
// experts (routed as forced, or by the router) with its shared experts, then Gemma's post-MLP
// norm. It returns the MLP output, which the next norm adds to the residual.
func (f *Forward) mlpBlock(l int, m vec, routes map[int][]int32) (*vec, error) {
	w := f.layers[l]
	var mlpOut vec
	if w.spec.MoE {
		var err error
		if mlpOut, err = f.moe(l, m, routes[l]); err != nil {
			return nil, err
		}
		if w.spec.FFN > 0 {
			mlpOut = f.add(mlpOut, f.mlp(m, w.gateUp, w.gateUpBias, w.down, w.dBias, w.spec.FFN))
		}
	} else {
		mlpOut = f.mlp(m, w.gateUp, w.gateUpBias, w.down, w.dBias, w.spec.FFN)
	}
	if w.postMLPNorm != nil {
		mlpOut, _ = f.rmsnorm(mlpOut, nil, w.postMLPNorm, f.hidden)
	}
	return &mlpOut, nil
}

// Greedy gives each row's argmax, the lowest index on a tie, as db_argmax picks it.
func Greedy(logits []float64, vocab int) []int32 {
	out := make([]int32, len(logits)/vocab)
	for b := range out {
		row := logits[b*vocab : (b+1)*vocab]
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		out[b] = int32(best)
	}
	return out
}

// Decided reports, per sequence, whether the reference's top logit stands clear of every other
// by more than both bounds (logit - bound above every other logit + bound), so that the
// engine's argmax must agree with Greedy's.
func Decided(logits, bounds []float64, vocab int) []bool {
	top := Greedy(logits, vocab)
	out := make([]bool, len(top))
	for b, t := range top {
		row, bd := logits[b*vocab:(b+1)*vocab], bounds[b*vocab:(b+1)*vocab]
		floor := row[t] - bd[t]
		out[b] = !math.IsInf(floor, 0) && !math.IsNaN(floor)
		for i := range row {
			if i != int(t) && !(row[i]+bd[i] < floor) {
				out[b] = false
			}
		}
	}
	return out
}
