package step

import (
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The MLA layer's calls in order, each head's slice read and written where it lies.
func TestProgramMLA(t *testing.T) {
	s := TinyMLA()
	p, err := New(Config{Model: s, Batch: 3, Context: 9, Steps: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var qAbsorb, vAbsorb *cgo.GroupedLinearParams
	var rope *cgo.MLARopeAppendParams
	var attn *cgo.MLAAttentionParams
	for _, o := range p.Ops(func(string) uint64 { return 1 << 20 }) {
		if o.Layer != 0 {
			continue
		}
		names = append(names, o.Name)
		switch o.Name {
		case "q_absorb":
			qAbsorb = o.GroupedLinear
		case "v_absorb":
			vAbsorb = o.GroupedLinear
		case "mla_rope_append":
			rope = o.MLARopeAppend
		case "attention_mla":
			attn = o.MLAAttention
		}
	}
	want := []string{"attn_norm", "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "q_absorb", "mla_rope_append",
		"attention_mla", "v_absorb", "o_proj", "mlp_norm", "gate_up_proj", "activation", "down_proj"}
	if !slices.Equal(names, want) {
		t.Fatalf("layer 0 calls %v, want %v", names, want)
	}
	if g := *qAbsorb; g.ExpertOffsets != 0 || g.Experts != 4 || g.Rows != 3 || g.N != 512 || g.K != 32 ||
		g.XRowStride != 4*96 || g.XGroupStride != 96 || g.YRowStride != 4*576 || g.YGroupStride != 576 {
		t.Errorf("q_absorb %+v", g)
	}
	if g := *vAbsorb; g.Experts != 4 || g.N != 32 || g.K != 512 || g.XRowStride != 4*512 || g.XGroupStride != 512 ||
		g.YRowStride != 4*32 || g.YGroupStride != 32 {
		t.Errorf("v_absorb %+v", g)
	}
	if rope.QPERowStride != 4*96 || rope.QPEHeadStride != 96 || rope.QPE != 1<<20+32*2 || rope.Rope.RotaryDim != 64 {
		t.Errorf("mla_rope_append %+v", rope)
	}
	if want := float32(ref.MLASoftmaxScale(s)); attn.Scale != want || attn.MaxContext != 11 || attn.Cache.HeadDim != cgo.MLAQKDim {
		t.Errorf("attention_mla scale %g (want %g), max context %d, cache %+v", attn.Scale, want, attn.MaxContext, attn.Cache)
	}
	if !p.Has("layers.1.latent_cache") || p.Has("layers.0.k_cache") || p.Has("layers.0.qkv") {
		t.Errorf("buffers: want a latent cache and no GQA cache or fused qkv")
	}
	// Weights: q_a, q_a_norm, q_b, kv_a, kv_a_norm, w_uk, w_uv, o of the absorbed form; the
	// cache is 3 x 11 x 576 a layer.
	if got, want := p.CacheBytes(), uint64(2*3*11*576*2); got != want {
		t.Errorf("cache bytes %d, want %d", got, want)
	}
	notes := strings.Join(p.Notes, "\n")
	if !strings.Contains(notes, "without DeepSeek's yarn mscale") {
		t.Errorf("the notes do not say which softmax scale: %s", notes)
	}
}

// The tiny MLA model decodes eagerly with consistent bookkeeping, and graph replay gives the
// same bits. (Its values are checked against the forward pass on ref.TinyModels' MLA models.)
func TestTinyMLAEagerAndGraph(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, batch := range []int{1, 3} {
		c := Config{Model: TinyMLA(), Batch: batch, Context: 13, Steps: 3, Seed: 5}
		eager := trace(t, dev, c, Eager)
		checkTrace(t, c, dtypeOf(c.Model), eager)
		graph := trace(t, dev, c, Graph)
		if !slices.EqualFunc(graph.Logits, eager.Logits, slices.Equal) || !slices.EqualFunc(graph.Next, eager.Next, slices.Equal) {
			t.Errorf("batch %d: graph and eager differ: tokens %v vs %v", batch, graph.Next, eager.Next)
		}
	}
}

func TestMLAFeatures(t *testing.T) {
	s := TinyMLA()
	if f := Feature(s); f != "" {
		t.Fatalf("TinyMLA refused: %s", f)
	}
	for _, c := range []struct {
		edit func(*model.Shape)
		want string
	}{
		{func(m *model.Shape) { m.KVLoRARank = 256 }, "kv_lora_rank 256"},
		{func(m *model.Shape) { m.QHeads, m.KVHeads = 129, 129 }, "129 query heads"},
		{func(m *model.Shape) { m.HeadDim = 64 + 60 }, "qk_nope_head_dim 60"},
		{func(m *model.Shape) { m.VHeadDim = 3 }, "o_proj's input 12"},
		{func(m *model.Shape) { m.QLoRARank = 60 }, "q_lora_rank 60"},
	} {
		e := s
		c.edit(&e)
		if got := Feature(e); !strings.Contains(got, c.want) {
			t.Errorf("Feature = %q, want it to contain %q", got, c.want)
		}
	}
}
