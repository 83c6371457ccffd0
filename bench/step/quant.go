package step

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// Quantized weights and the fp8 KV cache in the step. Which linears are quantized and in which
// format is bench/ref's rule (ref.StepQuantized, ref.WeightFormatOf); their buffers hold the
// packed layout of decodebench.h, [W | scales | zero points] with each part 16-byte aligned in
// one allocation, filled by db_fill_quantized from the tensor's seed and launched through
// db_linear_quant. An fp8 cache holds e4m3 codes (db_fill_quantized's fp8 bytes) with one
// seeded fp32 scale per layer and tensor (ref.FP8CacheScale); the appends quantise the new
// token and the attention reads the codes beside the 16-bit activations.

// quantFeature names what of s's weight and cache formats the step does not run, "" when it
// runs them: a format no kernel takes, fp8-tensor experts, a weight dtype the step has no
// format for, a cache that is neither the activations' dtype nor fp8, a quantized linear or
// expert linear whose shape its format does not take (both named).
func quantFeature(s model.Shape) string {
	if r := ref.StepQuantRefusal(s); r != "" {
		return r
	}
	switch s.WeightDType {
	case model.BF16, model.FP16, model.FP8, model.INT8:
	default:
		return fmt.Sprintf("%s weights (the step runs bf16, fp16, fp8 or int8, or a quantization_config's format)", s.WeightDType)
	}
	if act := s.ActivationDType(); s.KVDType != act && s.KVDType != model.FP8 {
		return fmt.Sprintf("a %s KV cache beside %s activations (the step's cache is the activations' dtype or fp8)", s.KVDType, act)
	}
	f, group, ok := ref.WeightFormatOf(s)
	if !ok {
		return ""
	}
	qd, kvd := s.QHeads*s.HeadDim, s.KVHeads*s.HeadDim
	type linear struct {
		tensor, name string
		n, k         int
	}
	var ls []linear
	for l := 0; l < s.Layers; l++ {
		ffn := s.Layer(l).FFN
		ls = append(ls, linear{ref.TensorQKV, "qkv_proj", qd + 2*kvd, s.Hidden}, linear{ref.TensorO, "o_proj", s.Hidden, qd})
		if ffn > 0 {
			ls = append(ls, linear{ref.TensorGateUp, "gate_up_proj", 2 * ffn, s.Hidden}, linear{ref.TensorDown, "down_proj", s.Hidden, ffn})
		}
	}
	for _, l := range ls {
		if !ref.StepQuantized(s, l.tensor) {
			continue
		}
		if err := f.CheckShape(l.n, l.k, group); err != nil {
			return fmt.Sprintf("%s weights in %s [%d x %d] (%v)", f, l.name, l.n, l.k, err)
		}
	}
	if r := expertFeature(s, f, group); r != "" {
		return r
	}
	// q, k and v apart (QK-norm past batch 1) read row blocks of the one qkv weight: with
	// 128 x 128 tiles each block must start on a tile.
	if f == cgo.WeightFP8Block && s.QKNorm == "rms" && ref.StepQuantized(s, ref.TensorQKV) && (qd%cgo.FP8Block != 0 || (qd+kvd)%cgo.FP8Block != 0) {
		return fmt.Sprintf("%s weights in a QK-norm model whose q (%d rows) and k (%d rows) do not end on a %d-row tile (q, k and v run apart past batch 1)", f, qd, kvd, cgo.FP8Block)
	}
	return ""
}

// validateQuant checks what the configuration adds to the shape: an fp8 cache is filled as rows
// of capacity x head_dim codes, an int32 length.
func (c Config) validateQuant() error {
	s := c.Model
	if s.KVDType == model.FP8 && int64(c.Capacity())*int64(s.HeadDim) > math.MaxInt32 {
		return fmt.Errorf("context %d + steps %d: an fp8 cache's rows of %d tokens x head dim %d pass 2^31 codes", c.Context, c.Steps, c.Capacity(), s.HeadDim)
	}
	return nil
}

// setFormats records the program's weight format and cache dtype.
func (p *Program) setFormats() {
	s := p.Model
	p.Weights, p.GroupSize, _ = ref.WeightFormatOf(s)
	p.KVDType = p.DType
	if s.KVDType == model.FP8 {
		p.KVDType = cgo.DTypeFP8E4M3
	}
	if p.Weights != cgo.WeightDense {
		kept := ""
		if s.Quant != nil && s.Quant.AttentionKept {
			kept = ", attention kept " + p.DType.String()
		}
		p.Notes = append(p.Notes, fmt.Sprintf("projections in %s%s; the embedding, LM head and router in %s", formatName(p.Weights, p.GroupSize), kept, p.DType))
	}
}

// formatName is a weight format with its group: "int4 g128", "fp8", "dense".
func formatName(f cgo.WeightFormat, group int) string {
	if f.Grouped() && f != cgo.WeightMXFP4 {
		return fmt.Sprintf("%s g%d", f, group)
	}
	return f.String()
}

// WeightFormat names the program's projections' format ("bf16", "fp8", "int4-zp g128").
func (p *Program) WeightFormat() string {
	if p.Weights == cgo.WeightDense {
		return p.DType.String()
	}
	return formatName(p.Weights, p.GroupSize)
}

// quantParts are the offsets of a quantized tensor's scales and zero points in its buffer, and
// the buffer's size.
func quantParts(l cgo.QuantLayout) (scales, zeros, total uint64) {
	up := func(n uint64) uint64 { return (n + 15) &^ 15 }
	scales = up(l.WBytes)
	zeros = scales + up(l.ScaleBytes)
	return scales, zeros, zeros + l.ZeroBytes
}

func layoutOf(q *ref.QuantFill) cgo.QuantLayout { return q.Format.Layout(q.N, q.K, q.GroupSize) }

// addProjection adds the weight of a linear (n outputs, k inputs) of layer: quantized where
// ref.StepQuantized says so, else dense in the activation dtype.
func (p *Program) addProjection(layer int, name string, n, k uint64) {
	key := tensorKey(layer, name)
	if !ref.StepQuantized(p.Model, name) {
		p.add(Buffer{Name: key, Bytes: n * k * p.DType.Bytes(), Fill: &Fill{Tensor: name, Layer: layer,
			Seed: ref.TensorSeed(p.Seed, layer, name), Scale: ref.LinearWeightScale(int(k)), Count: n * k, DType: p.DType}})
		return
	}
	q := ref.StepQuantFill(p.Model, p.Seed, layer, name, int(n), int(k))
	_, _, total := quantParts(layoutOf(&q))
	p.add(Buffer{Name: key, Bytes: total, Fill: &Fill{Tensor: name, Layer: layer, Seed: q.Seed, Scale: q.Scale, Count: n * k, Quant: &q}})
}

// addCaches adds layer's K and V caches of count elements each: the activation dtype filled by
// the hash, or fp8 codes.
func (p *Program) addCaches(layer int, count uint64) {
	s := p.Model
	for _, name := range []string{ref.TensorKCache, ref.TensorVCache} {
		f := &Fill{Tensor: name, Layer: layer, Seed: ref.TensorSeed(p.Seed, layer, name), Scale: ref.CacheScale, Count: count, DType: p.KVDType}
		if p.KVDType == cgo.DTypeFP8E4M3 {
			q := ref.FP8CacheFill(p.Seed, layer, name, p.Batch, s.KVHeads, p.Capacity(), s.HeadDim)
			f.Quant, f.Codes, f.Scale = &q, true, q.Scale
		}
		p.add(Buffer{Name: tensorKey(layer, name), Bytes: count * p.KVDType.Bytes(), Fill: f})
	}
}

// weightBytesOf is what a weight buffer holds for the step to read: a quantized one's W, scales
// and zero points without the alignment between them.
func weightBytesOf(b Buffer) uint64 {
	if b.Fill != nil && b.Fill.Quant != nil && !b.Fill.Codes {
		return layoutOf(b.Fill.Quant).Bytes()
	}
	return b.Bytes
}

// quantLinears maps the step's linear calls to their weight tensor and the first of its rows the
// call reads (q, k and v apart run over row blocks of the one qkv weight).
func (p *Program) quantLinear(name string) (tensor string, row int) {
	s := p.Model
	qd, kvd := s.QHeads*s.HeadDim, s.KVHeads*s.HeadDim
	switch name {
	case "qkv_proj", "q_proj":
		return ref.TensorQKV, 0
	case "k_proj":
		return ref.TensorQKV, qd
	case "v_proj":
		return ref.TensorQKV, qd + kvd
	case "o_proj":
		return ref.TensorO, 0
	case "gate_up_proj":
		return ref.TensorGateUp, 0
	case "down_proj":
		return ref.TensorDown, 0
	case "shared_expert_gate_up_proj":
		return ref.TensorSharedUp, 0
	case "shared_expert_down_proj":
		return ref.TensorSharedDown, 0
	}
	return "", 0
}

// quantize points the quantized linears of ops at their packed weights, scales and zero points,
// and the caches of an fp8 step at their codes' scales and the activation dtype.
func (p *Program) quantize(ops []Op, addr func(string) uint64) []Op {
	for i := range ops {
		o := &ops[i]
		switch {
		case o.Linear != nil:
			tensor, row := p.quantLinear(o.Name)
			if tensor == "" || !ref.StepQuantized(p.Model, tensor) {
				continue
			}
			key := tensorKey(o.Layer, tensor)
			q := p.Buffers[p.index[key]].Fill.Quant
			l := layoutOf(q)
			sOff, zOff, _ := quantParts(l)
			base, r := addr(key), uint64(row)
			lp := o.Linear
			lp.W = base + r*(l.WBytes/uint64(q.N))
			lp.Scales = base + sOff
			switch q.Format {
			case cgo.WeightFP8Tensor:
			case cgo.WeightFP8Block: // r starts a tile row (quantFeature): its row of tiles
				tiles := uint64((q.K + cgo.FP8Block - 1) / cgo.FP8Block)
				lp.Scales += r / cgo.FP8Block * tiles * 4
			default:
				lp.Scales += r * (l.ScaleBytes / uint64(q.N))
			}
			if l.ZeroBytes > 0 {
				lp.Zeros = base + zOff + r/2*(l.ZeroBytes/uint64((q.N+1)/2))
			}
			lp.WeightFormat, lp.GroupSize = q.Format, q.GroupSize
		case o.GroupedLinear != nil:
			p.quantizeExperts(o, addr)
		case o.Attention != nil:
			p.fp8Cache(o.Layer, &o.Attention.Cache)
		case o.RopeKVAppend != nil:
			p.fp8Cache(o.Layer, &o.RopeKVAppend.Cache)
		case o.KVAppend != nil:
			p.fp8Cache(o.Layer, &o.KVAppend.Cache)
		}
	}
	return ops
}

// quantizeExperts points a quantized expert linear at its scales and zero points: the tensor is
// one fill of experts x n rows, so expert e's W, scales and zeros lie at e times one expert's
// layout from the parts' bases, as db_grouped_linear reads them.
func (p *Program) quantizeExperts(o *Op, addr func(string) uint64) {
	tensor := map[string]string{"expert_gate_up": ref.TensorExpertUp, "expert_down": ref.TensorExpertDown}[o.Name]
	if tensor == "" || !ref.StepQuantized(p.Model, tensor) {
		return
	}
	key := tensorKey(o.Layer, tensor)
	q := p.Buffers[p.index[key]].Fill.Quant
	sOff, zOff, _ := quantParts(layoutOf(q))
	g, base := o.GroupedLinear, addr(key)
	g.W, g.Scales = base, base+sOff
	if layoutOf(q).ZeroBytes > 0 {
		g.Zeros = base + zOff
	}
	g.Format, g.GroupSize = q.Format, q.GroupSize
}

// expertFeature names what of the experts' format the grouped linear does not run, "" when it
// runs it: a shape the format does not take, or 128 x 128 tiles that would straddle two experts
// (the tensor is one fill of experts x n rows, so each expert's n must end on a tile).
func expertFeature(s model.Shape, f cgo.WeightFormat, group int) string {
	if !s.IsMoE() || !ref.StepQuantized(s, ref.TensorExpertUp) {
		return ""
	}
	for _, l := range []struct {
		name string
		n, k int
	}{{"expert gate_up_proj", 2 * s.ExpertFFN, s.Hidden}, {"expert down_proj", s.Hidden, s.ExpertFFN}} {
		if err := f.CheckShape(l.n, l.k, group); err != nil {
			return fmt.Sprintf("%s experts in %s [%d x %d] (%v)", f, l.name, l.n, l.k, err)
		}
		if f == cgo.WeightFP8Block && l.n%cgo.FP8Block != 0 {
			return fmt.Sprintf("%s experts in %s [%d x %d] (an expert's %d rows do not end on a %d-row tile)", f, l.name, l.n, l.k, l.n, cgo.FP8Block)
		}
	}
	return ""
}

// fp8Cache makes c layer's fp8 cache where the step has one.
func (p *Program) fp8Cache(layer int, c *cgo.KVCache) {
	if p.KVDType != cgo.DTypeFP8E4M3 {
		return
	}
	c.DType, c.ActDType = cgo.DTypeFP8E4M3, p.DType
	c.KScale = ref.FP8CacheScale(p.Seed, layer, ref.TensorKCache)
	c.VScale = ref.FP8CacheScale(p.Seed, layer, ref.TensorVCache)
}

// quantFiller is a device that fills quantized layouts (cgo.Device).
type quantFiller interface {
	FillQuantized(cgo.QuantFill) error
}

// fillQuantized fills b (allocated at buf) with db_fill_quantized: a weight's three parts, or a
// cache's codes (the fill's one scale then goes to a scratch word, freed after).
func fillQuantized(dev Device, buf *cgo.Buffer, b Buffer) error {
	qf, ok := dev.(quantFiller)
	if !ok {
		return fmt.Errorf("the device does not fill quantized layouts: %w", cgo.ErrNotExported)
	}
	q := b.Fill.Quant
	sOff, zOff, _ := quantParts(layoutOf(q))
	fill := cgo.QuantFill{W: buf.Ptr, Scales: buf.Ptr + sOff, Format: q.Format, N: q.N, K: q.K, GroupSize: q.GroupSize, Seed: q.Seed, Scale: q.Scale}
	if layoutOf(q).ZeroBytes > 0 {
		fill.Zeros = buf.Ptr + zOff
	}
	if b.Fill.Codes {
		scratch, err := dev.Alloc(16)
		if err != nil {
			return err
		}
		defer func() { _ = dev.Synchronize(); scratch.Close() }() // the fill has run before the free
		fill.Scales = scratch.Ptr
	}
	return qf.FillQuantized(fill)
}

// setFormats records c's weight format, cache dtype and their bytes (nothing where c is not a
// program the step builds).
func (r *Record) setFormats(c Config) {
	p, err := New(c)
	if err != nil {
		return
	}
	r.WeightFormat, r.WeightBytes, r.KVBytes = p.WeightFormat(), p.WeightBytes(), p.CacheBytes()
	r.KVDType = string(c.Model.KVDType)
}
