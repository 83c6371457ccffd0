// Package step runs whole decode steps on the card: the synthetic weights of a model shape
// filled on the device by the counter hash (bench/ref/stepseeds.go), a KV cache holding
// Context tokens per sequence, then Steps steps in which each sequence's greedy token is the
// next step's input and its position advances on the device.
//
// A Program is one step as a list of calls (every op with its buffers and sizes), built from
// the shape alone; an Engine allocates it on a device, fills it and runs it two ways: eager
// (each op launched in turn, as an engine without graphs does) and graph (one step captured in
// a CUDA graph and replayed every step; the token ids, positions and lengths live in device
// arrays that the step itself advances, so nothing is captured again). Both are timed with the
// project's sampling rule (bench/timing) over samples of Steps steps that each start from the
// same state, so every sample decodes the same positions. A Record holds what one
// configuration found beside its composed time and its roofline bound.
//
// The arithmetic follows the step as bench/ref's float64 forward pass computes it; the two are
// compared by the engine-versus-reference test, and before every timed measurement at a
// configuration the CPU affords (verify.go).
package step

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// DefaultSteps is how many steps one sample decodes.
const DefaultSteps = 32

// Norm and rotary constants of the synthetic step (the forward pass uses the same).
const (
	NormEps   = 1e-5
	RopeTheta = 10000
)

// The tensors of a Gemma 2 or 3 layer beyond bench/ref's names (seeded by ref.TensorSeed like
// the rest, ±1): the norms of the attention output and of the MLP output, [hidden] each.
const ()

// Config is one decode loop: a model shape (one GPU's shard with --tp), Batch sequences of
// Context cached tokens each, Steps steps, and the base seed of the synthetic tensors.
type Config struct {
	Model   model.Shape
	Batch   int
	Context int
	Steps   int
	Seed    uint64
}

// Capacity is the tokens each sequence's cache holds: the context and every step's new token.
func (c Config) Capacity() int { return c.Context + c.Steps }

// Fill says how a buffer is filled before the first step: with db_fill_hash(Seed, Scale) over
// Count elements of DType.
type Fill struct {
	Tensor string // a bench/ref Tensor* name
	Layer  int    // -1 outside the layers
	Seed   uint64
	Scale  float32
	Count  uint64
	DType  cgo.DType
	// Quant: filled by db_fill_quantized instead (a quantized weight, or with Codes an fp8
	// cache's codes alone); see quant.go.
	Quant *ref.QuantFill
	Codes bool
}

// Buffer is one device allocation of a program.
type Buffer struct {
	Name  string
	Bytes uint64
	Fill  *Fill // weights and caches; nil for the state and the activations
	State bool  // token ids, positions and lengths: written from the host at each reset
}

// Program is one decode step of a configuration: its buffers and its ops in launch order.
type Program struct {
	Config
	DType   cgo.DType // activations, dense weights and a 16-bit KV cache
	Buffers []Buffer
	Notes   []string // how the step differs from the composed one, said once
	index   map[string]int
	// Where a layer's q, k and v sit in the qkv buffer.
	splitQKV bool

	// Weights and GroupSize: the format of the quantized projections (WeightDense when none);
	// KVDType: the caches' (DType or fp8 e4m3). See quant.go.
	Weights   cgo.WeightFormat
	GroupSize int
	KVDType   cgo.DType
}

// Feature names a part of a model's step that the engine does not build, "" when it builds
// every part. The command refuses such a model with it before any device work.
func Feature(s model.Shape) string {
	switch {
	case s.RecurrentFeature() != "":
		return s.RecurrentFeature()
	case s.IsMLA() && mlaFeature(s) != "":
		return mlaFeature(s)
	case s.Family == "gemma2":
		return "attention and final logit soft-capping (gemma2)"
	case quantFeature(s) != "":
		return quantFeature(s)
	case !s.GatedMLP:
		return "an MLP without a gate (no plain activation kernel)"
	case s.NormBias:
		return "LayerNorm with a bias"
	case s.IsMoE() && s.Family == "phimoe":
		return "PhiMoE's sparsemixer routing"
	case s.IsMoE() && s.ExpertGroups > cgo.MoEMaxGroups:
		return fmt.Sprintf("%d expert groups (the routing kernel takes at most %d)", s.ExpertGroups, cgo.MoEMaxGroups)
	case s.IsMoE() && s.Experts > cgo.MoEMaxExperts:
		return fmt.Sprintf("%d experts (the routing kernels take at most %d)", s.Experts, cgo.MoEMaxExperts)
	case s.IsMoE() && s.ExpertsPerToken > cgo.MoEMaxTopK:
		return fmt.Sprintf("top-%d routing (the kernels take at most %d)", s.ExpertsPerToken, cgo.MoEMaxTopK)
	case !s.IsMLA() && !cgo.IsAttentionHeadDim(s.HeadDim):
		return fmt.Sprintf("head dim %d (the attention kernels are built for %v)", s.HeadDim, cgo.AttentionHeadDims)
	case s.Hidden > cgo.SmallOpMaxHidden:
		return fmt.Sprintf("hidden %d (RMSNorm takes at most %d)", s.Hidden, cgo.SmallOpMaxHidden)
	}
	v := cgo.SmallOpVector
	if s.Hidden%v != 0 || s.HeadDim%v != 0 {
		return fmt.Sprintf("hidden %d or head dim %d not a multiple of %d (the small ops read 16-byte vectors)", s.Hidden, s.HeadDim, v)
	}
	for l := 0; l < s.Layers; l++ {
		if f := s.Layer(l).FFN; f%v != 0 {
			return fmt.Sprintf("MLP width %d not a multiple of %d", f, v)
		}
	}
	if s.IsMoE() && s.ExpertFFN%v != 0 {
		return fmt.Sprintf("expert MLP width %d not a multiple of %d", s.ExpertFFN, v)
	}
	if s.LMHeadBias && s.Vocab%v != 0 {
		return fmt.Sprintf("an LM-head bias over a vocabulary of %d, not a multiple of %d", s.Vocab, v)
	}
	if s.RouterBias && !ref.CorrectionBias(s) && s.Experts%v != 0 {
		return fmt.Sprintf("a router bias over %d experts, not a multiple of %d", s.Experts, v)
	}
	return ""
}

// Validate checks a configuration without a device: the model's features, the sizes, and that
// every step's token fits in the cache. Errors name the value and what is accepted.
func (c Config) Validate() error {
	s := c.Model
	if err := s.Validate(); err != nil {
		return err
	}
	if f := Feature(s); f != "" {
		return fmt.Errorf("model %s: the step does not implement %s", s, f)
	}
	switch {
	case c.Batch < 1 || c.Batch > cgo.MaxBatch:
		return fmt.Errorf("batch %d: the kernels take 1..%d sequences", c.Batch, cgo.MaxBatch)
	case c.Context < 1:
		return fmt.Errorf("context %d: a step attends to at least one cached token", c.Context)
	case c.Steps < 1:
		return fmt.Errorf("steps %d: a sample decodes at least one step", c.Steps)
	case c.Capacity() > math.MaxInt32/4:
		return fmt.Errorf("context %d + steps %d: the cache positions are int32", c.Context, c.Steps)
	}
	if m := s.MaxPositions; m > 0 && c.Capacity() > m {
		return fmt.Errorf("context %d + %d steps = %d positions: model %s has %d (max_position_embeddings)", c.Context, c.Steps, c.Capacity(), s, m)
	}
	return c.validateQuant()
}

// activation dtype of a validated shape.
func dtypeOf(s model.Shape) cgo.DType {
	if s.WeightDType == model.FP16 {
		return cgo.DTypeFP16
	}
	return cgo.DTypeBF16
}

// gemmaFamily: unit-offset norms, the embedding scaled by sqrt(hidden), GeLU-tanh.
func gemmaFamily(s model.Shape) bool {
	return s.Family == "gemma" || s.Family == "gemma2" || s.Family == "gemma3_text"
}

// New builds the program of one step of c (which it validates).
func New(c Config) (*Program, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := c.Model
	p := &Program{Config: c, DType: dtypeOf(s), index: map[string]int{}}
	p.setFormats()
	dt := p.DType
	el := dt.Bytes()
	B, H, V := uint64(c.Batch), uint64(s.Hidden), uint64(s.Vocab)
	hd := uint64(s.HeadDim)
	qd, kvd := uint64(s.QHeads)*hd, uint64(s.KVHeads)*hd
	capacity := uint64(c.Capacity())

	weight := func(layer int, name string, count uint64, scale float32) {
		p.add(Buffer{Name: tensorKey(layer, name), Bytes: count * el,
			Fill: &Fill{Tensor: name, Layer: layer, Seed: ref.TensorSeed(c.Seed, layer, name), Scale: scale, Count: count, DType: dt}})
	}
	lws := func(k uint64) float32 { return ref.LinearWeightScale(int(k)) }

	// Outside the layers.
	weight(-1, ref.TensorEmbedding, V*H, ref.UnitScale)
	if !s.TiedEmbeddings {
		weight(-1, ref.TensorLMHead, V*H, lws(H))
	}
	if s.LMHeadBias {
		weight(-1, ref.TensorLMHeadBias, V, ref.BiasScale)
	}
	weight(-1, ref.TensorFinalNorm, H, ref.UnitScale)

	var maxFFN uint64
	for l := 0; l < s.Layers; l++ {
		ly := s.Layer(l)
		weight(l, ref.TensorAttnNorm, H, ref.UnitScale)
		weight(l, ref.TensorMLPNorm, H, ref.UnitScale)
		if s.NormsPerLayer() == 4 {
			weight(l, ref.TensorPostAttnNorm, H, ref.UnitScale)
			weight(l, ref.TensorPostMLPNorm, H, ref.UnitScale)
		}
		if s.IsMLA() {
			p.mlaBuffers(l, weight)
		} else {
			p.addProjection(l, ref.TensorQKV, qd+2*kvd, H)
		}
		if s.AttnBias {
			weight(l, ref.TensorQKVBias, qd+2*kvd, ref.BiasScale)
		}
		switch {
		case s.QKNorm == "rms":
			weight(l, ref.TensorQNorm, hd, ref.UnitScale)
			weight(l, ref.TensorKNorm, hd, ref.UnitScale)
		case s.QKNorm == "l2" && s.Layer(l).RoPE:
			weight(l, ref.TensorQNorm, hd, 0) // zeros: the unweighted norm runs as 1 + 0 (ops.go)
		}
		if !s.IsMLA() {
			p.addProjection(l, ref.TensorO, H, qd)
		}
		if s.OProjBias {
			weight(l, ref.TensorOBias, H, ref.BiasScale)
		}
		if s.AttentionSinks {
			n := uint64(s.QHeads)
			p.add(Buffer{Name: tensorKey(l, ref.TensorSinks), Bytes: 4 * n,
				Fill: &Fill{Tensor: ref.TensorSinks, Layer: l, Seed: ref.TensorSeed(c.Seed, l, ref.TensorSinks), Scale: ref.UnitScale, Count: n, DType: cgo.DTypeF32}})
		}
		f := uint64(ly.FFN)
		maxFFN = max(maxFFN, f)
		switch {
		case !ly.MoE:
			p.addProjection(l, ref.TensorGateUp, 2*f, H)
			p.addProjection(l, ref.TensorDown, H, f)
			if s.MLPBias {
				weight(l, ref.TensorGateUpBias, 2*f, ref.BiasScale)
				weight(l, ref.TensorDownBias, H, ref.BiasScale)
			}
		default:
			E, ef := uint64(s.Experts), uint64(s.ExpertFFN)
			weight(l, ref.TensorRouter, E*H, lws(H))
			if s.RouterBias {
				p.routerBias(l, weight)
			}
			// The experts of a tensor as one matrix of E x n rows: dense, or quantized by one
			// fill whose layout is the experts' layouts one after another (quantFeature refuses
			// the formats where it is not).
			p.addProjection(l, ref.TensorExpertUp, E*2*ef, H)
			p.addProjection(l, ref.TensorExpertDown, E*H, ef)
			if s.MLPBias {
				weight(l, ref.TensorExpertUpBias, E*2*ef, ref.BiasScale)
				weight(l, ref.TensorExpertDownBias, E*H, ref.BiasScale)
			}
			if f > 0 {
				p.addProjection(l, ref.TensorSharedUp, 2*f, H)
				p.addProjection(l, ref.TensorSharedDown, H, f)
				if s.MLPBias {
					weight(l, ref.TensorSharedUpBias, 2*f, ref.BiasScale)
					weight(l, ref.TensorSharedDownBias, H, ref.BiasScale)
				}
			}
		}
		if !s.IsMLA() { // the latent cache is mlaBuffers'
			p.addCaches(l, B*kvd*capacity)
		}
	}

	// The state the step advances, and the activations.
	p.add(Buffer{Name: bufIDs, Bytes: 4 * B, State: true})
	p.add(Buffer{Name: bufPosLens, Bytes: 8 * B, State: true})
	for _, name := range []string{bufResidual, bufNormed, bufAttnProj, bufMLPOut, bufFinal} {
		p.add(Buffer{Name: name, Bytes: B * H * el})
	}
	p.add(Buffer{Name: bufQKV, Bytes: B * (qd + 2*kvd) * el})
	p.add(Buffer{Name: bufQ, Bytes: B * qd * el})
	p.add(Buffer{Name: bufAttnOut, Bytes: B * qd * el})
	if maxFFN > 0 {
		p.add(Buffer{Name: bufGateUp, Bytes: B * 2 * maxFFN * el})
		p.add(Buffer{Name: bufAct, Bytes: B * maxFFN * el})
	}
	if s.IsMoE() {
		E, k, ef := uint64(s.Experts), uint64(s.ExpertsPerToken), uint64(s.ExpertFFN)
		rows := B * k
		p.add(Buffer{Name: bufRouterLogits, Bytes: B * E * el})
		p.add(Buffer{Name: bufTopKIDs, Bytes: 4 * rows})
		p.add(Buffer{Name: bufTopKWeights, Bytes: 4 * rows})
		p.add(Buffer{Name: bufExpertCounts, Bytes: 4 * E})
		p.add(Buffer{Name: bufExpertOffsets, Bytes: 4 * (E + 1)})
		p.add(Buffer{Name: bufSortedSlots, Bytes: 4 * rows})
		p.add(Buffer{Name: bufSlotRows, Bytes: 4 * rows})
		p.add(Buffer{Name: bufXSorted, Bytes: rows * H * el})
		p.add(Buffer{Name: bufExpertGateUp, Bytes: rows * 2 * ef * el})
		p.add(Buffer{Name: bufExpertAct, Bytes: rows * ef * el})
		p.add(Buffer{Name: bufExpertOut, Bytes: rows * H * el})
		p.add(Buffer{Name: bufMoEOut, Bytes: B * H * el})
		if maxShared(s) > 0 {
			p.add(Buffer{Name: bufScratch, Bytes: B * H * el})
		}
	}
	p.add(Buffer{Name: bufLogits, Bytes: B * V * el})
	if s.IsMLA() {
		p.mlaActivations()
	}

	// One fused qkv projection, whose rows the rotary-and-append kernel reads where they lie
	// (row_stride) and whose rotated q it writes packed for the attention (q_out). QK-norm
	// normalises rows of head_dim that must be contiguous, so past batch 1 (where the fused
	// row is those rows) a QK-norm model runs the projection as three linears over the row
	// blocks of the one qkv weight.
	p.splitQKV = c.Batch > 1 && s.QKNorm != ""
	if p.splitQKV {
		p.Notes = append(p.Notes, "qkv_proj runs as three linears (q, k, v) past batch 1: QK-norm takes contiguous per-sequence q and k")
	}
	p.Notes = append(p.Notes, moeNotes(s)...)
	p.Notes = append(p.Notes, fmt.Sprintf("attention is planned for the cache's %d tokens (context + steps), the lengths read on the device", c.Capacity()))
	return p, nil
}

// maxShared is the widest shared-expert MLP of a mixture of experts' layers.
func maxShared(s model.Shape) int {
	w := 0
	for l := 0; l < s.Layers; l++ {
		if ly := s.Layer(l); ly.MoE {
			w = max(w, ly.FFN)
		}
	}
	return w
}

// Buffer names of the state and the activations.
const (
	bufIDs           = "ids"      // int32 [batch]: this step's input tokens; the argmax writes the next
	bufPosLens       = "pos_lens" // int32 [2 batch]: positions, then context lengths
	bufResidual      = "residual"
	bufNormed        = "normed"
	bufAttnProj      = "attn_proj" // o_proj's output
	bufMLPOut        = "mlp_out"
	bufFinal         = "final"
	bufQKV           = "qkv" // fused: [batch, q | k | v]; split (QK-norm past batch 1): [q for every sequence | k | v]
	bufQ             = "q"   // the rotated q, [batch, q_heads, head_dim] (fused)
	bufAttnOut       = "attn_out"
	bufGateUp        = "gate_up"
	bufAct           = "act"
	bufRouterLogits  = "router_logits"
	bufTopKIDs       = "topk_ids"
	bufTopKWeights   = "topk_weights"
	bufExpertCounts  = "expert_counts"
	bufExpertOffsets = "expert_offsets"
	bufSortedSlots   = "sorted_slots"
	bufSlotRows      = "slot_rows"
	bufXSorted       = "x_sorted"
	bufExpertGateUp  = "expert_gate_up_out"
	bufExpertAct     = "expert_act"
	bufExpertOut     = "expert_out"
	bufMoEOut        = "moe_out"
	bufScratch       = "scratch"
	bufLogits        = "logits"
	bufWorkspace     = "workspace"
	bufAttnWorkspace = "attention_workspace"
)

// kvCaches names a layer's caches of grouped-query attention: none for MLA, whose latent cache
// mlaBuffers adds.
func kvCaches(s model.Shape) []string {
	if s.IsMLA() {
		return nil
	}
	return []string{ref.TensorKCache, ref.TensorVCache}
}

// isCache reports whether a tensor is a cache (KV or latent), not a weight.
func isCache(tensor string) bool {
	return tensor == ref.TensorKCache || tensor == ref.TensorVCache || tensor == ref.TensorLatentCache
}

func tensorKey(layer int, name string) string {
	if layer < 0 {
		return name
	}
	return fmt.Sprintf("layers.%d.%s", layer, name)
}

func (p *Program) add(b Buffer) {
	p.index[b.Name] = len(p.Buffers)
	p.Buffers = append(p.Buffers, b)
}

// Has reports whether the program has a buffer of that name.
func (p *Program) Has(name string) bool { _, ok := p.index[name]; return ok }

// bufferAlign separates allocations: every buffer 256-byte aligned, as cudaMalloc gives.
const bufferAlign = 256

// BufferBytes is the device memory of the buffers, each rounded up to bufferAlign; the
// workspace (known once the device plans the calls) comes on top.
func (p *Program) BufferBytes() uint64 {
	var n uint64
	for _, b := range p.Buffers {
		n += (b.Bytes + bufferAlign - 1) &^ (bufferAlign - 1)
	}
	return n
}

// WeightBytes is the bytes of the weights (every filled buffer that is not a cache).
func (p *Program) WeightBytes() uint64 {
	var n uint64
	for _, b := range p.Buffers {
		if b.Fill != nil && !isCache(b.Fill.Tensor) {
			n += weightBytesOf(b)
		}
	}
	return n
}

// CacheBytes is the bytes of the KV caches (capacity context + steps).
func (p *Program) CacheBytes() uint64 {
	var n uint64
	for _, b := range p.Buffers {
		if b.Fill != nil && isCache(b.Fill.Tensor) {
			n += b.Bytes
		}
	}
	return n
}

// InitialState is what a reset writes: the first step's token ids, and the positions and
// lengths of the first step (position Context, length Context + 1).
func (p *Program) InitialState() (ids []int32, posLens []int32) {
	ids = make([]int32, p.Batch)
	posLens = make([]int32, 2*p.Batch)
	for b := range ids {
		ids[b] = ref.TokenID(p.Seed, b, p.Model.Vocab)
		posLens[b] = int32(p.Context)
		posLens[p.Batch+b] = int32(p.Context + 1)
	}
	return ids, posLens
}
