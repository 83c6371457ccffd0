package step

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// Routing is db_moe_route's configuration for a mixture of experts, without its buffers and
// sizes: the family's routing as ref.RouterOf gives it (bench/model's routing.go has the
// table), which the forward pass follows too.
func Routing(s model.Shape) cgo.MoERouteParams {
	r, _ := ref.RouterOf(s)
	return cgo.MoERouteParams{Mode: cgo.MoERouting(r.Mode), Renormalize: r.Renormalize, Groups: r.Groups,
		GroupsKept: r.GroupsKept, Scaling: float32(r.Scaling)}
}

// activation is the gated activation of the family, without its buffers and sizes: SiLU,
// Gemma's GeLU-tanh, gpt-oss's clamped SwiGLU.
func activation(s model.Shape) cgo.GatedActParams {
	switch {
	case gemmaFamily(s):
		return cgo.GatedActParams{Activation: cgo.ActGeLUTanh}
	case s.Family == "gpt_oss":
		return cgo.GatedActParams{Activation: cgo.ActSwiGLUClamp, Limit: float32(ref.GptOSSLimit(s)), Alpha: float32(ref.SwiGLUAlpha)}
	}
	return cgo.GatedActParams{Activation: cgo.ActSiLU}
}

// routerBias adds layer l's router bias: a bias on the logits in the weight dtype, or sigmoid
// routing's correction bias, f32 as DeepSeek-V3 keeps it.
func (p *Program) routerBias(l int, weight func(int, string, uint64, float32)) {
	s := p.Model
	E := uint64(s.Experts)
	if !ref.CorrectionBias(s) {
		weight(l, ref.TensorRouterBias, E, ref.BiasScale)
		return
	}
	p.add(Buffer{Name: tensorKey(l, ref.TensorRouterBias), Bytes: 4 * E,
		Fill: &Fill{Tensor: ref.TensorRouterBias, Layer: l, Seed: ref.TensorSeed(p.Seed, l, ref.TensorRouterBias), Scale: ref.BiasScale, Count: E, DType: cgo.DTypeF32}})
}

// moeNotes says how the step's mixture of experts stands beside the model's own.
func moeNotes(s model.Shape) []string {
	if !s.IsMoE() {
		return nil
	}
	var notes []string
	if s.Family == "gpt_oss" {
		notes = append(notes, "gpt-oss's experts interleave gate and up in the checkpoint; the step's synthetic experts hold [gate | up] (the same bytes and FLOPs)")
	}
	if r, _ := ref.RouterOf(s); r.Mode == ref.MoESigmoidTopK {
		notes = append(notes, "the router's logits are stored in the activation dtype before the sigmoid routing (DeepSeek-V3's modeling code keeps them fp32)")
	}
	return notes
}

// routeString says what a route op picks: "top 8 of 256, sigmoid, 4 of 8 groups, renormalised,
// x2.5" (the correction bias is the router_bias buffer's, listed with the weights).
func routeString(r cgo.MoERouteParams) string {
	how := map[cgo.MoERouting]string{cgo.MoESoftmaxTopK: "softmax then top k", cgo.MoETopKSoftmax: "top k then softmax",
		cgo.MoESigmoidTopK: "sigmoid", cgo.MoETopKSigmoid: "top k, sigmoid weight"}[r.Mode]
	s := fmt.Sprintf("top %d of %d, %s", r.TopK, r.Experts, how)
	if r.Groups > 1 {
		s += fmt.Sprintf(", %d of %d groups", r.GroupsKept, r.Groups)
	}
	if r.Renormalize && r.Mode != cgo.MoETopKSoftmax {
		s += ", renormalised"
	}
	if r.Scaling != 0 && r.Scaling != 1 {
		s += fmt.Sprintf(", x%g", r.Scaling)
	}
	return s
}
