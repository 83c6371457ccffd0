package ref

import (
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// The forward pass's quantized weights are the fill's dequantised rows exactly (the codes times
// the row's scale for the per-channel formats), about the dense fill's variance, and only the
// projections are quantized.
func TestForwardQuantWeights(t *testing.T) {
	base := tinyShape("llama", "tiny", 128, 256, 1, 4, 2, 64, 200, false)
	for _, tc := range []struct {
		w model.DType
		q *model.Quantization
		f cgo.WeightFormat
	}{
		{model.FP8, nil, cgo.WeightFP8},
		{model.INT8, nil, cgo.WeightINT8},
		{model.BF16, &model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}, cgo.WeightFP8Block},
		{model.BF16, &model.Quantization{Method: model.QuantGPTQ, Bits: 4, GroupSize: 32}, cgo.WeightINT4},
		{model.BF16, &model.Quantization{Method: model.QuantAWQ, Bits: 4, GroupSize: 128, Zeros: true}, cgo.WeightINT4ZeroPt},
		{model.BF16, &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32}, cgo.WeightMXFP4},
	} {
		s := base
		s.WeightDType, s.Quant = tc.w, tc.q
		f, err := NewForward(s, 3, 1, 4, 1, BF16)
		if err != nil {
			t.Fatal(err)
		}
		n, k := 2*s.FFN, s.Hidden
		w := f.layers[0].gateUp
		q := StepQuantFill(s, 3, 0, TensorGateUp, n, k)
		if q.Format != tc.f {
			t.Fatalf("%v: format %v", tc.f, q.Format)
		}
		scales := f.scalesOf(w)
		if (scales != nil) != (tc.f == cgo.WeightFP8 || tc.f == cgo.WeightINT8 || tc.f == cgo.WeightFP8Block) {
			t.Errorf("%v: code scales %v", tc.f, scales != nil)
		}
		row := make([]float64, k)
		var sq float64
		for r := 0; r < n; r++ {
			q.Row(r, row)
			for c, want := range row {
				got := float64(w[r*k+c])
				if scales != nil {
					got *= scales.at(r, c)
				}
				if got != want {
					t.Fatalf("%v: W[%d, %d] = %g, the fill's %g", tc.f, r, c, got, want)
				}
				sq += want * want
			}
		}
		// variance 1/k, as the dense fill's: k times the mean square near 1
		v := sq / float64(n*k) * float64(k)
		if v < 0.4 || v > 2.5 {
			t.Errorf("%v: k x mean square %.3g, want about 1", tc.f, v)
		}
		t.Logf("%v: k x mean square %.3g", tc.f, v)
		if !StepQuantized(s, TensorQKV) || StepQuantized(s, TensorLMHead) || StepQuantized(s, TensorRouter) {
			t.Errorf("%v: the LM head or router quantized, or the projections not", tc.f)
		}
	}
	kept := base
	kept.Quant = &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32, AttentionKept: true}
	if StepQuantized(kept, TensorQKV) || StepQuantized(kept, TensorO) || !StepQuantized(kept, TensorDown) {
		t.Error("AttentionKept: the attention projections quantized, or the MLP not")
	}
}
