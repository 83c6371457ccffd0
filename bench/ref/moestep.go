package ref

import "github.com/decodebench/decodebench/bench/model"

// RouterOf is the routing a mixture of experts' family and fields imply (bench/model's
// routing.go has the table), as the step runs it: gpt-oss the top k of its logits then a
// softmax; Llama 4 the top k of the logits weighted by their sigmoid, rounded to the dtype and
// applied to the expert's input (weighInput); sigmoid scoring DeepSeek-V3's noaux_tc choice
// (bias, groups, scaling); otherwise a softmax over all experts and its top k, renormalised
// unless RawTopKWeights. The correction bias (Bias) is the caller's, per layer.
func RouterOf(s model.Shape) (r MoERouter, weighInput bool) {
	r = MoERouter{Mode: MoESoftmaxTopK, Renormalize: !s.RawTopKWeights, Scaling: s.RoutedScaling}
	switch {
	case s.Family == "gpt_oss":
		r.Mode, r.Renormalize = MoETopKSoftmax, false
	case s.Family == "llama4_text":
		r.Mode, r.Renormalize, weighInput = MoETopKSigmoid, false, true
	case s.RouterScoring == "sigmoid":
		r.Mode, r.Groups, r.GroupsKept = MoESigmoidTopK, s.ExpertGroups, s.GroupsKept
	}
	return r, weighInput
}

// CorrectionBias reports whether the router bias of s is a correction bias for the choice
// (sigmoid scoring, stored f32 as DeepSeek-V3 keeps it) rather than a bias on the logits.
func CorrectionBias(s model.Shape) bool {
	r, _ := RouterOf(s)
	return s.RouterBias && r.Mode == MoESigmoidTopK
}

// GptOSSLimit is the clamp of gpt-oss's SwiGLU: the shape's SwiGLULimit, 7 when unset.
func GptOSSLimit(s model.Shape) float64 {
	if s.SwiGLULimit > 0 {
		return s.SwiGLULimit
	}
	return SwiGLULimit
}
