package model

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// A model is a list of layers, and each layer is a mixer (what mixes the tokens: grouped-query
// attention with its window, chunk, sinks and rotary; multi-head latent attention; later the
// recurrent kinds) followed by a feed-forward (a dense MLP, or a mixture of experts with its
// shared experts). Each kind is one registered implementation that owns its counts: the
// parameters of one layer, what a layer caches per token and keeps per sequence, and the
// arithmetic per attended token. The totals of cost.go walk the stack and ask each layer's
// kinds; none of them branches on a family.
//
// Adding a mixer kind: a MixerKind constant, a mixer implementation registered in mixers, the
// rule in Shape.Layer that places it, and (outside this package) its kernel, its float64
// reference and its measure spec.

// MixerKind names what mixes the tokens in a layer.
type MixerKind string

const (
	// MixerAttention is grouped-query (or multi-head, multi-query) softmax attention over the
	// KV cache, with the layer's Window, Chunk and rotary.
	MixerAttention MixerKind = "attention"
	// MixerMLA is multi-head latent attention in the absorbed form (DeepSeek-V3, Kimi-K2).
	MixerMLA MixerKind = "mla"
)

// FFNKind names a layer's feed-forward.
type FFNKind string

const (
	FFNDense FFNKind = "dense" // one MLP of Layer.FFN
	FFNMoE   FFNKind = "moe"   // a router, Experts experts of ExpertFFN, shared experts of Layer.FFN
)

// mixer is one kind of token mixer: its counts for one layer of a shape.
type mixer interface {
	// matrices lists the layer's projection weights.
	matrices(s Shape, l Layer) []matrix
	// smallParams counts its other parameters (biases, norms inside the mixer, sinks).
	smallParams(s Shape, l Layer) int64
	// kvElementsPerToken is what the layer caches per token of context (0: nothing).
	kvElementsPerToken(s Shape, l Layer) int
	// attendedTokens is how many cached tokens a step reads at this context.
	attendedTokens(s Shape, l Layer, context int) int
	// flopsPerAttendedToken is one sequence's FLOPs per attended token (QK^T and PV).
	flopsPerAttendedToken(s Shape, l Layer) float64
	// stateBytesPerSequence is the recurrent state the layer keeps per sequence (0: none).
	stateBytesPerSequence(s Shape, l Layer) float64
	// flopsPerToken is one sequence's FLOPs per step beside the projections and the attention
	// over the cache (a recurrent update), whatever the context.
	flopsPerToken(s Shape, l Layer) float64
}

// mixers is the registry of mixer kinds: one implementation each.
var mixers = map[MixerKind]mixer{
	MixerAttention: gqaMixer{},
	MixerMLA:       mlaMixer{},
}

// MixerKinds lists the registered mixer kinds, sorted.
func MixerKinds() []MixerKind {
	kinds := make([]MixerKind, 0, len(mixers))
	for k := range mixers {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	return kinds
}

// mixerOf is the implementation of a layer's mixer; an unregistered kind is a bug of Layer.
func mixerOf(l Layer) mixer {
	m, ok := mixers[l.Mixer]
	if !ok {
		panic(fmt.Sprintf("model: layer %d has mixer kind %q, which is not registered (registered: %s)",
			l.Index, l.Mixer, joinKinds(MixerKinds())))
	}
	return m
}

func joinKinds(kinds []MixerKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// LayerGroup is Count layers that are alike in everything but their index: the unit the
// totals multiply, so that a 126-layer model is counted in a few groups.
type LayerGroup struct {
	Layer Layer // the first layer of the group (its Index)
	Count int
}

// Stack is the model's layers grouped: each distinct layer once, with how many layers are
// like it, in the order of their first layer. A shape with no layers has no groups. The
// groups of a shape are worked out once (derived): the roofline asks for them for every batch
// it scans, and a shape's layers never change.
func (s Shape) Stack() []LayerGroup { return s.derived().groups }

// derivedTotals is what is worked out once per shape: its stack and the totals of memo.
type derivedTotals struct {
	groups []LayerGroup
	once   sync.Once
	// the totals every layer reads in full, beside the routed experts, and one token's
	// multiply-adds through every linear
	paramsBesidesExperts, bytesBesidesExperts, linearMACsPerToken float64
}

// derivedCache keeps each shape's derivedTotals (a Shape is comparable: its pointers name its
// parts). last answers a run of calls on one shape (a roofline scan) without hashing it.
var derivedCache = struct {
	sync.Mutex
	last  Shape
	lastD *derivedTotals // nil: no last shape yet
	of    map[Shape]*derivedTotals
}{of: map[Shape]*derivedTotals{}}

func (s Shape) derived() *derivedTotals {
	c := &derivedCache
	c.Lock()
	defer c.Unlock()
	if c.lastD != nil && c.last == s {
		return c.lastD
	}
	d, ok := c.of[s]
	if !ok {
		if len(c.of) >= 4096 { // a bound on what a long-lived process keeps
			clear(c.of)
		}
		d = &derivedTotals{groups: s.stack()}
		c.of[s] = d
	}
	c.last, c.lastD = s, d
	return d
}

func (s Shape) stack() []LayerGroup {
	var groups []LayerGroup
	at := map[Layer]int{}
	for l := 0; l < s.Layers; l++ {
		ly := s.Layer(l)
		key := ly
		key.Index = 0
		if i, ok := at[key]; ok {
			groups[i].Count++
			continue
		}
		at[key] = len(groups)
		groups = append(groups, LayerGroup{Layer: ly, Count: 1})
	}
	return groups
}

// totals are the context- and batch-independent totals of the shape, worked out once: the
// roofline asks for them at every batch it scans.
func (s Shape) totals() *derivedTotals {
	d := s.derived()
	d.once.Do(func() {
		d.paramsBesidesExperts = s.layerParts(
			func(ms []matrix) float64 { return float64(sumParams(ms)) },
			func(n int64) float64 { return float64(n) })
		w := s.WeightDType.Bytes()
		d.bytesBesidesExperts = s.layerParts(s.sumBytes, func(n int64) float64 { return float64(n) * w })
		d.linearMACsPerToken = s.sumLinearMACs()
	})
	return d
}

// layersOf is the first layer whose mixer is one of kinds, and how many layers have one.
func (s Shape) layersOf(kinds ...MixerKind) (first Layer, count int) {
	for _, g := range s.Stack() {
		for _, k := range kinds {
			if g.Layer.Mixer == k {
				if count == 0 {
					first = g.Layer
				}
				count += g.Count
			}
		}
	}
	return first, count
}

// sumLayers adds f over every layer of the stack, a group at a time.
func (s Shape) sumLayers(f func(l Layer) float64) float64 {
	var total float64
	for _, g := range s.Stack() {
		total += float64(g.Count) * f(g.Layer)
	}
	return total
}

// ffnMatrices lists a layer's feed-forward weights that every step reads in full: the dense
// MLP, or for a mixture of experts its shared experts (the routed experts and the router are
// counted apart: expertParams, routerParams).
func (s Shape) ffnMatrices(l Layer) []matrix {
	ms := s.mlpMatrices(l.FFN)
	if l.MoE && s.MoELatent > 0 { // into the experts' latent and back
		ms = append(ms, matrix{n: s.MoELatent, k: s.Hidden, count: 1}, matrix{n: s.Hidden, k: s.MoELatent, count: 1})
	}
	return ms
}

// ffnSmallParams counts a layer's feed-forward biases and, for a mixture of experts, its router.
func (s Shape) ffnSmallParams(l Layer) int64 {
	n := s.mlpBiases(l.FFN)
	if l.FFNKind() == FFNMoE {
		n += s.routerParams()
		if s.SharedExpertGate {
			n += int64(s.Hidden) // shared_expert_gate: a Hidden x 1 linear
		}
	}
	return n
}

// FFNKind is the layer's feed-forward kind.
func (l Layer) FFNKind() FFNKind {
	if l.MoE {
		return FFNMoE
	}
	return FFNDense
}

// gqaMixer is grouped-query attention: a fused QKV projection, attention over the cache (the
// whole context, the layer's window, or its chunk), the output projection.
type gqaMixer struct{}

func (gqaMixer) matrices(s Shape, _ Layer) []matrix {
	return []matrix{{n: int(s.qkvOut()), k: s.Hidden, count: 1, attn: true},
		{n: s.Hidden, k: s.QHeads * s.HeadDim, count: 1, attn: true}}
}

func (gqaMixer) smallParams(s Shape, _ Layer) int64 {
	var n int64
	if s.AttnBias {
		n += s.qkvOut()
	}
	if s.OProjBias {
		n += int64(s.Hidden)
	}
	if s.QKNorm == "rms" {
		n += 2 * int64(s.HeadDim)
	}
	if s.AttentionSinks {
		n += int64(s.QHeads)
	}
	return n
}

func (gqaMixer) kvElementsPerToken(s Shape, _ Layer) int { return 2 * s.KVHeads * s.HeadDim }

func (gqaMixer) attendedTokens(_ Shape, l Layer, context int) int { return l.attended(context) }

func (gqaMixer) flopsPerAttendedToken(s Shape, _ Layer) float64 {
	return 4 * float64(s.QHeads) * float64(s.HeadDim)
}

// attended is how many of context cached tokens a softmax-attention layer reads: all of them,
// the last Window, or the current chunk's ((context-1) mod Chunk) + 1.
func (l Layer) attended(context int) int {
	context = max(context, 0)
	switch {
	case l.Window > 0:
		return min(context, l.Window)
	case l.Chunk > 0 && context > 0:
		return (context-1)%l.Chunk + 1
	}
	return context
}

// mlaMixer is multi-head latent attention in the absorbed form a decode step uses: the
// query's down and up projections (q_a, q_b; or q when QLoRARank is 0), the latent's down
// projection kv_a (latent and rotary key), then kv_b split per head into W_UK (nope x latent,
// absorbed into the query) and W_UV (value x latent, absorbed into the output), and o. The
// parameters are the checkpoint's. The cache holds the latent and the shared rotary key.
type mlaMixer struct{}

func (mlaMixer) matrices(s Shape, _ Layer) []matrix {
	h := s.Hidden
	qOut := s.QHeads * s.HeadDim
	var m []matrix
	if s.QLoRARank > 0 {
		m = append(m, matrix{s.QLoRARank, h, 1, true}, matrix{qOut, s.QLoRARank, 1, true})
	} else {
		m = append(m, matrix{qOut, h, 1, true})
	}
	return append(m,
		matrix{s.KVLoRARank + s.RoPEHeadDim, h, 1, true},
		matrix{s.QKNopeHeadDim(), s.KVLoRARank, s.QHeads, true},
		matrix{s.VHeadDim, s.KVLoRARank, s.QHeads, true},
		matrix{h, s.QHeads * s.VHeadDim, 1, true})
}

// smallParams: MLA's norms of the query and the latent, beside what any attention layer may
// carry (an output bias).
func (mlaMixer) smallParams(s Shape, l Layer) int64 {
	return gqaMixer{}.smallParams(s, l) + int64(s.QLoRARank+s.KVLoRARank)
}

func (mlaMixer) kvElementsPerToken(s Shape, _ Layer) int { return s.KVLoRARank + s.RoPEHeadDim }

func (mlaMixer) attendedTokens(_ Shape, l Layer, context int) int { return l.attended(context) }

// flopsPerAttendedToken: QK over the latent and rotary key (576 for DeepSeek-V3) and PV over
// the latent (512), for every query head.
func (mlaMixer) flopsPerAttendedToken(s Shape, _ Layer) float64 {
	return 2 * float64(s.QHeads) * float64(2*s.KVLoRARank+s.RoPEHeadDim)
}
