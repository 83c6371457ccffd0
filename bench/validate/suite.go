package validate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// Step is one measurement of a suite: a name and the one measure.Spec it runs. The suite's
// steps are bf16, their kernel variant and split count left to the library, their attention
// over a contiguous KV cache with every sequence at one context.
type Step struct {
	Name string       `json:"name"`
	Spec measure.Spec `json:"spec"`
}

// String describes what the step runs, for messages and the report's kernel field.
func (s Step) String() string {
	sp := s.Spec
	switch {
	case sp.Kind == measure.KindProbe && sp.Probe != nil:
		p := sp.Probe
		switch {
		case p.Kind == cgo.ProbeRead && p.Bytes >= 1e9:
			return fmt.Sprintf("read probe over %.3g GB", float64(p.Bytes)/1e9)
		case p.Kind == cgo.ProbeRead && p.Bytes > 0:
			return fmt.Sprintf("read probe over %.3g MB", float64(p.Bytes)/1e6)
		case p.Kind == cgo.ProbeMMABF16:
			return "mma.sync bf16 ceiling probe"
		}
		return p.Kind.String() + " probe"
	case sp.Kind == measure.KindLinear && sp.Linear != nil:
		l := sp.Linear
		return fmt.Sprintf("%s linear, batch %d, N %d, K %d", l.DType, l.Batch, l.N, l.K)
	case sp.Kind == measure.KindAttention && sp.Attention != nil:
		a := sp.Attention
		ctx := make([]string, len(a.Contexts))
		for i, n := range a.Contexts {
			ctx[i] = strconv.Itoa(n)
		}
		return fmt.Sprintf("%s decode attention, batch %d, %d/%d heads of %d, context %s", a.DType, a.Batch, a.QHeads, a.KVHeads, a.HeadDim, strings.Join(ctx, ","))
	}
	return s.Name
}

// linearStep is the suite's linear layer Y[batch x n] = X[batch x k] W^T.
func linearStep(batch, n, k int) measure.LinearSpec {
	return measure.LinearSpec{Batch: batch, N: n, K: k, DType: cgo.DTypeBF16, Variant: cgo.LinearAuto}
}

// attentionStep is the suite's decode attention, every sequence at context tokens.
func attentionStep(batch, qHeads, kvHeads, headDim, context int) measure.AttentionSpec {
	return measure.AttentionSpec{Batch: batch, QHeads: qHeads, KVHeads: kvHeads, HeadDim: headDim,
		Contexts: []int{context}, DType: cgo.DTypeBF16, Variant: cgo.AttentionAuto}
}

// Suite is the fixed set of measurements validate runs on every card.
type Suite struct {
	Name   string        `json:"name"`
	Timing timing.Config `json:"timing"`
	// Budget bounds one card's measurements: steps not started by then are skipped (and their
	// gates fail), so a box never takes much longer than the suite promises.
	Budget time.Duration `json:"budget_ns"`

	Read          measure.ProbeSpec     `json:"read"`
	Tensor        measure.ProbeSpec     `json:"tensor"`
	LinearBatch1  measure.LinearSpec    `json:"linear_batch1"`
	AttentionLong measure.AttentionSpec `json:"attention_long"`
	// Model is the reference model whose batch-1 decode step at ModelContext gives the
	// model_step gate: the sum over Model.Kernels of each kernel's median time x its repeats.
	Model        model.Shape `json:"model"`
	ModelContext int         `json:"model_context"`
}

// Step names of the gates' own measurements.
const (
	StepRead          = "read_probe"
	StepTensor        = "tensor_probe"
	StepLinearBatch1  = "linear_batch1"
	StepAttentionLong = "attention_long"
)

// ModelKernel is one kernel of the reference step: the step that measures it and how many times
// a step launches it.
type ModelKernel struct {
	Kernel string  `json:"kernel"` // bench/model's name: "qkv_proj", "attention", ...
	Step   string  `json:"step"`
	Repeat float64 `json:"repeat"`
}

// Plan is a suite laid out as distinct steps, with the reference model's kernels mapped to them
// (a model kernel of the same shape as a gate's reuses its measurement).
type Plan struct {
	Steps        []Step        `json:"steps"`
	ModelKernels []ModelKernel `json:"model_kernels"`
}

// Plan lays the suite out.
func (s Suite) Plan() (Plan, error) {
	if err := s.Model.Validate(); err != nil {
		return Plan{}, fmt.Errorf("suite %s: reference model: %w", s.Name, err)
	}
	if s.Model.WeightDType != model.BF16 || s.Model.KVDType != model.BF16 {
		return Plan{}, fmt.Errorf("suite %s: reference model %s: the suite runs bf16 kernels, not %s weights with a %s KV cache",
			s.Name, s.Model, s.Model.WeightDType, s.Model.KVDType)
	}
	p := Plan{Steps: []Step{
		{Name: StepRead, Spec: s.Read.Spec()},
		{Name: StepTensor, Spec: s.Tensor.Spec()},
		{Name: StepLinearBatch1, Spec: s.LinearBatch1.Spec()},
		{Name: StepAttentionLong, Spec: s.AttentionLong.Spec()},
	}}
	for _, k := range s.Model.Kernels(1, s.ModelContext) {
		st := Step{Name: "model." + k.Name}
		switch k.Kind {
		case model.KindLinear:
			st.Spec = linearStep(k.M, k.N, k.K).Spec()
		case model.KindAttention:
			st.Spec = attentionStep(k.Batch, k.QHeads, k.KVHeads, k.HeadDim, k.Context).Spec()
		default:
			return Plan{}, fmt.Errorf("suite %s: reference model kernel %s of kind %q", s.Name, k.Name, k.Kind)
		}
		name := st.Name
		for _, existing := range p.Steps {
			if existing.Spec.Key() == st.Spec.Key() {
				name = existing.Name
				break
			}
		}
		if name == st.Name {
			p.Steps = append(p.Steps, st)
		}
		p.ModelKernels = append(p.ModelKernels, ModelKernel{Kernel: k.Name, Step: name, Repeat: k.Repeat})
	}
	return p, nil
}

// Suite names.
const (
	SuiteStandard = "standard"
	SuiteEmu      = "emu"
	SuiteTiny     = "tiny"
)

// StandardSuite is the default: gates sized for today's data-centre cards, a Llama-3-8B step
// as the reference, within a 90 s budget per card (cards run at once, so per box).
//
// Sizes: the read probe streams what bench/measure picks (32x L2, at least 1 GiB); the
// long-context attention reads 512 MiB of KV cache (batch 4 x 32768 tokens x 8 KV heads x 128
// x 2 (K and V) x 2 bytes); the linear gate is Llama-3-8B's gate-and-up projection (28672 x
// 4096, 235 MB). Each is far above the largest L2 (126 MB on a B200), and bench/measure
// rotates copies on top of that.
func StandardSuite() (Suite, error) {
	ref, err := model.Lookup("llama3-8b")
	if err != nil {
		return Suite{}, err
	}
	return Suite{
		Name: SuiteStandard,
		// timing.Default's rule (10 samples, 0.5 s, spread < 0.5%) with a 4 s timeout instead of
		// 10 s: ten measurements must fit the budget even when one never settles.
		Timing:        timing.Config{Warmup: 3, MinSamples: 10, MinSeconds: 0.5, TargetSpread: 0.005, MaxSeconds: 4},
		Budget:        90 * time.Second,
		Read:          measure.ProbeSpec{Kind: cgo.ProbeRead},
		Tensor:        measure.ProbeSpec{Kind: cgo.ProbeMMABF16},
		LinearBatch1:  linearStep(1, 28672, 4096),
		AttentionLong: attentionStep(4, 32, 8, 128, 32768),
		Model:         ref,
		ModelContext:  4096,
	}, nil
}

// TinySuite runs in seconds on the emulator: for tests and for trying the recipes (Slurm,
// Kubernetes) on machines without a GPU. Its speeds mean nothing.
func TinySuite() Suite {
	tiny := model.Shape{
		Name: "tiny-2L", Family: "custom", Hidden: 64, FFN: 128, Layers: 2, QHeads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 256, GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1, Source: "validate tiny suite",
	}
	return Suite{
		Name:          SuiteTiny,
		Timing:        timing.Config{Warmup: 1, MinSamples: 3, MinSeconds: 0, TargetSpread: 0.5, MaxSeconds: 2},
		Budget:        60 * time.Second,
		Read:          measure.ProbeSpec{Kind: cgo.ProbeRead, Bytes: 1 << 20},
		Tensor:        measure.ProbeSpec{Kind: cgo.ProbeMMABF16, Iterations: 2},
		LinearBatch1:  linearStep(1, 64, 64),
		AttentionLong: attentionStep(1, 4, 2, 64, 256),
		Model:         tiny,
		ModelContext:  64,
	}
}

// EmuSuite is the standard suite's kernels at sizes the CPU emulator runs in seconds: the
// default of `validate --backend emu`, which checks that every kernel computes the right answer
// and that the command works end to end, and measures no speed. The standard suite's sizes
// (a 1 GiB read probe, a 235 MB linear layer, 512 MiB of KV cache, Llama-3-8B's step) took
// 369 s on the emulator of a 2-core machine (2026-12, 2 simulated cards taking turns) and ran
// out of budget. The reference model keeps Llama-3-8B's head dim (128) and 4:1 grouped
// query attention, so the attention kernels run at the standard suite's head shape.
func EmuSuite() Suite {
	mini := model.Shape{
		Name: "mini-llama-2L", Family: "custom", Hidden: 512, FFN: 1024, Layers: 2, QHeads: 4, KVHeads: 1, HeadDim: 128,
		Vocab: 1024, GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1, Source: "validate emu suite",
	}
	return Suite{
		Name:          SuiteEmu,
		Timing:        timing.Config{Warmup: 1, MinSamples: 3, MinSeconds: 0, TargetSpread: 0.5, MaxSeconds: 2},
		Budget:        90 * time.Second,
		Read:          measure.ProbeSpec{Kind: cgo.ProbeRead, Bytes: 8 << 20},
		Tensor:        measure.ProbeSpec{Kind: cgo.ProbeMMABF16, Iterations: 4},
		LinearBatch1:  linearStep(1, 1024, 512),
		AttentionLong: attentionStep(2, 8, 2, 128, 1024),
		Model:         mini,
		ModelContext:  256,
	}
}

// SuiteByName returns the standard, the emu or the tiny suite.
func SuiteByName(name string) (Suite, error) {
	switch name {
	case SuiteStandard:
		return StandardSuite()
	case SuiteEmu:
		return EmuSuite(), nil
	case SuiteTiny:
		return TinySuite(), nil
	}
	return Suite{}, fmt.Errorf("unknown suite %q: want %s, %s or %s", name, SuiteStandard, SuiteEmu, SuiteTiny)
}
