package step

import (
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// The routing each family's ops carry: DeepSeek-V3's groups, bias and scaling with no bias op
// on the logits and an f32 correction bias; Llama 4's weighted gather and unweighted combine;
// gpt-oss's top-k softmax after its logit bias and its clamped SwiGLU.
func TestProgramRoutings(t *testing.T) {
	preset := func(name string) model.Shape {
		s, err := model.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		// the routing is what this test is about: the attention and weight formats the step
		// may refuse (quantized weights) or that change the op count (latent attention, QK-norm)
		// are taken out
		s.KVLoRARank, s.QLoRARank, s.RoPEHeadDim, s.VHeadDim, s.Quant, s.QKNorm = 0, 0, 0, 0, nil, ""
		if s.HeadDim == 192 {
			s.HeadDim = 128
		}
		s.Layers, s.DenseLayers, s.SlidingLayers, s.SlidingWindow, s.ChunkedLayers, s.AttentionChunk, s.NoRoPELayers = 2, min(s.DenseLayers, 1), 0, 0, 0, 0, 0
		return s
	}
	for _, tc := range []struct {
		name       string
		mode       cgo.MoERouting
		groups     int
		scaling    float32
		correction bool
		weighInput bool
		act        cgo.Activation
	}{
		{"DeepSeek-V3", cgo.MoESigmoidTopK, 8, 2.5, true, false, cgo.ActSiLU},
		{"Kimi-K2", cgo.MoESigmoidTopK, 0, 2.827, true, false, cgo.ActSiLU},
		{"Llama-4-Scout", cgo.MoETopKSigmoid, 0, 0, false, true, cgo.ActSiLU},
		{"gpt-oss-20b", cgo.MoETopKSoftmax, 0, 0, false, false, cgo.ActSwiGLUClamp},
		{"Qwen3-30B-A3B", cgo.MoESoftmaxTopK, 0, 0, false, false, cgo.ActSiLU},
	} {
		s := preset(tc.name)
		if f := Feature(s); f != "" {
			t.Errorf("%s: refused for %s", tc.name, f)
			continue
		}
		p, err := New(Config{Model: s, Batch: 3, Context: 4, Steps: 1})
		if err != nil {
			t.Fatal(err)
		}
		ops := p.Ops(func(string) uint64 { return planAddress })
		routes, biasOps := 0, 0
		for _, o := range ops {
			switch {
			case o.MoERoute != nil:
				routes++
				r := o.MoERoute
				if r.Mode != tc.mode || r.Groups != tc.groups || r.Scaling != tc.scaling || (r.CorrectionBias != 0) != tc.correction ||
					r.Renormalize != (tc.mode == cgo.MoESigmoidTopK || tc.mode == cgo.MoESoftmaxTopK) {
					t.Errorf("%s: %s %+v", tc.name, o, *r)
				}
			case o.MoEGroup != nil && (o.MoEGroup.RowWeights != 0) != tc.weighInput:
				t.Errorf("%s: %s row weights %#x", tc.name, o, o.MoEGroup.RowWeights)
			case o.MoECombine != nil && (o.MoECombine.TopKWeights == 0) != tc.weighInput:
				t.Errorf("%s: %s weights %#x", tc.name, o, o.MoECombine.TopKWeights)
			case o.GatedAct != nil && (o.GatedAct.Activation != tc.act || (tc.act == cgo.ActSwiGLUClamp && (o.GatedAct.Limit != 7 || o.GatedAct.Alpha != 1.702))):
				t.Errorf("%s: %s %+v", tc.name, o, *o.GatedAct)
			case o.Name == "router_bias":
				biasOps++
			}
		}
		if routes != s.MoELayers() || (biasOps > 0) != (s.RouterBias && !tc.correction) {
			t.Errorf("%s: %d routes for %d MoE layers, %d router-bias adds", tc.name, routes, s.MoELayers(), biasOps)
		}
		for _, b := range p.Buffers {
			if b.Fill != nil && b.Fill.Tensor == ref.TensorRouterBias && (b.Fill.DType == cgo.DTypeF32) != tc.correction {
				t.Errorf("%s: %s in %v", tc.name, b.Name, b.Fill.DType)
			}
		}
	}
}
