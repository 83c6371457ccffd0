// Quantized weights and the fp8 KV cache: the engine against the float64 forward pass (weights
// dequantised exactly from the same fill, the cache as the kernels store it), and the program's
// buffers, bytes and refusals.

package step

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

func gptq(group int) *model.Quantization {
	return &model.Quantization{Method: model.QuantGPTQ, Bits: 4, GroupSize: group, Zeros: true}
}

func awq(group int) *model.Quantization {
	return &model.Quantization{Method: model.QuantAWQ, Bits: 4, GroupSize: group, Zeros: true}
}

// quantTiny is the tiny llama with weights w (a weight dtype, or bf16 with q's format) and a
// kvDType cache.
func quantTiny(name string, base model.Shape, w model.DType, q *model.Quantization, kv model.DType) model.Shape {
	s := base
	s.Name = name
	s.WeightDType, s.Quant, s.KVDType = w, q, kv
	return s
}

// compareWithForward traces c eagerly and checks every logit of every step inside the forward
// pass's bound and every decided greedy token equal to the reference's; it returns how many
// logits were checked.
func compareWithForward(t *testing.T, dev *cgo.Device, c Config) int {
	t.Helper()
	tr := trace(t, dev, c, Eager)
	s := c.Model
	rd := ref.BF16
	if dtypeOf(s) == cgo.DTypeFP16 {
		rd = ref.FP16
	}
	f, err := ref.NewForward(s, c.Seed, c.Batch, c.Context, c.Steps, rd)
	if err != nil {
		t.Fatal(err)
	}
	V, checked, bad := s.Vocab, 0, 0
	var worst, sq, bsum float64
	for i := range tr.Tokens {
		want, bounds, err := f.Step(tr.Tokens[i])
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := LogitsOf(dtypeOf(s), tr.Logits[i])
		for j := range got {
			if math.IsInf(bounds[j], 1) {
				continue
			}
			checked++
			sq += want[j] * want[j]
			bsum += bounds[j]
			d := math.Abs(got[j] - want[j])
			worst = math.Max(worst, d/bounds[j])
			if !(d <= bounds[j]) {
				if bad++; bad <= 5 {
					t.Errorf("step %d sequence %d logit %d: %g, reference %g (bound %g)", i, j/V, j%V, got[j], want[j], bounds[j])
				}
			}
		}
		greedy := ref.Greedy(want, V)
		for b, ok := range ref.Decided(want, bounds, V) {
			if ok && tr.Next[i][b] != greedy[b] {
				t.Errorf("step %d sequence %d: the device chose %d, the reference %d by a margin past the bounds", i, b, tr.Next[i][b], greedy[b])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no logit was checked")
	}
	t.Logf("%d logits checked (the worst at %.2f of its bound; logits' rms %.3g, mean bound %.3g)", checked, worst,
		math.Sqrt(sq/float64(checked)), bsum/float64(checked))
	return checked
}

// TestQuantStepMatchesForwardPass: every weight format and the fp8 cache on tiny models at
// batch 1 and an odd batch, teacher-forced against the forward pass.
func TestQuantStepMatchesForwardPass(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	llama, qwen3 := Tiny()[0], Tiny()[3]
	fp16 := Tiny()[1]
	keptAttn := &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32, AttentionKept: true}
	fp8Block := &model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}
	for _, tc := range []struct {
		s     model.Shape
		batch int
	}{
		{quantTiny("fp8", llama, model.FP8, nil, model.BF16), 1},
		{quantTiny("fp8-config", llama, model.BF16, &model.Quantization{Method: model.QuantFP8, Bits: 8}, model.BF16), 3},
		{quantTiny("int8", llama, model.INT8, nil, model.BF16), 3},
		{quantTiny("fp8-block", llama, model.BF16, fp8Block, model.BF16), 3},
		{quantTiny("qwen3-fp8-block-split", qwen3, model.BF16, fp8Block, model.BF16), 3},
		{quantTiny("int4-g32", llama, model.BF16, gptq(32), model.BF16), 1},
		{quantTiny("int4-g128", llama, model.BF16, gptq(128), model.BF16), 3},
		{quantTiny("int4-zp-g32", llama, model.BF16, awq(32), model.BF16), 3},
		{quantTiny("int4-zp-g128", llama, model.BF16, awq(128), model.BF16), 1},
		{quantTiny("mxfp4", llama, model.BF16, &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32}, model.BF16), 3},
		{quantTiny("mxfp4-attn-kept", llama, model.BF16, keptAttn, model.BF16), 1},
		// q, k and v apart (QK-norm past batch 1): the row blocks of one packed qkv weight.
		{quantTiny("qwen3-int4-zp-split", qwen3, model.BF16, awq(64), model.BF16), 3},
		{quantTiny("kv-fp8", llama, model.BF16, nil, model.FP8), 1},
		{quantTiny("kv-fp8", llama, model.BF16, nil, model.FP8), 3},
		{quantTiny("kv-fp8-fp16", fp16, model.FP16, nil, model.FP8), 3},
		{quantTiny("kv-fp8-qwen3-split", qwen3, model.BF16, nil, model.FP8), 3},
		{quantTiny("int4-kv-fp8", llama, model.BF16, gptq(64), model.FP8), 3},
	} {
		c := Config{Model: tc.s, Batch: tc.batch, Context: 37, Steps: 3, Seed: 23}
		t.Run(fmt.Sprintf("%s/b%d", tc.s.Name, tc.batch), func(t *testing.T) {
			if f := Feature(tc.s); f != "" {
				t.Fatalf("Feature refuses it: %s", f)
			}
			compareWithForward(t, dev, c)
		})
	}
}

// TestQuantProgram: the quantized program's buffers are the packed layouts (bytes counted with
// their scales and zero points), its linears launch the format with the right row blocks, the
// LM head and router stay dense, an fp8 cache is one byte an element.
func TestQuantProgram(t *testing.T) {
	s := quantTiny("awq", Tiny()[3], model.BF16, awq(64), model.FP8)
	p, err := New(Config{Model: s, Batch: 3, Context: 10, Steps: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	H, qd, kvd, f := s.Hidden, s.QHeads*s.HeadDim, s.KVHeads*s.HeadDim, s.FFN
	var quant uint64
	for _, nk := range [][2]int{{qd + 2*kvd, H}, {H, qd}, {2 * f, H}, {H, f}} {
		quant += cgo.WeightINT4ZeroPt.Layout(nk[0], nk[1], 64).Bytes()
	}
	// bf16: the embedding and LM head; attn and mlp norms a layer and the final one; q and k norms
	dense := uint64(2*s.Vocab*H*2) + uint64((2*s.Layers+1)*H*2) + uint64(2*s.Layers*s.HeadDim*2)
	if got, want := p.WeightBytes(), dense+uint64(s.Layers)*quant; got != want {
		t.Errorf("WeightBytes %d, want %d (dense %d + %d layers of %d bytes of int4-zp g64 with scales and zeros)", got, want, dense, s.Layers, quant)
	}
	if got, want := p.CacheBytes(), uint64(2*s.Layers*3*kvd*12); got != want {
		t.Errorf("CacheBytes %d, want %d (one byte an fp8 element)", got, want)
	}
	if p.WeightFormat() != "int4-zp g64" {
		t.Errorf("WeightFormat %q", p.WeightFormat())
	}
	ops := p.Ops(func(name string) uint64 { return uint64(p.index[name]+1) << 32 })
	seen := map[string]bool{}
	for _, o := range ops {
		switch {
		case o.Linear != nil:
			l := o.Linear
			want := o.Name != "lm_head"
			if got := l.WeightFormat != cgo.WeightDense; got != want {
				t.Errorf("%s: weight format %v", o, l.WeightFormat)
			}
			if !want {
				continue
			}
			seen[o.Name] = true
			if err := l.WeightFormat.CheckShape(l.N, l.K, l.GroupSize); err != nil {
				t.Errorf("%s: %v", o, err)
			}
			tensor, row := p.quantLinear(o.Name)
			base := uint64(p.index[tensorKey(o.Layer, tensor)]+1) << 32
			q := p.Buffers[p.index[tensorKey(o.Layer, tensor)]].Fill.Quant
			lay := cgo.WeightINT4ZeroPt.Layout(q.N, q.K, 64)
			sOff := (lay.WBytes + 15) &^ 15
			zOff := sOff + (lay.ScaleBytes+15)&^15
			groups := uint64(q.K / 64)
			if l.W != base+uint64(row*q.K/2) || l.Scales != base+sOff+uint64(row)*groups*2 || l.Zeros != base+zOff+uint64(row/2)*groups {
				t.Errorf("%s: W %#x scales %#x zeros %#x from the buffer at %#x (row %d)", o, l.W, l.Scales, l.Zeros, base, row)
			}
		case o.Attention != nil:
			c := o.Attention.Cache
			if c.DType != cgo.DTypeFP8E4M3 || c.ActDType != cgo.DTypeBF16 || !(c.KScale > 0) || c.KScale == c.VScale {
				t.Errorf("%s: cache %v over %v, scales %g and %g", o, c.DType, c.ActDType, c.KScale, c.VScale)
			}
		case o.RopeKVAppend != nil:
			if o.RopeKVAppend.Cache.DType != cgo.DTypeFP8E4M3 {
				t.Errorf("%s: appends to a %v cache", o, o.RopeKVAppend.Cache.DType)
			}
		}
	}
	for _, n := range []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"} {
		if !seen[n] {
			t.Errorf("no quantized %s", n)
		}
	}
}

// TestQuantFeature: what the step refuses of the formats, naming it, before any device work.
func TestQuantFeature(t *testing.T) {
	llama := Tiny()[0]
	moe := TinyMoE()
	for _, tc := range []struct {
		s    model.Shape
		want string
	}{
		{quantTiny("fp8-tensor-moe", moe, model.BF16, &model.Quantization{Method: model.QuantFP8, Bits: 8, PerTensor: true}, model.BF16), "fp8-tensor experts"},
		// gate_up's n is 2 x 96: an expert's rows end mid-tile
		{quantTiny("fp8-block-moe-96", func() model.Shape { s := moe; s.ExpertFFN = 96; return s }(), model.BF16,
			&model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}, model.BF16), "do not end on a 128-row tile"},
		{quantTiny("int4-zp-moe-k48", func() model.Shape { s := moe; s.ExpertFFN = 48; return s }(), model.BF16, awq(32), model.BF16), "expert down_proj"},
		{quantTiny("fp8-block-64", llama, model.BF16, &model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 64, BlockK: 64}, model.BF16), "fp8 (64x64 block scales)"},
		{quantTiny("int3", llama, model.BF16, &model.Quantization{Method: model.QuantGPTQ, Bits: 3, GroupSize: 128}, model.BF16), "gptq int3"},
		// FFN 256 with groups of 128 fits; 96 does not divide the 128-wide hidden
		{quantTiny("group-96", llama, model.BF16, gptq(96), model.BF16), "group size 96"},
		{quantTiny("fp32", llama, model.FP32, nil, model.FP32), "fp32 weights"},
		{quantTiny("int8-kv", llama, model.BF16, nil, model.INT8), "a int8 KV cache beside bf16"},
	} {
		f := Feature(tc.s)
		if !strings.Contains(f, tc.want) {
			t.Errorf("%s: Feature %q, want it to name %q", tc.s.Name, f, tc.want)
		}
	}
	odd := quantTiny("odd-k", llama, model.BF16, gptq(128), model.BF16)
	odd.FFN = 192 // down_proj's k of 192 is not a multiple of the group of 128
	if f := Feature(odd); !strings.Contains(f, "down_proj") || !strings.Contains(f, "int4 weights") || !strings.Contains(f, "192") {
		t.Errorf("Feature %q: want down_proj, its format and its k named", f)
	}
}

// TestQuantStepGraphMatchesEager: the captured step of quantized weights and an fp8 cache
// replays the eager step's tokens and logits bit for bit.
func TestQuantStepGraphMatchesEager(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	s := quantTiny("int4-zp-kv-fp8", Tiny()[0], model.BF16, awq(32), model.FP8)
	c := Config{Model: s, Batch: 3, Context: 19, Steps: 3, Seed: 5}
	eager := trace(t, dev, c, Eager)
	graph := trace(t, dev, c, Graph)
	for i := range eager.Logits {
		if !slices.Equal(eager.Logits[i], graph.Logits[i]) || !slices.Equal(eager.Next[i], graph.Next[i]) {
			t.Fatalf("step %d: graph and eager differ", i)
		}
	}
}

// tinyModel is bench/ref's tiny model of family.
func tinyModel(t *testing.T, family string) model.Shape {
	t.Helper()
	for _, m := range ref.TinyModels() {
		if m.Shape.Family == family {
			return m.Shape
		}
	}
	t.Fatalf("no tiny %s model", family)
	return model.Shape{}
}

// TestQuantExpertsMatchForwardPass: quantized routed experts (one fill of experts x n rows a
// tensor, run by the quantized grouped linear) against the forward pass: the tiny gpt-oss-like
// model with mxfp4 experts and its attention kept bf16, as gpt-oss ships, at batch 1 and 3, and
// the other formats on the tiny Mixtral-like model (4 experts of 128: fp8-block's tiles fit).
func TestQuantExpertsMatchForwardPass(t *testing.T) {
	testtier.Slow(t, "whole quantized-expert steps in every format")
	dev := cgotest.EmuDevice(t)
	gptoss := tinyModel(t, "gpt_oss")
	moe := TinyMoE()
	mx := &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32, AttentionKept: true}
	fp8Block := &model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}
	for _, tc := range []struct {
		s     model.Shape
		batch int
	}{
		{quantTiny("gptoss-mxfp4", gptoss, model.BF16, mx, model.BF16), 1},
		{quantTiny("gptoss-mxfp4", gptoss, model.BF16, mx, model.BF16), 3},
		{quantTiny("moe-fp8", moe, model.FP8, nil, model.BF16), 3},
		{quantTiny("moe-int8", moe, model.INT8, nil, model.BF16), 1},
		{quantTiny("moe-int4-g64", moe, model.BF16, gptq(64), model.BF16), 3},
		{quantTiny("moe-int4-zp-g32", moe, model.BF16, awq(32), model.BF16), 3},
		{quantTiny("moe-fp8-block", moe, model.BF16, fp8Block, model.BF16), 3},
	} {
		c := Config{Model: tc.s, Batch: tc.batch, Context: 13, Steps: 3, Seed: 29}
		t.Run(fmt.Sprintf("%s/b%d", tc.s.Name, tc.batch), func(t *testing.T) {
			if f := Feature(tc.s); f != "" {
				t.Fatalf("Feature refuses it: %s", f)
			}
			p, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			grouped := 0
			for _, o := range p.Ops(func(name string) uint64 { return uint64(p.index[name]+1) << 32 }) {
				if g := o.GroupedLinear; g != nil {
					if g.Format == cgo.WeightDense || g.Scales == 0 {
						t.Errorf("%s: dense experts", o)
					}
					grouped++
				}
			}
			if grouped == 0 {
				t.Fatal("no grouped linear")
			}
			compareWithForward(t, dev, c)
		})
	}
}
