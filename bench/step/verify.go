package step

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// The whole step is checked against bench/ref's float64 forward pass before it is timed, at
// a configuration the CPU can afford (VerifyConfig): the first layer of each distinct kind,
// at the full batch on the device (so its linears and attention take the same kernels as the
// timed step) but only the first VerifySequences sequences recomputed (a sequence of the
// batch is the same at any batch: the caches are filled batch-major), the context capped at
// VerifyContext, and VerifySteps steps (the second reads the first one's appended KV and, in
// graph mode, the positions the step advanced on the device). Measured on 2 shared cores
// (2026-12): the forward pass of one Llama-3-8B layer with its 128256-token LM head takes
// 2 s to fill and 5.5 s a step a sequence; one Llama-3-70B layer 17 s and 16-32 s.
const (
	VerifySequences = 2
	VerifySteps     = 2
	VerifyContext   = 4096
)

// Verification is how a configuration's step was checked before it was timed: at which
// sizes, in which modes, and what it found. A step that fails it is never timed.
type Verification struct {
	Verified bool   `json:"verified"`
	Reason   string `json:"reason,omitempty"` // why not
	Modes    []Mode `json:"modes,omitempty"`  // the modes whose steps were checked
	// The configuration checked: Layers of the model's (the first of each kind), the device's
	// Batch of which Sequences were recomputed, Context cached tokens, Steps steps.
	Layers      int `json:"layers"`
	ModelLayers int `json:"model_layers"`
	Batch       int `json:"batch"`
	Sequences   int `json:"sequences"`
	Context     int `json:"context"`
	Steps       int `json:"steps"`
	// Logits compared (those of a sequence whose routing the reference could not call are
	// left out), Greedy tokens whose choice the bounds decide, all equal when verified.
	Logits int `json:"logits"`
	Greedy int `json:"greedy"`
	// MaxError is the largest |device - reference| of a compared logit, Bound that logit's
	// bound (bench/ref.Forward's BoundSigmas sigmas), MaxBoundShare the largest error / bound.
	MaxError      float64 `json:"max_error"`
	Bound         float64 `json:"bound"`
	MaxBoundShare float64 `json:"max_bound_share"`
	// Unchecked lists the kernel instances the timed step plans that the checked one does not
	// launch (an attention split only past the checked context, say): empty when the check
	// ran every kernel the timed step runs.
	Unchecked []string `json:"unchecked,omitempty"`
	// FirstBad is the first logit out of its bound, or the first wrong greedy token.
	FirstBad *BadLogit `json:"first_bad,omitempty"`
	Seconds  float64   `json:"seconds"` // the check's wall time, device and reference
}

// BadLogit is where a step first disagreed with the reference.
type BadLogit struct {
	Mode     Mode    `json:"mode"`
	Step     int     `json:"step"`
	Sequence int     `json:"sequence"`
	Index    int     `json:"index"` // the token of the vocabulary
	Got      float64 `json:"got"`
	Want     float64 `json:"want"`
	Bound    float64 `json:"bound"`
	// Token: a wrong greedy choice (Got, Want are then the two tokens' reference logits).
	Token bool `json:"token,omitempty"`
}

func (b BadLogit) String() string {
	if b.Token {
		return fmt.Sprintf("%s step %d sequence %d: the device chose token %d, the reference's %d wins by more than the bounds",
			b.Mode, b.Step, b.Sequence, int(b.Got), int(b.Want))
	}
	return fmt.Sprintf("%s step %d sequence %d logit %d: got %.6g, want %.6g (bound %.3g)", b.Mode, b.Step, b.Sequence, b.Index, b.Got, b.Want, b.Bound)
}

// How says in one line what was checked: "verified: 1 of 32 layers, 2 of 8 sequences, context
// 1024, 2 steps, graph+eager; max error 0.012 (bound 0.05)".
func (v Verification) How() string {
	if len(v.Modes) == 0 {
		return "not verified: " + v.Reason
	}
	modes := ""
	for i, m := range v.Modes {
		if i > 0 {
			modes += "+"
		}
		modes += string(m)
	}
	how := fmt.Sprintf("%d of %d layers, %d of %d sequences, context %d, %d steps, %s", v.Layers, v.ModelLayers, v.Sequences, v.Batch, v.Context, v.Steps, modes)
	if !v.Verified {
		return "NOT VERIFIED (" + how + "): " + v.Reason
	}
	s := fmt.Sprintf("verified: %s; %d logits, max error %.3g (bound %.3g), %d greedy tokens", how, v.Logits, v.MaxError, v.Bound, v.Greedy)
	if len(v.Unchecked) > 0 {
		s += fmt.Sprintf("; not launched by the check: %s", strings.Join(v.Unchecked, ", "))
	}
	return s
}

// Short says it in a table cell: "yes: 1/32 layers, 2/8 seq, S=1024, 2 steps", "NO" (the
// step disagreed) or "-" (not run).
func (v Verification) Short() string {
	switch {
	case v.Verified && len(v.Unchecked) > 0:
		return fmt.Sprintf("yes: %d/%d layers, %d/%d seq, S=%d, %d steps; unchecked: %s", v.Layers, v.ModelLayers, v.Sequences, v.Batch, v.Context, v.Steps, strings.Join(v.Unchecked, ", "))
	case v.Verified:
		return fmt.Sprintf("yes: %d/%d layers, %d/%d seq, S=%d, %d steps", v.Layers, v.ModelLayers, v.Sequences, v.Batch, v.Context, v.Steps)
	case v.FirstBad != nil:
		return "NO"
	}
	return "-"
}

// VerifyConfig is the configuration c's step is checked at, and how many of its sequences
// are recomputed (see VerifySequences).
func VerifyConfig(c Config) (Config, int) {
	v := c
	v.Model = verifyShape(c.Model)
	v.Steps = min(c.Steps, VerifySteps)
	span := 0
	for l := 0; l < v.Model.Layers; l++ {
		ly := v.Model.Layer(l)
		span = max(span, ly.Window, ly.Chunk)
	}
	// A window or chunk must end inside the checked context, or the span never bites.
	v.Context = min(c.Context, max(VerifyContext, span+v.Steps+1))
	return v, min(c.Batch, VerifySequences)
}

// layerKind is a layer without its index.
func layerKind(l model.Layer) model.Layer { l.Index = 0; return l }

// verifyShape is s with the fewest layers that still holds every kind of layer s has (window,
// chunk, rotary, dense or experts): each count of layers scaled down, none dropped to zero
// nor raised to all. A dense model keeps one layer.
func verifyShape(s model.Shape) model.Shape {
	kinds := map[model.Layer]bool{}
	for l := 0; l < s.Layers; l++ {
		kinds[layerKind(s.Layer(l))] = true
	}
	scale := func(count, n int) int {
		switch {
		case count <= 0:
			return 0
		case count >= s.Layers:
			return n
		}
		return min(max(count*n/s.Layers, 1), n-1)
	}
	for n := 1; n < s.Layers; n++ {
		r := s
		r.Layers = n
		r.SlidingLayers, r.ChunkedLayers = scale(s.SlidingLayers, n), scale(s.ChunkedLayers, n)
		r.NoRoPELayers, r.DenseLayers = scale(s.NoRoPELayers, n), scale(s.DenseLayers, n)
		if r.Validate() != nil {
			continue
		}
		have := map[model.Layer]bool{}
		for l := 0; l < n; l++ {
			have[layerKind(r.Layer(l))] = true
		}
		covered := true
		for k := range kinds {
			covered = covered && have[k]
		}
		if covered {
			return r
		}
	}
	return s
}

// referenceStep is one step the forward pass computed: what it was fed and what it gave.
type referenceStep struct {
	tokens         []int32
	routes         map[int][]int32
	logits, bounds []float64
}

// checker compares traces of one configuration with the forward pass of its first seqs
// sequences; a second trace fed the same tokens (graph after eager) reuses the first's steps.
type checker struct {
	c    Config
	seqs int
	d    ref.DType
	f    *ref.Forward
	done []referenceStep
	v    *Verification
}

func newChecker(c Config, d cgo.DType, seqs int, v *Verification) *checker {
	rd := ref.BF16
	if d == cgo.DTypeFP16 {
		rd = ref.FP16
	}
	return &checker{c: c, seqs: seqs, d: rd, v: v}
}

// reference gives step i's logits and bounds for tokens and routes, from the steps done when
// they were fed the same, else from a new forward pass replayed to step i.
func (k *checker) reference(i int, tokens []int32, routes map[int][]int32) ([]float64, []float64, error) {
	if i < len(k.done) && slices.Equal(k.done[i].tokens, tokens) && sameRoutes(k.done[i].routes, routes) {
		return k.done[i].logits, k.done[i].bounds, nil
	}
	if k.f == nil || i != len(k.done) {
		k.done = k.done[:i] // steps 0..i-1 were fed what this trace fed them
		f, err := ref.NewForward(k.c.Model, k.c.Seed, k.seqs, k.c.Context, k.c.Steps, k.d)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range k.done {
			if _, _, err := f.StepRouted(s.tokens, s.routes); err != nil {
				return nil, nil, err
			}
		}
		k.f = f
	}
	logits, bounds, err := k.f.StepRouted(tokens, routes)
	if err != nil {
		return nil, nil, err
	}
	k.done = append(k.done, referenceStep{tokens, routes, logits, bounds})
	return logits, bounds, nil
}

func sameRoutes(a, b map[int][]int32) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for l, r := range a {
		if !slices.Equal(r, b[l]) {
			return false
		}
	}
	return true
}

// check compares tr with the forward pass, teacher-forced with the device's tokens (and, in an
// eager trace of a mixture of experts, its experts): every logit inside its bound (ref.Compare),
// every greedy token the bounds decide the reference's. It fills v's counts and its first bad
// logit; ok is false when the step is wrong, err when the reference could not run.
func (k *checker) check(tr Trace) (ok bool, err error) {
	V, n := k.c.Model.Vocab, k.seqs
	v := k.v
	for i := range tr.Tokens {
		var routes map[int][]int32
		if i < len(tr.Routes) {
			routes = map[int][]int32{}
			for l, r := range tr.Routes[i] {
				routes[l] = r[:n*k.c.Model.ExpertsPerToken]
			}
		}
		want, bounds, err := k.reference(i, tr.Tokens[i][:n], routes)
		if err != nil {
			return false, fmt.Errorf("the float64 forward pass, step %d: %w", i, err)
		}
		logits := LogitsOf(dtypeOf(k.c.Model), tr.Logits[i][:n*V])
		got := make([]float32, len(logits))
		for j, x := range logits {
			got[j] = float32(x)
		}
		cmp := ref.Compare(got, want, bounds, math.Inf(1))
		for j := range got {
			if math.IsInf(bounds[j], 1) {
				continue // a routing decision too close to call: the reference lost the sequence
			}
			v.Logits++
			d := math.Abs(logits[j] - want[j])
			if d > v.MaxError || v.Logits == 1 {
				v.MaxError, v.Bound = d, bounds[j]
			}
			if bounds[j] > 0 {
				v.MaxBoundShare = max(v.MaxBoundShare, d/bounds[j])
			}
		}
		if !cmp.Passed {
			e := cmp.Mismatches[0]
			v.FirstBad = &BadLogit{Mode: tr.Mode, Step: i, Sequence: e.Index / V, Index: e.Index % V, Got: float64(e.Got), Want: e.Want, Bound: e.Bound}
			v.Reason = fmt.Sprintf("%d of %d logits outside their bounds; first: %s", cmp.OutOfBound, cmp.Count, v.FirstBad)
			return false, nil
		}
		greedy := ref.Greedy(want, V)
		for b, decided := range ref.Decided(want, bounds, V) {
			if !decided {
				continue
			}
			v.Greedy++
			if got := tr.Next[i][b]; got != greedy[b] {
				v.FirstBad = &BadLogit{Mode: tr.Mode, Step: i, Sequence: b, Index: int(got), Got: float64(got), Want: float64(greedy[b]), Token: true}
				v.Reason = v.FirstBad.String()
				return false, nil
			}
		}
	}
	return true, nil
}

// Verify runs c's verification configuration in each mode untimed and checks it against the
// forward pass. It gives the verification and, for each mode it could not run, the error
// (a mode the library lacks is skipped by statusOf, as when timing).
func Verify(dev Device, c Config, modes []Mode) (v Verification, modeErrs map[Mode]error) {
	started := time.Now()
	vc, seqs := VerifyConfig(c)
	v = Verification{ModelLayers: c.Model.Layers, Layers: vc.Model.Layers, Batch: vc.Batch, Sequences: seqs, Context: vc.Context, Steps: vc.Steps}
	defer func() { v.Seconds = time.Since(started).Seconds() }()
	modeErrs = map[Mode]error{}
	if _, err := ref.ArchOf(vc.Model); err != nil {
		v.Reason = "the float64 forward pass cannot check it: " + err.Error()
		return v, modeErrs
	}
	p, err := New(vc)
	if err != nil {
		v.Reason = err.Error()
		return v, modeErrs
	}
	if full, err := New(c); err == nil {
		if u, err := uncovered(dev, full, p); err == nil { // a call that cannot plan fails Open below
			v.Unchecked = u
		}
	}
	e, err := Open(dev, p)
	if err != nil {
		v.Reason = "opening the checked step: " + err.Error()
		for _, m := range modes {
			modeErrs[m] = err
		}
		return v, modeErrs
	}
	defer e.Close()
	k := newChecker(vc, p.DType, seqs, &v)
	for _, m := range modes {
		tr, err := e.Trace(m)
		if err != nil {
			modeErrs[m] = err
			continue
		}
		ok, err := k.check(tr)
		if err != nil {
			v.Reason = err.Error()
			return v, modeErrs
		}
		v.Modes = append(v.Modes, m)
		if !ok {
			return v, modeErrs
		}
	}
	switch {
	case len(v.Modes) == 0:
		v.Reason = "no mode ran"
	case v.Logits == 0:
		v.Reason = "no logit could be checked: the reference lost every sequence to routing decisions too close to call"
	default:
		v.Verified = true
	}
	return v, modeErrs
}
