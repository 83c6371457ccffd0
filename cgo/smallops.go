package cgo

// #include "shim.h"
import "C"

import "fmt"

// The small ops of a decode step (kernels/smallops*.cu): everything that is not a linear or
// attention. Every call takes device addresses and sizes and reads per-sequence data (token ids,
// positions) from device arrays, so a step can chain them on the device's stream without a
// host round trip.

// Small-op limits, read from kernels/decodebench.h.
const (
	SmallOpVector    = C.DB_SMALLOP_VECTOR     // row lengths are multiples of this (16-byte accesses)
	SmallOpMaxHidden = C.DB_SMALLOP_MAX_HIDDEN // RMSNorm's longest row
	MoEMaxExperts    = C.DB_MOE_MAX_EXPERTS
	MoEMaxTopK       = C.DB_MOE_MAX_TOP_K
)

// int32s converts named ints for a params struct, failing with the name of one that does not fit.
func int32s(op string, fields ...any) error {
	for i := 0; i+2 < len(fields); i += 3 {
		name, v, dst := fields[i].(string), fields[i+1].(int), fields[i+2].(*C.int32_t)
		c, err := toInt32(op, name, v)
		if err != nil {
			return err
		}
		*dst = c
	}
	return nil
}

// EmbeddingParams mirrors db_embedding_params: Out[b] = Table[IDs[b]]·Scale (a NaN row for an
// id outside the vocabulary).
type EmbeddingParams struct {
	Table, IDs, Out      uint64 // [Vocab x Hidden], int32 [Batch], [Batch x Hidden]
	Batch, Vocab, Hidden int
	DType                DType
	Scale                float32 // 0 = 1 (a copy); Gemma: sqrt(hidden)
}

// Embedding gathers the rows of the token ids.
func (d *Device) Embedding(p EmbeddingParams) error {
	const op = "db_embedding"
	var c C.db_embedding_params
	c.table, c.ids, c.out, c.dtype = C.uint64_t(p.Table), C.uint64_t(p.IDs), C.uint64_t(p.Out), C.int32_t(p.DType)
	c.scale = C.float(p.Scale)
	if err := int32s(op, "batch", p.Batch, &c.batch, "vocab", p.Vocab, &c.vocab, "hidden", p.Hidden, &c.hidden); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_embedding(d.lib.api, d.ctx, &c)) })
}

// RMSNormParams mirrors db_rmsnorm_params. With Residual set: s = X + Residual is stored back
// into Residual and Out = s/rms(s)·w'; otherwise s = X. w' is Weight, or 1 + Weight with
// UnitOffset (Gemma).
type RMSNormParams struct {
	X, Residual, Weight, Out uint64 // Residual 0 = no residual add; Out may be X
	Batch, Hidden            int
	Eps                      float32
	UnitOffset               bool
	DType                    DType
}

// RMSNorm normalises each row (adding the residual first when there is one).
func (d *Device) RMSNorm(p RMSNormParams) error {
	const op = "db_rmsnorm"
	var c C.db_rmsnorm_params
	c.x, c.residual, c.weight, c.out = C.uint64_t(p.X), C.uint64_t(p.Residual), C.uint64_t(p.Weight), C.uint64_t(p.Out)
	if err := int32s(op, "batch", p.Batch, &c.batch, "hidden", p.Hidden, &c.hidden); err != nil {
		return err
	}
	c.eps, c.dtype = C.float(p.Eps), C.int32_t(p.DType)
	if p.UnitOffset {
		c.unit_offset = 1
	}
	return d.Do(func() error { return d.check(op, C.dbshim_rmsnorm(d.lib.api, d.ctx, &c)) })
}

// RopeScaling is a DB_ROPE_* frequency scaling.
type RopeScaling int32

const (
	RopeDefault    RopeScaling = C.DB_ROPE_DEFAULT
	RopeLinear     RopeScaling = C.DB_ROPE_LINEAR
	RopeDynamicNTK RopeScaling = C.DB_ROPE_DYNAMIC_NTK
	RopeLlama3     RopeScaling = C.DB_ROPE_LLAMA3
)

// Rope mirrors db_rope: the rotary frequencies as a Hugging Face config states them.
type Rope struct {
	Theta                         float32
	Scaling                       RopeScaling
	Factor                        float32
	LowFreqFactor, HighFreqFactor float32 // Llama 3
	OriginalMaxPositions          int     // dynamic NTK, Llama 3
	RotaryDim                     int     // even, 0..head dim (0: no rotation, a copy)
}

// RopeAppendParams mirrors db_rope_append_params: Q rotated in place, KNew rotated into the
// cache at each sequence's position with VNew beside it.
type RopeAppendParams struct {
	Q, KNew, VNew uint64 // [Batch, QHeads, HeadDim], [Batch, KVHeads, HeadDim] x 2
	Positions     uint64 // int32 [Batch]; a negative position or one past the cache skips the sequence
	Cache         KVCache
	Rope          Rope
	Batch, QHeads int
	// RowStride > 0 reads the fused QKV projection's output where it lies: elements from one
	// sequence's Q (and KNew, VNew) to the next's; 0: each packed as above.
	RowStride int
	QOut      uint64 // 0: Q rotated in place; else the rotated q, packed [Batch, QHeads, HeadDim]
}

// RopeKVAppend rotates q and k and appends k and v to the cache.
func (d *Device) RopeKVAppend(p RopeAppendParams) error {
	const op = "db_rope_kv_append"
	var c C.db_rope_append_params
	var err error
	c.q, c.k_new, c.v_new, c.positions = C.uint64_t(p.Q), C.uint64_t(p.KNew), C.uint64_t(p.VNew), C.uint64_t(p.Positions)
	if c.cache, err = p.Cache.toC(op); err != nil {
		return err
	}
	r := p.Rope
	c.rope.theta, c.rope.scaling, c.rope.factor = C.float(r.Theta), C.int32_t(r.Scaling), C.float(r.Factor)
	c.rope.low_freq_factor, c.rope.high_freq_factor = C.float(r.LowFreqFactor), C.float(r.HighFreqFactor)
	if err := int32s(op, "rope.original_max_positions", r.OriginalMaxPositions, &c.rope.original_max_positions,
		"rope.rotary_dim", r.RotaryDim, &c.rope.rotary_dim, "batch", p.Batch, &c.batch, "q_heads", p.QHeads, &c.q_heads,
		"row_stride", p.RowStride, &c.row_stride); err != nil {
		return err
	}
	c.q_out = C.uint64_t(p.QOut)
	return d.Do(func() error { return d.check(op, C.dbshim_rope_kv_append(d.lib.api, d.ctx, &c)) })
}

// Activation is a DB_ACT_* gated MLP activation.
type Activation int32

const (
	ActSiLU        Activation = C.DB_ACT_SILU         // silu(gate) * up
	ActGeLUTanh    Activation = C.DB_ACT_GELU_TANH    // gelu_tanh(gate) * up (Gemma)
	ActSwiGLUClamp Activation = C.DB_ACT_SWIGLU_CLAMP // gpt-oss: (clamp(up) + 1) g sigmoid(alpha g), g = min(gate, limit)
)

func (a Activation) String() string {
	switch a {
	case ActSiLU:
		return "silu"
	case ActGeLUTanh:
		return "gelu_tanh"
	case ActSwiGLUClamp:
		return "swiglu_clamp"
	}
	return fmt.Sprintf("activation(%d)", int32(a))
}

// GatedActParams mirrors db_gated_act_params: Out[b] = act(GateUp[b, :FFN]) * GateUp[b, FFN:].
type GatedActParams struct {
	GateUp, Out uint64 // [Batch x 2·FFN], [Batch x FFN]
	Batch, FFN  int
	Activation  Activation
	DType       DType
	// ActSwiGLUClamp: the clamp (gpt-oss's swiglu_limit, 7) and the sigmoid's slope (1.702).
	Limit, Alpha float32
}

// GatedAct applies the gated activation.
func (d *Device) GatedAct(p GatedActParams) error {
	const op = "db_gated_act"
	var c C.db_gated_act_params
	c.gate_up, c.out, c.activation, c.dtype = C.uint64_t(p.GateUp), C.uint64_t(p.Out), C.int32_t(p.Activation), C.int32_t(p.DType)
	c.limit, c.alpha = C.float(p.Limit), C.float(p.Alpha)
	if err := int32s(op, "batch", p.Batch, &c.batch, "ffn", p.FFN, &c.ffn); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_gated_act(d.lib.api, d.ctx, &c)) })
}

// BiasAddParams mirrors db_bias_add_params: Y[b] += Bias, in place.
type BiasAddParams struct {
	Y, Bias  uint64 // [Batch x N], [N]
	Batch, N int
	DType    DType
}

// BiasAdd adds the bias to every row.
func (d *Device) BiasAdd(p BiasAddParams) error {
	const op = "db_bias_add"
	var c C.db_bias_add_params
	c.y, c.bias, c.dtype = C.uint64_t(p.Y), C.uint64_t(p.Bias), C.int32_t(p.DType)
	if err := int32s(op, "batch", p.Batch, &c.batch, "n", p.N, &c.n); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_bias_add(d.lib.api, d.ctx, &c)) })
}

// ArgmaxParams mirrors db_argmax_params: IDs[b] = argmax of Logits[b, :], the lowest index on a tie.
type ArgmaxParams struct {
	Logits, IDs    uint64 // [Batch x Vocab], int32 [Batch]
	Workspace      uint64 // Batch·NumSplits·8 bytes when NumSplits > 1 (see ArgmaxPlan)
	WorkspaceBytes uint64
	Batch, Vocab   int
	DType          DType
	NumSplits      int // 0 = auto; written back by ArgmaxPlan
}

func (p ArgmaxParams) toC(op string) (C.db_argmax_params, error) {
	var c C.db_argmax_params
	c.logits, c.ids, c.workspace, c.workspace_bytes = C.uint64_t(p.Logits), C.uint64_t(p.IDs), C.uint64_t(p.Workspace), C.uint64_t(p.WorkspaceBytes)
	c.dtype = C.int32_t(p.DType)
	err := int32s(op, "batch", p.Batch, &c.batch, "vocab", p.Vocab, &c.vocab, "num_splits", p.NumSplits, &c.num_splits)
	return c, err
}

// ArgmaxPlan validates p, resolves NumSplits and gives the workspace bytes the call needs.
func (d *Device) ArgmaxPlan(p ArgmaxParams) (ArgmaxParams, uint64, error) {
	const op = "db_argmax_plan"
	c, err := p.toC(op)
	if err != nil {
		return p, 0, err
	}
	var ws C.uint64_t
	if err := d.Do(func() error { return d.check(op, C.dbshim_argmax_plan(d.lib.api, d.ctx, &c, &ws)) }); err != nil {
		return p, 0, err
	}
	p.NumSplits = int(c.num_splits)
	return p, uint64(ws), nil
}

// Argmax writes each row's greedy token id.
func (d *Device) Argmax(p ArgmaxParams) error {
	const op = "db_argmax"
	c, err := p.toC(op)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_argmax(d.lib.api, d.ctx, &c)) })
}

// MoERouting is a DB_MOE_* order of softmax and top-k.
type MoERouting int32

const (
	MoESoftmaxTopK MoERouting = C.DB_MOE_SOFTMAX_TOPK // softmax over all experts, then top k
	MoETopKSoftmax MoERouting = C.DB_MOE_TOPK_SOFTMAX // top k of the logits, softmax over those k
	MoESigmoidTopK MoERouting = C.DB_MOE_SIGMOID_TOPK // DeepSeek-V3: sigmoid, bias for the choice, group limit
	MoETopKSigmoid MoERouting = C.DB_MOE_TOPK_SIGMOID // Llama 4: top k of the logits, weight sigmoid(logit)
)

// MoEMaxGroups is the most expert groups db_moe_route's group limit takes.
const MoEMaxGroups = C.DB_MOE_MAX_GROUPS

// MoERouteParams mirrors db_moe_route_params.
type MoERouteParams struct {
	Logits, TopKIDs, TopKWeights uint64 // [Batch x Experts], int32 [Batch x TopK], f32 [Batch x TopK]
	Batch, Experts, TopK         int
	Mode                         MoERouting
	Renormalize                  bool // SoftmaxTopK, SigmoidTopK: divide the k weights by their sum
	DType                        DType
	// SigmoidTopK: CorrectionBias (f32 [Experts], 0 for none) joins the scores for the choice
	// only; Groups (0 or 1: no limit) and GroupsKept limit the choice to the best groups.
	CorrectionBias     uint64
	Groups, GroupsKept int
	Scaling            float32 // the weights times it (routed_scaling_factor); 0 means 1
}

// MoERoute picks each token's experts and weights.
func (d *Device) MoERoute(p MoERouteParams) error {
	const op = "db_moe_route"
	var c C.db_moe_route_params
	c.logits, c.topk_ids, c.topk_weights = C.uint64_t(p.Logits), C.uint64_t(p.TopKIDs), C.uint64_t(p.TopKWeights)
	c.mode, c.dtype = C.int32_t(p.Mode), C.int32_t(p.DType)
	if p.Renormalize {
		c.renormalize = 1
	}
	c.correction_bias, c.scaling = C.uint64_t(p.CorrectionBias), C.float(p.Scaling)
	if err := int32s(op, "batch", p.Batch, &c.batch, "experts", p.Experts, &c.experts, "top_k", p.TopK, &c.top_k,
		"groups", p.Groups, &c.groups, "groups_kept", p.GroupsKept, &c.groups_kept); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_moe_route(d.lib.api, d.ctx, &c)) })
}

// MoEGroupParams mirrors db_moe_group_params: the Batch·TopK slots (s = token·TopK + j) grouped
// by expert, and optionally X's rows gathered in that order.
type MoEGroupParams struct {
	TopKIDs                     uint64 // int32 [Batch x TopK]
	ExpertCounts, ExpertOffsets uint64 // int32 [Experts], int32 [Experts + 1]
	SortedSlots, SlotRows       uint64 // int32 [Batch·TopK] each: row -> slot and slot -> row
	X, XSorted                  uint64 // optional: [Batch x Hidden] -> [Batch·TopK x Hidden]; X 0 skips
	Batch, TopK, Experts        int
	Hidden                      int
	DType                       DType
	// RowWeights, optional (f32 [Batch·TopK]): each gathered row is multiplied by its slot's
	// weight and rounded (Llama 4 weighs the experts' input); 0 copies.
	RowWeights uint64
}

// MoEGroup groups the slots by expert.
func (d *Device) MoEGroup(p MoEGroupParams) error {
	const op = "db_moe_group"
	var c C.db_moe_group_params
	c.topk_ids, c.expert_counts, c.expert_offsets = C.uint64_t(p.TopKIDs), C.uint64_t(p.ExpertCounts), C.uint64_t(p.ExpertOffsets)
	c.sorted_slots, c.slot_rows, c.x, c.x_sorted = C.uint64_t(p.SortedSlots), C.uint64_t(p.SlotRows), C.uint64_t(p.X), C.uint64_t(p.XSorted)
	c.dtype, c.row_weights = C.int32_t(p.DType), C.uint64_t(p.RowWeights)
	if err := int32s(op, "batch", p.Batch, &c.batch, "top_k", p.TopK, &c.top_k, "experts", p.Experts, &c.experts,
		"hidden", p.Hidden, &c.hidden); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_moe_group(d.lib.api, d.ctx, &c)) })
}

// MoECombineParams mirrors db_moe_combine_params: Out[t] = Σ_j w[t,j]·YSorted[SlotRows[t·TopK+j]]
// (every w 1 when TopKWeights is 0).
type MoECombineParams struct {
	YSorted, SlotRows, TopKWeights, Out uint64
	Batch, TopK, Hidden                 int
	DType                               DType
}

// MoECombine sums each token's expert outputs with their weights.
func (d *Device) MoECombine(p MoECombineParams) error {
	const op = "db_moe_combine"
	var c C.db_moe_combine_params
	c.y_sorted, c.slot_rows, c.topk_weights, c.out = C.uint64_t(p.YSorted), C.uint64_t(p.SlotRows), C.uint64_t(p.TopKWeights), C.uint64_t(p.Out)
	c.dtype = C.int32_t(p.DType)
	if err := int32s(op, "batch", p.Batch, &c.batch, "top_k", p.TopK, &c.top_k, "hidden", p.Hidden, &c.hidden); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_moe_combine(d.lib.api, d.ctx, &c)) })
}
