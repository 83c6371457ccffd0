package step

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// Launcher is what a step's ops call: the kernel entry points of cgo.Device, each queued on
// the device's stream without waiting for it. A fake records the calls in tests.
type Launcher interface {
	Linear(cgo.LinearParams) error
	Attention(cgo.AttentionParams) error
	KVAppend(cgo.KVAppendParams) error
	Embedding(cgo.EmbeddingParams) error
	RMSNorm(cgo.RMSNormParams) error
	RopeKVAppend(cgo.RopeAppendParams) error
	GatedAct(cgo.GatedActParams) error
	BiasAdd(cgo.BiasAddParams) error
	Argmax(cgo.ArgmaxParams) error
	MoERoute(cgo.MoERouteParams) error
	MoEGroup(cgo.MoEGroupParams) error
	MoECombine(cgo.MoECombineParams) error
	GroupedLinear(cgo.GroupedLinearParams) error
	AddInt32(dptr uint64, count, delta int) error
	MLARopeAppend(cgo.MLARopeAppendParams) error
	MLAAttention(cgo.MLAAttentionParams) error
}

// Planner resolves the variants and splits of the calls that have a plan, and gives the
// workspace each needs, without touching device memory.
type Planner interface {
	LinearPlan(cgo.LinearParams) (cgo.LinearParams, uint64, error)
	AttentionPlan(cgo.AttentionParams) (cgo.AttentionParams, uint64, error)
	ArgmaxPlan(cgo.ArgmaxParams) (cgo.ArgmaxParams, uint64, error)
	MLAAttentionPlan(cgo.MLAAttentionParams) (cgo.MLAAttentionParams, uint64, error)
}

// AddInt32Params is one db_add_i32 call.
type AddInt32Params struct {
	Ptr          uint64
	Count, Delta int
}

// Op is one call of a step: its name ("qkv_proj", "attention", "rmsnorm", ...), its layer
// (-1 outside the layers) and the params of exactly one kernel entry point.
type Op struct {
	Name  string
	Layer int

	Linear        *cgo.LinearParams
	Attention     *cgo.AttentionParams
	KVAppend      *cgo.KVAppendParams
	Embedding     *cgo.EmbeddingParams
	RMSNorm       *cgo.RMSNormParams
	RopeKVAppend  *cgo.RopeAppendParams
	GatedAct      *cgo.GatedActParams
	BiasAdd       *cgo.BiasAddParams
	Argmax        *cgo.ArgmaxParams
	MoERoute      *cgo.MoERouteParams
	MoEGroup      *cgo.MoEGroupParams
	MoECombine    *cgo.MoECombineParams
	GroupedLinear *cgo.GroupedLinearParams
	AddInt32      *AddInt32Params
	MLARopeAppend *cgo.MLARopeAppendParams
	MLAAttention  *cgo.MLAAttentionParams
}

// UsesAttentionWorkspace: the op's split counters live in the attention's own workspace.
func (o Op) UsesAttentionWorkspace() bool { return o.Attention != nil || o.MLAAttention != nil }

// Kernel is the entry point the op calls: "linear", "attention", "rmsnorm", ...
func (o Op) Kernel() string {
	switch {
	case o.Linear != nil:
		return "linear"
	case o.Attention != nil:
		return "attention"
	case o.KVAppend != nil:
		return "kv_append"
	case o.Embedding != nil:
		return "embedding"
	case o.RMSNorm != nil:
		return "rmsnorm"
	case o.RopeKVAppend != nil:
		return "rope_kv_append"
	case o.GatedAct != nil:
		return "gated_act"
	case o.BiasAdd != nil:
		return "bias_add"
	case o.Argmax != nil:
		return "argmax"
	case o.MoERoute != nil:
		return "moe_route"
	case o.MoEGroup != nil:
		return "moe_group"
	case o.MoECombine != nil:
		return "moe_combine"
	case o.GroupedLinear != nil:
		return "grouped_linear"
	case o.AddInt32 != nil:
		return "add_i32"
	case o.MLARopeAppend != nil:
		return "mla_rope_append"
	case o.MLAAttention != nil:
		return "attention_mla"
	}
	return "none"
}

// String names the op with its layer and sizes, for listings and errors.
func (o Op) String() string {
	where := "step"
	if o.Layer >= 0 {
		where = fmt.Sprintf("layer %d", o.Layer)
	}
	var size string
	switch {
	case o.Linear != nil:
		size = fmt.Sprintf("[%d x %d] . [%d x %d]^T", o.Linear.Batch, o.Linear.K, o.Linear.N, o.Linear.K)
		if f := o.Linear.WeightFormat; f != cgo.WeightDense {
			size += " " + formatName(f, o.Linear.GroupSize)
		}
	case o.Attention != nil:
		a := o.Attention
		size = fmt.Sprintf("batch %d, %d/%d heads of %d, cache %d", a.Batch, a.QHeads, a.Cache.KVHeads, a.Cache.HeadDim, a.Cache.Capacity)
		if a.Cache.DType == cgo.DTypeFP8E4M3 {
			size += " (fp8)"
		}
		if a.Window > 0 {
			size += fmt.Sprintf(", window %d", a.Window)
		}
		if a.Chunk > 0 {
			size += fmt.Sprintf(", chunk %d", a.Chunk)
		}
	case o.RMSNorm != nil:
		size = fmt.Sprintf("[%d x %d]", o.RMSNorm.Batch, o.RMSNorm.Hidden)
	case o.GatedAct != nil:
		size = fmt.Sprintf("[%d x %d] %v", o.GatedAct.Batch, o.GatedAct.FFN, o.GatedAct.Activation)
	case o.MoERoute != nil:
		size = routeString(*o.MoERoute)
	case o.GroupedLinear != nil:
		g := o.GroupedLinear
		size = fmt.Sprintf("%d rows over %d experts of [%d x %d]", g.Rows, g.Experts, g.N, g.K)
		if g.ExpertOffsets == 0 {
			size = fmt.Sprintf("%d groups of [%d x %d] . [%d x %d]^T", g.Experts, g.Rows, g.K, g.N, g.K)
		}
		if g.Format != cgo.WeightDense {
			size += " " + formatName(g.Format, g.GroupSize)
		}
	case o.MLAAttention != nil:
		a := o.MLAAttention
		size = fmt.Sprintf("batch %d, %d heads over one latent cache of %d", a.Batch, a.QHeads, a.Cache.Capacity)
	case o.Argmax != nil:
		size = fmt.Sprintf("[%d x %d]", o.Argmax.Batch, o.Argmax.Vocab)
	}
	s := fmt.Sprintf("%s %s (%s)", where, o.Name, o.Kernel())
	if size != "" {
		s += " " + size
	}
	return s
}

// Launch queues the op on l.
func (o Op) Launch(l Launcher) error {
	var err error
	switch {
	case o.Linear != nil:
		err = l.Linear(*o.Linear)
	case o.Attention != nil:
		err = l.Attention(*o.Attention)
	case o.KVAppend != nil:
		err = l.KVAppend(*o.KVAppend)
	case o.Embedding != nil:
		err = l.Embedding(*o.Embedding)
	case o.RMSNorm != nil:
		err = l.RMSNorm(*o.RMSNorm)
	case o.RopeKVAppend != nil:
		err = l.RopeKVAppend(*o.RopeKVAppend)
	case o.GatedAct != nil:
		err = l.GatedAct(*o.GatedAct)
	case o.BiasAdd != nil:
		err = l.BiasAdd(*o.BiasAdd)
	case o.Argmax != nil:
		err = l.Argmax(*o.Argmax)
	case o.MoERoute != nil:
		err = l.MoERoute(*o.MoERoute)
	case o.MoEGroup != nil:
		err = l.MoEGroup(*o.MoEGroup)
	case o.MoECombine != nil:
		err = l.MoECombine(*o.MoECombine)
	case o.GroupedLinear != nil:
		err = l.GroupedLinear(*o.GroupedLinear)
	case o.AddInt32 != nil:
		err = l.AddInt32(o.AddInt32.Ptr, o.AddInt32.Count, o.AddInt32.Delta)
	case o.MLARopeAppend != nil:
		err = l.MLARopeAppend(*o.MLARopeAppend)
	case o.MLAAttention != nil:
		err = l.MLAAttention(*o.MLAAttention)
	default:
		err = fmt.Errorf("no call")
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o, err)
	}
	return nil
}

// Plan resolves the op's variant and splits on pl and points it at the workspace (shared by
// every op: they run one after another on one stream). It returns the workspace bytes the op
// needs; a workspace smaller than that is not given to it (the caller plans twice: once to
// size the workspace, once with it).
func (o *Op) Plan(pl Planner, workspace, workspaceBytes uint64) (uint64, error) {
	var need uint64
	var err error
	switch {
	case o.Linear != nil:
		var p cgo.LinearParams
		if p, need, err = pl.LinearPlan(*o.Linear); err == nil {
			p.Workspace, p.WorkspaceBytes = giveWorkspace(need, workspace, workspaceBytes)
			*o.Linear = p
		}
	case o.Attention != nil:
		var p cgo.AttentionParams
		if p, need, err = pl.AttentionPlan(*o.Attention); err == nil {
			p.Workspace, p.WorkspaceBytes = giveWorkspace(need, workspace, workspaceBytes)
			*o.Attention = p
		}
	case o.MLAAttention != nil:
		var p cgo.MLAAttentionParams
		if p, need, err = pl.MLAAttentionPlan(*o.MLAAttention); err == nil {
			p.Workspace, p.WorkspaceBytes = giveWorkspace(need, workspace, workspaceBytes)
			*o.MLAAttention = p
		}
	case o.Argmax != nil:
		var p cgo.ArgmaxParams
		if p, need, err = pl.ArgmaxPlan(*o.Argmax); err == nil {
			p.Workspace, p.WorkspaceBytes = giveWorkspace(need, workspace, workspaceBytes)
			*o.Argmax = p
		}
	}
	if err != nil {
		return 0, fmt.Errorf("planning %s: %w", o, err)
	}
	return need, nil
}

func giveWorkspace(need, ptr, bytes uint64) (uint64, uint64) {
	if need == 0 || need > bytes {
		return 0, 0
	}
	return ptr, bytes
}

// Ops lists the calls of one step in launch order, with the buffers at the addresses addr
// gives (by buffer name; see Program.Buffers). The step follows the forward pass of
// bench/ref: every op's output rounded to the activation dtype, the residual stream added in
// the fused RMSNorm, the next ids written by the argmax and the positions and lengths
// advanced by one db_add_i32, so that the same calls make every step.
func (p *Program) Ops(addr func(name string) uint64) []Op {
	s := p.Model
	dt := p.DType
	el := dt.Bytes()
	B, H, V := p.Batch, s.Hidden, s.Vocab
	hd := s.HeadDim
	qd, kvd := s.QHeads*hd, s.KVHeads*hd
	gemma := gemmaFamily(s)
	var ops []Op
	emit := func(layer int, name string, o Op) {
		o.Name, o.Layer = name, layer
		ops = append(ops, o)
	}
	w := func(layer int, name string) uint64 { return addr(tensorKey(layer, name)) }
	linear := func(layer int, name string, x, wt, y uint64, batch, n, k int) {
		emit(layer, name, Op{Linear: &cgo.LinearParams{X: x, W: wt, Y: y, Batch: batch, N: n, K: k, DType: dt}})
	}
	bias := func(layer int, name string, y, b uint64, batch, n int) {
		emit(layer, name, Op{BiasAdd: &cgo.BiasAddParams{Y: y, Bias: b, Batch: batch, N: n, DType: dt}})
	}
	norm := func(layer int, name string, x, residual, weight, out uint64, rows, width int) {
		emit(layer, name, Op{RMSNorm: &cgo.RMSNormParams{X: x, Residual: residual, Weight: weight, Out: out,
			Batch: rows, Hidden: width, Eps: NormEps, UnitOffset: gemma, DType: dt}})
	}
	act := activation(s)
	// A gated MLP of width f on x into out, with weights named up and down.
	mlp := func(layer int, prefix string, x, out uint64, f int, up, down, upBias, downBias string) {
		gu, h := addr(bufGateUp), addr(bufAct)
		linear(layer, prefix+"gate_up_proj", x, w(layer, up), gu, B, 2*f, H)
		if upBias != "" {
			bias(layer, prefix+"gate_up_bias", gu, w(layer, upBias), B, 2*f)
		}
		ga := act
		ga.GateUp, ga.Out, ga.Batch, ga.FFN, ga.DType = gu, h, B, f, dt
		emit(layer, prefix+"activation", Op{GatedAct: &ga})
		linear(layer, prefix+"down_proj", h, w(layer, down), out, B, H, f)
		if downBias != "" {
			bias(layer, prefix+"down_bias", out, w(layer, downBias), B, H)
		}
	}

	ids, posLens := addr(bufIDs), addr(bufPosLens)
	positions, lens := posLens, posLens+4*uint64(B)
	residual, normed, attnProj, mlpOut := addr(bufResidual), addr(bufNormed), addr(bufAttnProj), addr(bufMLPOut)
	qkv, attnOut := addr(bufQKV), addr(bufAttnOut)
	// Where each sequence's q, k and v lie: the fused projection's [batch, q | k | v] rows, or
	// the three split projections' packed blocks.
	q, k, v, rowStride, qOut := qkv, qkv+uint64(qd)*el, qkv+uint64(qd+kvd)*el, qd+2*kvd, addr(bufQ)
	if p.splitQKV {
		q, k, v, rowStride, qOut = qkv, qkv+uint64(B*qd)*el, qkv+uint64(B*(qd+kvd))*el, 0, qkv
	}

	scale := float32(0)
	if gemma {
		scale = float32(math.Sqrt(float64(H)))
	}
	emit(-1, "embedding", Op{Embedding: &cgo.EmbeddingParams{Table: w(-1, ref.TensorEmbedding), IDs: ids, Out: residual,
		Batch: B, Vocab: V, Hidden: H, DType: dt, Scale: scale}})

	rope := cgo.Rope{Theta: RopeTheta, Scaling: cgo.RopeDefault, RotaryDim: hd}
	if s.RotaryDim > 0 {
		rope.RotaryDim = s.RotaryDim
	}
	capacity := p.Capacity()
	// The MLP half of a layer, after its attention wrote attnProj: the fused residual norm, the
	// dense MLP or the mixture of experts, and Gemma's post-MLP norm.
	mlpHalf := func(l int, ly model.Layer) {
		norm(l, "mlp_norm", attnProj, residual, w(l, ref.TensorMLPNorm), normed, B, H)
		if !ly.MoE {
			upBias, downBias := "", ""
			if s.MLPBias {
				upBias, downBias = ref.TensorGateUpBias, ref.TensorDownBias
			}
			mlp(l, "", normed, mlpOut, ly.FFN, ref.TensorGateUp, ref.TensorDown, upBias, downBias)
		} else {
			p.moe(l, ly.FFN, emit, linear, bias, norm, mlp, w, addr)
		}
		if s.NormsPerLayer() == 4 {
			norm(l, "post_mlp_norm", mlpOut, 0, w(l, ref.TensorPostMLPNorm), mlpOut, B, H)
		}
	}
	for l := 0; l < s.Layers; l++ {
		ly := s.Layer(l)
		if l == 0 {
			norm(l, "attn_norm", residual, 0, w(l, ref.TensorAttnNorm), normed, B, H)
		} else {
			norm(l, "attn_norm", mlpOut, residual, w(l, ref.TensorAttnNorm), normed, B, H)
		}
		if s.IsMLA() {
			p.mlaAttention(l, emit, linear, norm, w, addr) // into attnProj, as the GQA block below
			mlpHalf(l, ly)
			continue
		}
		wqkv := w(l, ref.TensorQKV)
		if p.splitQKV {
			linear(l, "q_proj", normed, wqkv, q, B, qd, H)
			linear(l, "k_proj", normed, wqkv+uint64(qd*H)*el, k, B, kvd, H)
			linear(l, "v_proj", normed, wqkv+uint64((qd+kvd)*H)*el, v, B, kvd, H)
			if s.AttnBias {
				b := w(l, ref.TensorQKVBias)
				bias(l, "q_bias", q, b, B, qd)
				bias(l, "k_bias", k, b+uint64(qd)*el, B, kvd)
				bias(l, "v_bias", v, b+uint64(qd+kvd)*el, B, kvd)
			}
		} else {
			linear(l, "qkv_proj", normed, wqkv, qkv, B, qd+2*kvd, H)
			if s.AttnBias {
				bias(l, "qkv_bias", qkv, w(l, ref.TensorQKVBias), B, qd+2*kvd)
			}
		}
		switch {
		case s.QKNorm == "rms":
			norm(l, "q_norm", q, 0, w(l, ref.TensorQNorm), q, B*s.QHeads, hd)
			norm(l, "k_norm", k, 0, w(l, ref.TensorKNorm), k, B*s.KVHeads, hd)
		case s.QKNorm == "l2" && ly.RoPE:
			// Llama 4's unweighted norm (w' = 1 + 0 of a zero vector), before the rotary where
			// Llama 4 norms after it: the same in exact arithmetic, since it commutes with a rotation.
			for _, n := range []struct {
				name string
				x    uint64
				rows int
			}{{"q_norm", q, B * s.QHeads}, {"k_norm", k, B * s.KVHeads}} {
				emit(l, n.name, Op{RMSNorm: &cgo.RMSNormParams{X: n.x, Weight: w(l, ref.TensorQNorm), Out: n.x,
					Batch: n.rows, Hidden: hd, Eps: NormEps, UnitOffset: true, DType: dt}})
			}
		}
		cache := cgo.KVCache{K: w(l, ref.TensorKCache), V: w(l, ref.TensorVCache), Layout: cgo.KVContiguous, DType: dt,
			KVHeads: s.KVHeads, HeadDim: hd, Capacity: capacity}
		switch {
		case p.splitQKV && !ly.RoPE:
			emit(l, "kv_append", Op{KVAppend: &cgo.KVAppendParams{KNew: k, VNew: v, Positions: positions, Cache: cache, Batch: B}})
		default:
			// Rotary dims 0 in a layer without rotary: q copied to q_out, k and v appended.
			r, name := rope, "rope_kv_append"
			if !ly.RoPE {
				r.RotaryDim, name = 0, "kv_append"
			}
			rp := &cgo.RopeAppendParams{Q: q, KNew: k, VNew: v, Positions: positions, Cache: cache, Rope: r, Batch: B,
				QHeads: s.QHeads, RowStride: rowStride}
			if qOut != q {
				rp.QOut = qOut
			}
			emit(l, name, Op{RopeKVAppend: rp})
		}
		at := &cgo.AttentionParams{Q: qOut, Out: attnOut, ContextLens: lens, Cache: cache, Batch: B, QHeads: s.QHeads,
			MaxContext: capacity, Window: ly.Window, Chunk: ly.Chunk}
		if s.AttentionSinks {
			at.Sinks = w(l, ref.TensorSinks)
		}
		emit(l, "attention", Op{Attention: at})
		linear(l, "o_proj", attnOut, w(l, ref.TensorO), attnProj, B, H, qd)
		if s.OProjBias {
			bias(l, "o_bias", attnProj, w(l, ref.TensorOBias), B, H)
		}
		if s.NormsPerLayer() == 4 {
			norm(l, "post_attn_norm", attnProj, 0, w(l, ref.TensorPostAttnNorm), attnProj, B, H)
		}
		mlpHalf(l, ly)
	}
	final := addr(bufFinal)
	norm(-1, "final_norm", mlpOut, residual, w(-1, ref.TensorFinalNorm), final, B, H)
	head := ref.TensorLMHead
	if s.TiedEmbeddings {
		head = ref.TensorEmbedding
	}
	logits := addr(bufLogits)
	linear(-1, "lm_head", final, w(-1, head), logits, B, V, H)
	if s.LMHeadBias {
		bias(-1, "lm_head_bias", logits, w(-1, ref.TensorLMHeadBias), B, V)
	}
	emit(-1, "argmax", Op{Argmax: &cgo.ArgmaxParams{Logits: logits, IDs: ids, Batch: B, Vocab: V, DType: dt}})
	emit(-1, "advance", Op{AddInt32: &AddInt32Params{Ptr: posLens, Count: 2 * B, Delta: 1}})
	return p.quantize(ops, addr)
}

// moe emits a mixture of experts' layer: the router, top-k, grouping (with the gather of
// each slot's row), the experts' gate_up and down over exactly their rows, the gated
// activation and the weighted combine; shared experts run as a dense MLP beside them and
// are added to the combine.
func (p *Program) moe(l, shared int,
	emit func(int, string, Op),
	linear func(int, string, uint64, uint64, uint64, int, int, int),
	bias func(int, string, uint64, uint64, int, int),
	norm func(int, string, uint64, uint64, uint64, uint64, int, int),
	mlp func(int, string, uint64, uint64, int, string, string, string, string),
	w func(int, string) uint64, addr func(string) uint64) {
	s := p.Model
	dt := p.DType
	B, H, E, k, ef := p.Batch, s.Hidden, s.Experts, s.ExpertsPerToken, s.ExpertFFN
	rows := B * k
	normed, mlpOut := addr(bufNormed), addr(bufMLPOut)
	logits := addr(bufRouterLogits)
	linear(l, "router", normed, w(l, ref.TensorRouter), logits, B, E, H)
	route := Routing(s)
	if s.RouterBias && !ref.CorrectionBias(s) {
		bias(l, "router_bias", logits, w(l, ref.TensorRouterBias), B, E)
	} else if s.RouterBias {
		route.CorrectionBias = w(l, ref.TensorRouterBias)
	}
	ids, weights := addr(bufTopKIDs), addr(bufTopKWeights)
	route.Logits, route.TopKIDs, route.TopKWeights, route.Batch, route.Experts, route.TopK, route.DType = logits, ids, weights, B, E, k, dt
	emit(l, "moe_route", Op{MoERoute: &route})
	// Llama 4 weighs each expert's input (the gather) and sums the outputs unweighted.
	_, weighInput := ref.RouterOf(s)
	var rowWeights, combineWeights uint64 = 0, weights
	if weighInput {
		rowWeights, combineWeights = weights, 0
	}
	offsets, slotRows, xSorted := addr(bufExpertOffsets), addr(bufSlotRows), addr(bufXSorted)
	emit(l, "moe_group", Op{MoEGroup: &cgo.MoEGroupParams{TopKIDs: ids, ExpertCounts: addr(bufExpertCounts), ExpertOffsets: offsets,
		SortedSlots: addr(bufSortedSlots), SlotRows: slotRows, X: normed, XSorted: xSorted, Batch: B, TopK: k, Experts: E, Hidden: H, DType: dt,
		RowWeights: rowWeights}})
	gu, h, y := addr(bufExpertGateUp), addr(bufExpertAct), addr(bufExpertOut)
	var upBias, downBias uint64 // fused into the grouped linear: one rounding
	sharedUpBias, sharedDownBias := "", ""
	if s.MLPBias {
		upBias, downBias = w(l, ref.TensorExpertUpBias), w(l, ref.TensorExpertDownBias)
		sharedUpBias, sharedDownBias = ref.TensorSharedUpBias, ref.TensorSharedDownBias
	}
	emit(l, "expert_gate_up", Op{GroupedLinear: &cgo.GroupedLinearParams{X: xSorted, W: w(l, ref.TensorExpertUp), Bias: upBias, Y: gu,
		ExpertOffsets: offsets, Rows: rows, Experts: E, N: 2 * ef, K: H, DType: dt}})
	act := activation(s)
	act.GateUp, act.Out, act.Batch, act.FFN, act.DType = gu, h, rows, ef, dt
	emit(l, "expert_activation", Op{GatedAct: &act})
	emit(l, "expert_down", Op{GroupedLinear: &cgo.GroupedLinearParams{X: h, W: w(l, ref.TensorExpertDown), Bias: downBias, Y: y,
		ExpertOffsets: offsets, Rows: rows, Experts: E, N: H, K: ef, DType: dt}})
	if shared == 0 {
		emit(l, "moe_combine", Op{MoECombine: &cgo.MoECombineParams{YSorted: y, SlotRows: slotRows, TopKWeights: combineWeights,
			Out: mlpOut, Batch: B, TopK: k, Hidden: H, DType: dt}})
		return
	}
	moeOut := addr(bufMoEOut)
	emit(l, "moe_combine", Op{MoECombine: &cgo.MoECombineParams{YSorted: y, SlotRows: slotRows, TopKWeights: combineWeights,
		Out: moeOut, Batch: B, TopK: k, Hidden: H, DType: dt}})
	mlp(l, "shared_expert_", normed, mlpOut, shared, ref.TensorSharedUp, ref.TensorSharedDown, sharedUpBias, sharedDownBias)
	// mlp_out = round(combine + shared): the residual half of a fused RMSNorm is that add (its
	// normalised output goes to a scratch row nobody reads); no plain add kernel exists.
	norm(l, "shared_expert_add", moeOut, mlpOut, w(l, ref.TensorMLPNorm), addr(bufScratch), B, H)
}
