package ref

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/internal/testtier"
)

// handShape is the hand-checked model: one layer, hidden 8, vocab 11, two query heads over one
// KV head of 4.
func handShape() model.Shape {
	return model.Shape{Name: "hand", Family: "llama", Hidden: 8, FFN: 16, Layers: 1, QHeads: 2,
		KVHeads: 1, HeadDim: 4, Vocab: 11, GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1}
}

// handLogits is the hand-checked model's step written out as plain loops over one sequence at a
// time, independently of forward.go: every stored value rounded to bf16, the rest in float64.
// One layer, with any of the step's features. With fp32 every arithmetic result is rounded to
// float32 and sums run backwards: a plain fp32 engine, independent of forward.go, for its bounds.
func handLogits(s model.Shape, base uint64, batch, context, steps int, tokens [][]int32, fp32 bool) [][]float64 {
	r := func(x float64) float64 { return float64(Round(BF16, float32(x))) }
	c := func(x float64) float64 { // one fp32 operation's result
		if fp32 {
			return float64(float32(x))
		}
		return x
	}
	fill := func(layer int, name string, scale float32, n int) []float64 {
		v := Fill(BF16, TensorSeed(base, layer, name), scale, n)
		out := make([]float64, n)
		for i := range v {
			out[i] = float64(v[i])
		}
		return out
	}
	gemma := s.Family == "gemma" || s.Family == "gemma3_text"
	H, V, hd, F := s.Hidden, s.Vocab, s.HeadDim, s.FFN
	nq, nkv := s.QHeads, s.KVHeads
	capacity := context + steps
	emb := fill(-1, TensorEmbedding, 1, V*H)
	lm := emb
	if !s.TiedEmbeddings {
		lm = fill(-1, TensorLMHead, LinearWeightScale(H), V*H)
	}
	finalNorm := fill(-1, TensorFinalNorm, 1, H)
	attnNorm, mlpNorm := fill(0, TensorAttnNorm, 1, H), fill(0, TensorMLPNorm, 1, H)
	postAttn, postMLP := fill(0, TensorPostAttnNorm, 1, H), fill(0, TensorPostMLPNorm, 1, H)
	qNorm, kNorm := fill(0, TensorQNorm, 1, hd), fill(0, TensorKNorm, 1, hd)
	sinks := Fill(F32, TensorSeed(base, 0, TensorSinks), 1, nq)
	nqkv := (nq + 2*nkv) * hd
	wqkv := fill(0, TensorQKV, LinearWeightScale(H), nqkv*H)
	bias := func(on bool, layer int, name string, n int) []float64 {
		if !on {
			return make([]float64, n)
		}
		return fill(layer, name, BiasScale, n)
	}
	qkvBias := bias(s.AttnBias, 0, TensorQKVBias, nqkv)
	wo, oBias := fill(0, TensorO, LinearWeightScale(nq*hd), H*nq*hd), bias(s.OProjBias, 0, TensorOBias, H)
	lmBias := bias(s.LMHeadBias, -1, TensorLMHeadBias, V)
	kc := fill(0, TensorKCache, 1, batch*nkv*capacity*hd)
	vc := fill(0, TensorVCache, 1, batch*nkv*capacity*hd)
	offset := 0.0
	if gemma {
		offset = 1
	}
	norm := func(x, w []float64) []float64 {
		ss := 0.0
		for _, v := range x {
			ss = c(ss + c(v*v))
		}
		inv := c(1 / c(math.Sqrt(c(ss/float64(len(x))+1e-5))))
		out := make([]float64, len(x))
		for i := range x {
			out[i] = r(c(c(x[i]*inv) * c(w[i]+offset)))
		}
		return out
	}
	// matvec is round(x W^T + bias); a nil bias adds none, and fused adds it before the one
	// rounding, else it is added and rounded again.
	matvec := func(x, w []float64, n int, bias []float64, fused bool) []float64 {
		out := make([]float64, n)
		for j := 0; j < n; j++ {
			sum := 0.0
			for k := range x {
				if fp32 {
					k = len(x) - 1 - k
				}
				sum = c(sum + x[k]*w[j*len(x)+k])
			}
			switch {
			case bias == nil:
				out[j] = r(sum)
			case fused:
				out[j] = r(c(sum + bias[j]))
			default:
				out[j] = r(r(sum) + bias[j])
			}
		}
		return out
	}
	rotary := hd
	if s.RotaryDim > 0 {
		rotary = s.RotaryDim
	}
	rope := func(h []float64, pos int) []float64 {
		out := append([]float64(nil), h...)
		if s.NoRoPELayers > 0 {
			return out
		}
		half := rotary / 2
		for p := 0; p < half; p++ {
			sin, cos := math.Sincos(float64(pos) * math.Pow(10000, -2*float64(p)/float64(rotary)))
			sin, cos = c(sin), c(cos)
			out[p] = r(c(c(h[p]*cos) - c(h[p+half]*sin)))
			out[p+half] = r(c(c(h[p+half]*cos) + c(h[p]*sin)))
		}
		return out
	}
	act := func(g float64) float64 {
		if gemma {
			return c(0.5 * g * c(1+c(math.Tanh(c(math.Sqrt(2/math.Pi)*c(g+0.044715*g*g*g))))))
		}
		return c(g / c(1+c(math.Exp(-g))))
	}
	mlp := func(x []float64, up, upBias, down, downBias []float64, ffn int, fused bool) []float64 {
		gu := matvec(x, up, 2*ffn, upBias, fused)
		h := make([]float64, ffn)
		for j := range h {
			h[j] = r(c(act(gu[j]) * gu[ffn+j]))
		}
		return matvec(h, down, H, downBias, fused)
	}
	var all [][]float64
	for i := 0; i < steps; i++ {
		pos := context + i
		logits := make([]float64, 0, batch*V)
		for b := 0; b < batch; b++ {
			x := make([]float64, H)
			scale := 1.0
			if gemma {
				scale = float64(float32(math.Sqrt(float64(H))))
			}
			for j := range x {
				x[j] = r(emb[int(tokens[i][b])*H+j] * scale)
			}
			qkv := matvec(norm(x, attnNorm), wqkv, nqkv, qkvBias, false)
			head := func(n int) []float64 { return qkv[n*hd : (n+1)*hd] }
			if s.QKNorm == "rms" {
				for n := 0; n < nq+nkv; n++ {
					w := qNorm
					if n >= nq {
						w = kNorm
					}
					copy(head(n), norm(head(n), w))
				}
			}
			for h := 0; h < nkv; h++ {
				at := ((b*nkv+h)*capacity + pos) * hd
				copy(kc[at:at+hd], rope(head(nq+h), pos))
				copy(vc[at:at+hd], head(nq+nkv+h))
			}
			o := make([]float64, nq*hd)
			for hq := 0; hq < nq; hq++ {
				q := rope(head(hq), pos)
				h := hq / (nq / nkv)
				first := 0
				if s.SlidingLayers > 0 {
					first = max(0, pos+1-s.SlidingWindow)
				}
				if s.ChunkedLayers > 0 {
					first = pos / s.AttentionChunk * s.AttentionChunk
				}
				scores := []float64{}
				top := math.Inf(-1)
				for t := first; t <= pos; t++ {
					dot := 0.0
					for e := 0; e < hd; e++ {
						dot = c(dot + q[e]*kc[((b*nkv+h)*capacity+t)*hd+e])
					}
					scores = append(scores, c(dot/math.Sqrt(float64(hd))))
					top = math.Max(top, scores[len(scores)-1])
				}
				if s.AttentionSinks {
					top = math.Max(top, float64(sinks[hq]))
				}
				sum := 0.0
				for j := range scores {
					scores[j] = c(math.Exp(c(scores[j] - top)))
					sum = c(sum + scores[j])
				}
				if s.AttentionSinks {
					sum = c(sum + c(math.Exp(c(float64(sinks[hq])-top))))
				}
				for e := 0; e < hd; e++ {
					acc := 0.0
					for j, t := 0, first; t <= pos; j, t = j+1, t+1 {
						acc = c(acc + c(c(scores[j]/sum)*vc[((b*nkv+h)*capacity+t)*hd+e]))
					}
					o[hq*hd+e] = r(acc)
				}
			}
			var ob []float64
			if s.OProjBias {
				ob = oBias
			}
			y := matvec(o, wo, H, ob, false)
			if s.Family == "gemma3_text" {
				y = norm(y, postAttn)
			}
			res := make([]float64, H)
			for j := range res {
				res[j] = r(c(x[j] + y[j]))
			}
			m := norm(res, mlpNorm)
			var out []float64
			if s.Experts == 0 {
				out = mlp(m, fill(0, TensorGateUp, LinearWeightScale(H), 2*F*H), optional(s.MLPBias, bias(true, 0, TensorGateUpBias, 2*F)),
					fill(0, TensorDown, LinearWeightScale(F), H*F), optional(s.MLPBias, bias(true, 0, TensorDownBias, H)), F, false)
			} else {
				E, K, EF := s.Experts, s.ExpertsPerToken, s.ExpertFFN
				logit := matvec(m, fill(0, TensorRouter, LinearWeightScale(H), E*H), E, optional(s.RouterBias, bias(true, 0, TensorRouterBias, E)), false)
				// the top K, best first, ties to the lower expert
				var picked []int
				for len(picked) < K {
					best := -1
					for e := 0; e < E; e++ {
						if !slices.Contains(picked, e) && (best < 0 || logit[e] > logit[best]) {
							best = e
						}
					}
					picked = append(picked, best)
				}
				denom := 0.0
				for _, e := range picked {
					denom += math.Exp(logit[e] - logit[picked[0]])
				}
				up, down := fill(0, TensorExpertUp, LinearWeightScale(H), E*2*EF*H), fill(0, TensorExpertDown, LinearWeightScale(EF), E*H*EF)
				upBias, downBias := bias(s.MLPBias, 0, TensorExpertUpBias, E*2*EF), bias(s.MLPBias, 0, TensorExpertDownBias, E*H)
				combine := make([]float64, H)
				for _, e := range picked {
					w := float64(float32(math.Exp(logit[e]-logit[picked[0]]) / denom))
					y := mlp(m, up[e*2*EF*H:(e+1)*2*EF*H], upBias[e*2*EF:(e+1)*2*EF], down[e*H*EF:(e+1)*H*EF], downBias[e*H:(e+1)*H], EF, true)
					for j := range combine {
						combine[j] = c(combine[j] + w*y[j])
					}
				}
				out = make([]float64, H)
				for j := range out {
					out[j] = r(combine[j])
				}
				if F > 0 {
					shared := mlp(m, fill(0, TensorSharedUp, LinearWeightScale(H), 2*F*H), optional(s.MLPBias, bias(true, 0, TensorSharedUpBias, 2*F)),
						fill(0, TensorSharedDown, LinearWeightScale(F), H*F), optional(s.MLPBias, bias(true, 0, TensorSharedDownBias, H)), F, false)
					for j := range out {
						out[j] = r(out[j] + shared[j])
					}
				}
			}
			if s.Family == "gemma3_text" {
				out = norm(out, postMLP)
			}
			for j := range res {
				res[j] = r(res[j] + out[j])
			}
			var lb []float64
			if s.LMHeadBias {
				lb = lmBias
			}
			logits = append(logits, matvec(norm(res, finalNorm), lm, V, lb, false)...)
		}
		all = append(all, logits)
	}
	return all
}

// optional is v when on, else nil.
func optional(on bool, v []float64) []float64 {
	if on {
		return v
	}
	return nil
}

// TestForwardHandChecked: the step equals the hand-written loops exactly, logit for logit, in
// two steps (the second reads the first's appended token), for every feature of the step alone
// and some together.
func TestForwardHandChecked(t *testing.T) {
	variants := map[string]func(*model.Shape){
		"plain":         func(s *model.Shape) {},
		"window 2":      func(s *model.Shape) { s.SlidingWindow, s.SlidingLayers = 2, 1 },
		"chunk 2":       func(s *model.Shape) { s.AttentionChunk, s.ChunkedLayers = 2, 1 },
		"sinks":         func(s *model.Shape) { s.AttentionSinks = true },
		"qkv bias":      func(s *model.Shape) { s.AttnBias = true },
		"o bias":        func(s *model.Shape) { s.OProjBias = true },
		"mlp bias":      func(s *model.Shape) { s.MLPBias = true },
		"lm head bias":  func(s *model.Shape) { s.LMHeadBias = true },
		"tied":          func(s *model.Shape) { s.TiedEmbeddings = true },
		"qk norm":       func(s *model.Shape) { s.QKNorm = "rms" },
		"rotary 2 of 4": func(s *model.Shape) { s.RotaryDim = 2 },
		"no rope":       func(s *model.Shape) { s.NoRoPELayers = 1 },
		"mha":           func(s *model.Shape) { s.KVHeads = 2 },
		"gemma":         func(s *model.Shape) { s.Family, s.TiedEmbeddings = "gemma", true },
		"gemma3": func(s *model.Shape) {
			s.Family, s.QKNorm, s.SlidingWindow, s.SlidingLayers = "gemma3_text", "rms", 2, 1
		},
		"moe top 2 of 4": func(s *model.Shape) { s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.FFN = 4, 2, 8, 0 },
		"moe shared, biases": func(s *model.Shape) {
			s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.FFN, s.MLPBias, s.RouterBias = 4, 2, 8, 8, true, true
		},
		"gqa 3, sinks, chunk": func(s *model.Shape) {
			s.QHeads, s.KVHeads, s.AttentionSinks, s.AttentionChunk, s.ChunkedLayers = 6, 2, true, 4, 1
		},
	}
	worst, differ, total := 0.0, 0, 0
	defer func() {
		t.Logf("the fp32 engine differs in %d of %d logits and reaches %.3f of a bound at most", differ, total, worst)
	}()
	for _, wide := range []bool{false, true} {
		for name, change := range variants {
			s := handShape()
			context := 3
			if wide { // hidden 64, vocab 50, 4 query heads of 16 over 2 KV heads
				s.Hidden, s.FFN, s.Vocab, s.HeadDim, s.QHeads, s.KVHeads, context = 64, 128, 50, 16, 4, 2, 30
			}
			change(&s)
			const base, batch, steps = 7, 2, 2
			tokens := [][]int32{FirstTokens(base, batch, s.Vocab), {4, 4}}
			want := handLogits(s, base, batch, context, steps, tokens, false)
			engine := handLogits(s, base, batch, context, steps, tokens, true)
			f, err := NewForward(s, base, batch, context, steps, BF16)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i := 0; i < steps; i++ {
				got, bounds, err := f.Step(tokens[i])
				if err != nil {
					t.Fatal(err)
				}
				lost := f.Lost()
				for j := range got {
					if got[j] != want[i][j] {
						t.Errorf("%s hidden %d: step %d logit %d: forward %g, by hand %g", name, s.Hidden, i, j, got[j], want[i][j])
					}
					if e := math.Abs(engine[i][j] - got[j]); !lost[j/s.Vocab] && !(e <= bounds[j]) {
						t.Errorf("%s: step %d logit %d: the fp32 engine's %g is %g off the reference's %g, bound %g", name, i, j, engine[i][j], e, got[j], bounds[j])
					}
					worst = math.Max(worst, math.Abs(engine[i][j]-got[j])/bounds[j])
					if engine[i][j] != got[j] {
						differ++
					}
					total++
					// a norm over 4 elements (QK-norm here) moves with each of them: wider bounds
					// than at real widths
					if rms := rowRMS(got, s.Vocab, j); !lost[j/s.Vocab] && (!(bounds[j] > 0) || bounds[j] > 0.4*rms) {
						t.Errorf("%s: step %d logit %d = %g: bound %g not in (0, 40%% of the row's rms %g]", name, i, j, got[j], bounds[j], rms)
					}
				}
			}
		}
	}
}

// rowRMS is the root mean square of the row of logits that holds element j.
func rowRMS(logits []float64, vocab, j int) float64 {
	row := logits[j/vocab*vocab:][:vocab]
	sum := 0.0
	for _, v := range row {
		sum += v * v
	}
	return math.Sqrt(sum / float64(vocab))
}

// TestForwardZeroLayers: without layers the step is embedding, final norm and LM head.
func TestForwardZeroLayers(t *testing.T) {
	s := handShape()
	s.Layers = 0
	const base = 3
	f, err := NewForward(s, base, 2, 5, 1, FP16)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{2, 9}
	got, _, err := f.Step(ids)
	if err != nil {
		t.Fatal(err)
	}
	emb := Fill(FP16, TensorSeed(base, -1, TensorEmbedding), UnitScale, s.Vocab*s.Hidden)
	lm := Fill(FP16, TensorSeed(base, -1, TensorLMHead), LinearWeightScale(s.Hidden), s.Vocab*s.Hidden)
	x := append(append([]float32(nil), emb[2*8:3*8]...), emb[9*8:10*8]...)
	norm := RMSNorm(FP16, x, nil, Fill(FP16, TensorSeed(base, -1, TensorFinalNorm), UnitScale, 8), 8, 1e-5, false)
	for b := 0; b < 2; b++ {
		for j := 0; j < s.Vocab; j++ {
			sum := 0.0
			for k := 0; k < 8; k++ {
				sum += float64(Round(FP16, float32(norm.Want[b*8+k]))) * float64(lm[j*8+k])
			}
			if want := float64(Round(FP16, float32(sum))); got[b*s.Vocab+j] != want {
				t.Errorf("sequence %d logit %d: %g, want %g", b, j, got[b*s.Vocab+j], want)
			}
		}
	}
}

// runSteps runs steps teacher-forced on the reference's own greedy tokens.
func runSteps(t *testing.T, f *Forward, base uint64, batch, vocab, steps int) (logits, bounds [][]float64) {
	t.Helper()
	ids := FirstTokens(base, batch, vocab)
	for i := 0; i < steps; i++ {
		l, b, err := f.Step(ids)
		if err != nil {
			t.Fatal(err)
		}
		logits, bounds = append(logits, l), append(bounds, b)
		ids = Greedy(l, vocab)
	}
	return logits, bounds
}

// TestForwardOnlyThroughCache: with a window of one token every step attends to its own token
// only, so the same token at consecutive positions gives the same logits (rotary and the cache
// drop out); with a window of two it reads the previous token from the cache and they differ.
func TestForwardOnlyThroughCache(t *testing.T) {
	for _, window := range []int{1, 2} {
		s := tinyShape("llama", "cache", 64, 64, 2, 2, 1, 64, 40, false)
		s.SlidingWindow, s.SlidingLayers = window, 2
		f, err := NewForward(s, 11, 2, 6, 3, BF16)
		if err != nil {
			t.Fatal(err)
		}
		ids := []int32{5, 17}
		first, _, _ := f.Step(ids)
		second, _, _ := f.Step(ids)
		same := true
		for i := range first {
			same = same && first[i] == second[i]
		}
		if same != (window == 1) {
			t.Errorf("window %d: the repeated token's logits identical = %v", window, same)
		}
	}
}

func largestDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// TestForwardFeaturesMatter: every feature, toggled alone on a base model, moves the logits.
func TestForwardFeaturesMatter(t *testing.T) {
	base := func() model.Shape {
		s := tinyShape("llama", "base", 64, 64, 2, 4, 2, 64, 48, false)
		return s
	}
	moe := func(s model.Shape) model.Shape {
		s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.FFN = 4, 2, 32, 0
		return s
	}
	toggles := map[string]func(*model.Shape){
		"tied":          func(s *model.Shape) { s.TiedEmbeddings = true },
		"qkv bias":      func(s *model.Shape) { s.AttnBias = true },
		"o bias":        func(s *model.Shape) { s.OProjBias = true },
		"mlp bias":      func(s *model.Shape) { s.MLPBias = true },
		"lm head bias":  func(s *model.Shape) { s.LMHeadBias = true },
		"qk norm":       func(s *model.Shape) { s.QKNorm = "rms" },
		"partial rope":  func(s *model.Shape) { s.RotaryDim = 32 },
		"no rope layer": func(s *model.Shape) { s.NoRoPELayers = 1 },
		"window":        func(s *model.Shape) { s.SlidingWindow, s.SlidingLayers = 4, 1 },
		"chunk":         func(s *model.Shape) { s.AttentionChunk, s.ChunkedLayers = 4, 1 },
		"sinks":         func(s *model.Shape) { s.AttentionSinks = true },
		"mqa":           func(s *model.Shape) { s.KVHeads = 1 },
		"gemma":         func(s *model.Shape) { s.Family = "gemma" },
		"gemma3 norms":  func(s *model.Shape) { s.Family = "gemma3_text" },
		"moe":           func(s *model.Shape) { *s = moe(*s) },
	}
	moeToggles := map[string]func(*model.Shape){
		"router bias":    func(s *model.Shape) { s.RouterBias = true },
		"shared experts": func(s *model.Shape) { s.FFN = 32 },
		"dense layer":    func(s *model.Shape) { s.DenseLayers, s.DenseFFN = 1, 64 },
		"expert bias":    func(s *model.Shape) { s.MLPBias = true },
		"top 3":          func(s *model.Shape) { s.ExpertsPerToken = 3 },
		"no renorm":      nil, // below: qwen3_moe renormalises like Mixtral, so nothing to toggle by family
	}
	run := func(s model.Shape) []float64 {
		f, err := NewForward(s, 5, 2, 9, 2, BF16)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		l, _ := runSteps(t, f, 5, 2, s.Vocab, 2)
		return append(l[0], l[1]...)
	}
	check := func(start model.Shape, name string, toggle func(*model.Shape)) {
		s := start
		toggle(&s)
		if d := largestDiff(run(start), run(s)); !(d > 0) {
			t.Errorf("%s: the logits do not change (max difference %g)", name, d)
		}
	}
	for name, toggle := range toggles {
		check(base(), name, toggle)
	}
	for name, toggle := range moeToggles {
		if toggle != nil {
			check(moe(base()), name, toggle)
		}
	}
	// the window and chunk toggles above must cut the context: 9 + 2 tokens > 4
	s := base()
	s.SlidingWindow, s.SlidingLayers = 11, 2
	if d := largestDiff(run(base()), run(s)); d != 0 {
		t.Errorf("a window as long as the whole context changes the logits by %g", d)
	}
}

// TestForwardDeterministic: the same inputs give the same logits and bounds; another base
// seed gives other logits.
func TestForwardDeterministic(t *testing.T) {
	m := TinyModels()[0]
	run := func(base uint64) ([]float64, []float64) {
		f, err := NewForward(m.Shape, base, m.Batch, m.Context, 2, BF16)
		if err != nil {
			t.Fatal(err)
		}
		l, b := runSteps(t, f, base, m.Batch, m.Shape.Vocab, 2)
		return l[1], b[1]
	}
	l1, b1 := run(1)
	l2, b2 := run(1)
	l3, _ := run(2)
	if largestDiff(l1, l2) != 0 || largestDiff(b1, b2) != 0 {
		t.Error("two runs of the same step differ")
	}
	if largestDiff(l1, l3) == 0 {
		t.Error("base seeds 1 and 2 give the same logits")
	}
}

// TestForwardBadInput: each refused value or feature is named in the error.
func TestForwardBadInput(t *testing.T) {
	good := handShape()
	with := func(change func(*model.Shape)) model.Shape {
		s := good
		change(&s)
		return s
	}
	cases := []struct {
		shape                 model.Shape
		batch, context, steps int
		d                     DType
		want                  string
	}{
		{good, 0, 4, 2, BF16, "batch 0"},
		{good, 1025, 4, 2, BF16, "batch 1025"},
		{good, 1, 4, 0, BF16, "steps 0"},
		{good, 1, -1, 2, BF16, "context -1"},
		{good, 1, math.MaxInt32, 2, BF16, "context 2147483647"},
		{good, 1, 4, 2, F32, "dtype f32"},
		{with(func(s *model.Shape) { s.KVHeads = 2; s.KVLoRARank, s.RoPEHeadDim, s.VHeadDim = 16, 2, 4 }), 1, 4, 2, BF16, "multi-head latent attention"},
		{with(func(s *model.Shape) { s.Family = "gemma2" }), 1, 4, 2, BF16, "soft-capping"},
		{with(func(s *model.Shape) { s.NormBias = true }), 1, 4, 2, BF16, "NormBias"},
		{with(func(s *model.Shape) { s.GatedMLP = false }), 1, 4, 2, BF16, "non-gated MLP"},
		{with(func(s *model.Shape) { s.Quant = &model.Quantization{Method: "fp8", Bits: 8, BlockN: 64, BlockK: 64} }), 1, 4, 2, BF16, "64x64 block scales"},
		{with(func(s *model.Shape) {
			s.Family, s.FFN, s.Experts, s.ExpertsPerToken, s.ExpertFFN = "phimoe", 8, 4, 1, 8
		}), 1, 4, 2, BF16, "sparsemixer"},
		{with(func(s *model.Shape) {
			s.FFN, s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.RouterScoring, s.ExpertGroups, s.GroupsKept = 8, 4, 1, 8, "sigmoid", 4, 1
		}), 1, 4, 2, BF16, "ExpertGroups = 4"},
		{with(func(s *model.Shape) { s.RotaryDim = 3 }), 1, 4, 2, BF16, "rotary_dim 3"},
		{with(func(s *model.Shape) { s.Layers = -1 }), 1, 4, 2, BF16, "Layers = -1"},
		{with(func(s *model.Shape) { s.Hidden, s.FFN = 1<<14, 1<<16 }), 1, 4, 2, BF16, "float64 reference holds"}, // 3.2G elements a layer
	}
	for _, c := range cases {
		_, err := NewForward(c.shape, 1, c.batch, c.context, c.steps, c.d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
	f, err := NewForward(good, 1, 2, 4, 1, BF16)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tokens []int32
		want   string
	}{{[]int32{1}, "1 tokens for a batch of 2"}, {[]int32{1, 11}, "token 11 of sequence 1"}, {[]int32{-1, 0}, "token -1"}} {
		if _, _, err := f.Step(c.tokens); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
	if _, _, err := f.Step([]int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Step([]int32{1, 2}); err == nil || !strings.Contains(err.Error(), "holds 1 steps") {
		t.Errorf("a step past the cache: %v", err)
	}
}

// TestTinyModels: every tiny model is valid, shaped as the kernels take it, and cuts its
// context with its window or chunk.
func TestTinyModels(t *testing.T) {
	names := map[string]bool{}
	for _, m := range TinyModels() {
		s := m.Shape
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
		if _, err := ArchOf(s); err != nil {
			t.Error(err)
		}
		if names[s.Name] {
			t.Errorf("%s twice", s.Name)
		}
		names[s.Name] = true
		for _, n := range []int{s.Hidden, s.FFN, s.ExpertFFN, s.DenseFFN, s.HeadDim, s.Vocab} {
			if n%8 != 0 {
				t.Errorf("%s: a row of %d is not a multiple of 8", s.Name, n)
			}
		}
		if s.Hidden > 256 || (s.HeadDim != 64 && s.HeadDim != 80 && s.HeadDim != 96 && s.HeadDim != 128 && s.HeadDim != 256) {
			t.Errorf("%s: hidden %d, head dim %d", s.Name, s.Hidden, s.HeadDim)
		}
		if (s.SlidingWindow > 0 && s.SlidingWindow >= m.Context) || (s.AttentionChunk > 0 && s.AttentionChunk >= m.Context) {
			t.Errorf("%s: the span is not shorter than the context %d", s.Name, m.Context)
		}
	}
}

// adversarial makes f an engine that errs at every op by a uniform draw over the whole fp32
// part of that op's kernel bound.
func adversarial(f *Forward, seed uint64) {
	var n uint64
	f.noise = func() float64 {
		n++
		return float64(HashUniform(seed, n))
	}
}

// TestForwardBoundsHold: on every tiny model, in bf16 and fp16, an adversarial engine's logits
// stay within the reference's bounds (those of sequences whose routing was decided), its greedy
// tokens agree where Decided says they must, and the bounds are tight enough to mean something.
func TestForwardBoundsHold(t *testing.T) {
	testtier.Slow(t, "float64 forward passes against perturbed ones over every tiny model")
	for _, m := range TinyModels() {
		for _, d := range []DType{BF16, FP16} {
			s := m.Shape
			const base = 42
			ref, err := NewForward(s, base, m.Batch, m.Context, m.Steps, d)
			if err != nil {
				t.Fatal(err)
			}
			eng, _ := NewForward(s, base, m.Batch, m.Context, m.Steps, d)
			adversarial(eng, 9)
			ids := FirstTokens(base, m.Batch, s.Vocab)
			worst, rel, decided, total := 0.0, 0.0, 0, 0
			for i := 0; i < m.Steps; i++ {
				got, _, _ := eng.Step(ids)
				want, bounds, err := ref.StepRouted(ids, eng.Routes()) // the engine's experts too
				if err != nil {
					t.Fatalf("%s %v step %d: %v", s.Name, d, i, err)
				}
				for j := range want {
					if math.IsInf(bounds[j], 1) {
						continue
					}
					if e := math.Abs(got[j] - want[j]); !(e <= bounds[j]) {
						t.Errorf("%s %v step %d logit %d: engine %g, reference %g, bound %g", s.Name, d, i, j, got[j], want[j], bounds[j])
					} else {
						worst = math.Max(worst, e/bounds[j])
					}
					rel = math.Max(rel, bounds[j]/rowRMS(want, s.Vocab, j))
				}
				ok := Decided(want, bounds, s.Vocab)
				gr, ge := Greedy(want, s.Vocab), Greedy(got, s.Vocab)
				for b := range ok {
					total++
					if ok[b] {
						decided++
						if gr[b] != ge[b] {
							t.Errorf("%s %v step %d sequence %d: decided token %d, engine %d", s.Name, d, i, b, gr[b], ge[b])
						}
					}
				}
				ids = ge // teacher forcing: the engine's tokens
			}
			t.Logf("%-22s %v: worst |engine-ref|/bound %.3f, largest bound/rms(logits) %.4f, %d of %d tokens decided",
				s.Name, d, worst, rel, decided, total)
			for b, l := range ref.Lost() {
				if l {
					t.Errorf("%s %v: sequence %d lost to routing though the engine's experts were followed", s.Name, d, b)
				}
			}
			if limit := map[DType]float64{BF16: 0.25, FP16: 0.04}[d]; rel > limit {
				t.Errorf("%s %v: a bound of %.3f of the logits' rms is too loose to catch a bug (limit %g)", s.Name, d, rel, limit)
			}
		}
	}
}

// TestForwardRouting: a plain Step loses a sequence only to a close routing decision, and
// StepRouted follows an admissible choice and refuses others, naming them.
func TestForwardRouting(t *testing.T) {
	m := TinyModels()[4] // Mixtral-like, top 2 of 4
	if !m.Shape.IsMoE() {
		t.Fatalf("%s is not a mixture of experts", m.Shape.Name)
	}
	const base = 42
	ids := FirstTokens(base, m.Batch, m.Shape.Vocab)
	f, _ := NewForward(m.Shape, base, m.Batch, m.Context, m.Steps, BF16)
	if _, _, err := f.Step(ids); err != nil {
		t.Fatal(err)
	}
	own := f.Routes()
	if len(own) != m.Shape.Layers || len(own[0]) != m.Batch*2 {
		t.Fatalf("routes %v: want %d layers of %d", own, m.Shape.Layers, m.Batch*2)
	}
	g, _ := NewForward(m.Shape, base, m.Batch, m.Context, m.Steps, BF16)
	if _, _, err := g.StepRouted(ids, own); err != nil {
		t.Fatalf("the reference's own experts refused: %v", err)
	}
	for _, c := range []struct {
		routes map[int][]int32
		want   string
	}{
		{map[int][]int32{0: {0, 0, 1, 2, 1, 2}}, "not 2 distinct experts"},
		{map[int][]int32{0: {0, 1}}, "2 routed experts for a batch of 3"},
		{map[int][]int32{5: own[0]}, "layer 5, which does not route"},
	} {
		h, _ := NewForward(m.Shape, base, m.Batch, m.Context, m.Steps, BF16)
		if _, _, err := h.StepRouted(ids, c.routes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
	// the two experts the reference ranks last, for every sequence: refused unless all four
	// logits sit within their bounds of each other
	worst := map[int][]int32{0: make([]int32, m.Batch*2)}
	for b := 0; b < m.Batch; b++ {
		chosen := map[int32]bool{own[0][2*b]: true, own[0][2*b+1]: true}
		j := 0
		for x := int32(0); x < 4; x++ {
			if !chosen[x] {
				worst[0][2*b+j] = x
				j++
			}
		}
	}
	h, _ := NewForward(m.Shape, base, m.Batch, m.Context, m.Steps, BF16)
	if _, _, err := h.StepRouted(ids, worst); err == nil || !strings.Contains(err.Error(), "not a top 2") {
		t.Errorf("the reference's last two experts followed: %v", err)
	}
}

// TestForwardLostRouting: where an engine (the adversarial one, its errors tripled so that
// some routings do flip) chose other experts than the reference, the reference has marked the
// sequence lost.
func TestForwardLostRouting(t *testing.T) {
	for _, i := range []int{6, 9, 12} { // Qwen3-MoE-like top 2 of 8; DeepSeek-like groups; Llama-4-like top 1
		m := TinyModels()[i]
		t.Run(m.Shape.Name, func(t *testing.T) { lostRouting(t, m) })
	}
}

func lostRouting(t *testing.T, m TinyModel) {
	s, batch := m.Shape, 64
	const base = 5
	ref, _ := NewForward(s, base, batch, m.Context, 2, BF16)
	eng, _ := NewForward(s, base, batch, m.Context, 2, BF16)
	adversarial(eng, 3)
	noise := eng.noise
	eng.noise = func() float64 { return 3 * noise() }
	ids := FirstTokens(base, batch, s.Vocab)
	flips, k := 0, s.ExpertsPerToken
	for i := 0; i < 2; i++ {
		eng.Step(ids)
		want, _, err := ref.Step(ids)
		if err != nil {
			t.Fatal(err)
		}
		for l, r := range eng.Routes() {
			o := ref.Routes()[l]
			for b := 0; b < batch; b++ {
				a, c := slices.Clone(r[b*k:(b+1)*k]), slices.Clone(o[b*k:(b+1)*k])
				slices.Sort(a)
				slices.Sort(c)
				if !slices.Equal(a, c) {
					flips++
					if !ref.Lost()[b] {
						t.Errorf("step %d layer %d sequence %d: the engine chose experts %v, the reference %v, yet the sequence is not lost", i, l, b, a, c)
					}
				}
			}
		}
		ids = Greedy(want, s.Vocab)
	}
	lost := 0
	for _, l := range ref.Lost() {
		if l {
			lost++
		}
	}
	t.Logf("%d routings flipped; %d of %d sequences lost", flips, lost, batch)
	if flips == 0 {
		t.Error("no routing flipped: the test checks nothing")
	}
}

// TestDecided: a clear top logit is decided, a close second or a wide bound is not.
func TestDecided(t *testing.T) {
	logits := []float64{1, 3, 2, 5, 5, 0}
	bounds := []float64{0.1, 0.4, 0.4, 0.1, 0.1, 0.1}
	got := Decided(logits, bounds, 3)
	if !got[0] || got[1] {
		t.Errorf("Decided = %v, want [true false]", got)
	}
	if g := Greedy(logits, 3); g[0] != 1 || g[1] != 0 {
		t.Errorf("Greedy = %v, want [1 0] (lowest index on a tie)", g)
	}
	if Decided([]float64{1, 3, 2}, []float64{0.1, 0.6, 0.5}, 3)[0] {
		t.Error("3 - 0.6 <= 2 + 0.5 yet decided")
	}
}
