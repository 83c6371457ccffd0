package validate

import (
	"fmt"
	"time"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/timing"
)

// ProbeStep is a bandwidth or compute probe: Kind "read" (16-byte loads over Bytes) or "mma"
// (bf16 mma.sync chains of Iterations per thread). 0 leaves a size to bench/measure, which
// picks max(32x L2, 1 GiB) and about a millisecond per launch.
type ProbeStep struct {
	Kind       string `json:"kind"`
	Bytes      uint64 `json:"bytes,omitempty"`
	Iterations int    `json:"iterations,omitempty"`
}

// Probe kinds a suite uses.
const (
	ProbeRead = "read"
	ProbeMMA  = "mma"
)

// LinearStep is a decode linear layer Y[Batch x N] = X[Batch x K] W^T in bf16, the kernel
// variant left to the library.
type LinearStep struct {
	Batch int `json:"batch"`
	N     int `json:"n"`
	K     int `json:"k"`
}

// AttentionStep is decode attention in bf16 over a contiguous KV cache, every sequence at
// Context tokens, the split count left to the library.
type AttentionStep struct {
	Batch   int `json:"batch"`
	QHeads  int `json:"q_heads"`
	KVHeads int `json:"kv_heads"`
	HeadDim int `json:"head_dim"`
	Context int `json:"context"`
}

// Step is one measurement of a suite: exactly one of Probe, Linear and Attention is set.
type Step struct {
	Name      string         `json:"name"`
	Probe     *ProbeStep     `json:"probe,omitempty"`
	Linear    *LinearStep    `json:"linear,omitempty"`
	Attention *AttentionStep `json:"attention,omitempty"`
}

// String describes what the step runs, for messages.
func (s Step) String() string {
	switch {
	case s.Probe != nil && s.Probe.Kind == ProbeRead && s.Probe.Bytes >= 1e9:
		return fmt.Sprintf("read probe over %.3g GB", float64(s.Probe.Bytes)/1e9)
	case s.Probe != nil && s.Probe.Kind == ProbeRead && s.Probe.Bytes > 0:
		return fmt.Sprintf("read probe over %.3g MB", float64(s.Probe.Bytes)/1e6)
	case s.Probe != nil && s.Probe.Kind == ProbeMMA:
		return "bf16 tensor-core (mma) probe"
	case s.Probe != nil:
		return s.Probe.Kind + " probe"
	case s.Linear != nil:
		l := s.Linear
		return fmt.Sprintf("bf16 linear, batch %d, N %d, K %d", l.Batch, l.N, l.K)
	case s.Attention != nil:
		a := s.Attention
		return fmt.Sprintf("bf16 decode attention, batch %d, %d/%d heads of %d, context %d", a.Batch, a.QHeads, a.KVHeads, a.HeadDim, a.Context)
	}
	return s.Name
}

func (s Step) sameWork(o Step) bool {
	switch {
	case s.Probe != nil && o.Probe != nil:
		return *s.Probe == *o.Probe
	case s.Linear != nil && o.Linear != nil:
		return *s.Linear == *o.Linear
	case s.Attention != nil && o.Attention != nil:
		return *s.Attention == *o.Attention
	}
	return false
}

// Suite is the fixed set of measurements validate runs on every card.
type Suite struct {
	Name   string        `json:"name"`
	Timing timing.Config `json:"timing"`
	// Budget bounds one card's measurements: steps not started by then are skipped (and their
	// gates fail), so a box never takes much longer than the suite promises.
	Budget time.Duration `json:"budget_ns"`

	Read          ProbeStep     `json:"read"`
	Tensor        ProbeStep     `json:"tensor"`
	LinearBatch1  LinearStep    `json:"linear_batch1"`
	AttentionLong AttentionStep `json:"attention_long"`
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
		{Name: StepRead, Probe: &s.Read},
		{Name: StepTensor, Probe: &s.Tensor},
		{Name: StepLinearBatch1, Linear: &s.LinearBatch1},
		{Name: StepAttentionLong, Attention: &s.AttentionLong},
	}}
	for _, k := range s.Model.Kernels(1, s.ModelContext) {
		st := Step{Name: "model." + k.Name}
		switch k.Kind {
		case model.KindLinear:
			st.Linear = &LinearStep{Batch: k.M, N: k.N, K: k.K}
		case model.KindAttention:
			st.Attention = &AttentionStep{Batch: k.Batch, QHeads: k.QHeads, KVHeads: k.KVHeads, HeadDim: k.HeadDim, Context: k.Context}
		default:
			return Plan{}, fmt.Errorf("suite %s: reference model kernel %s of kind %q", s.Name, k.Name, k.Kind)
		}
		name := st.Name
		for _, existing := range p.Steps {
			if existing.sameWork(st) {
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
		Read:          ProbeStep{Kind: ProbeRead},
		Tensor:        ProbeStep{Kind: ProbeMMA},
		LinearBatch1:  LinearStep{Batch: 1, N: 28672, K: 4096},
		AttentionLong: AttentionStep{Batch: 4, QHeads: 32, KVHeads: 8, HeadDim: 128, Context: 32768},
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
		Read:          ProbeStep{Kind: ProbeRead, Bytes: 1 << 20},
		Tensor:        ProbeStep{Kind: ProbeMMA, Iterations: 2},
		LinearBatch1:  LinearStep{Batch: 1, N: 64, K: 64},
		AttentionLong: AttentionStep{Batch: 1, QHeads: 4, KVHeads: 2, HeadDim: 64, Context: 256},
		Model:         tiny,
		ModelContext:  64,
	}
}

// SuiteByName returns the standard or the tiny suite.
func SuiteByName(name string) (Suite, error) {
	switch name {
	case SuiteStandard:
		return StandardSuite()
	case SuiteTiny:
		return TinySuite(), nil
	}
	return Suite{}, fmt.Errorf("unknown suite %q: want %s or %s", name, SuiteStandard, SuiteTiny)
}
