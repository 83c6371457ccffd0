package ref

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// Multi-head latent attention decode, absorbed form (DeepSeek-V2/V3, Kimi-K2): every query head
// of sequence b attends over b's one latent cache, whose rows are [c_kv | k_pe]:
//
//	out[b, h, 0:V] = sum_t softmax_t(scale * q[b, h, :] . c[b, t, :]) * c[b, t, 0:V]
//
// with rows of cgo.MLAQKDim (576) elements and V = cgo.MLAVDim (512): the scores read the whole
// row, the values its latent part. It is decode attention with one KV head whose K and V are the
// same row and whose output keeps the first V dims, and the reference is exactly that:
// AttentionPairs on a 576-wide shape with K = V = the latent row, the outputs past V dropped.

// MLAShape describes one MLA decode call and the latent cache it reads.
type MLAShape struct {
	Batch, QHeads int
	Context       []int // per sequence, len Batch, each >= 1
	Layout        KVLayout

	// Contiguous [Batch, Capacity, 576]: Capacity 0 means MaxContext(). Paged [NumPages,
	// PageSize, 576]: PagesPerSeq 0 means ceil(Capacity or MaxContext() / PageSize), NumPages 0
	// Batch*PagesPerSeq.
	Capacity, PageSize, PagesPerSeq, NumPages int

	// Scale multiplies q.c before the softmax: required (DeepSeek's softmax_scale is
	// mscale^2/sqrt(qk_head_dim), not 1/sqrt(576)).
	Scale float64
}

// Attention is s as a one-KV-head attention of head dim 576: its cache offsets, page table
// and sizes are those of the latent cache.
func (s MLAShape) Attention() AttentionShape {
	return AttentionShape{Batch: s.Batch, QHeads: s.QHeads, KVHeads: 1, HeadDim: cgo.MLAQKDim, Context: s.Context,
		Layout: s.Layout, Capacity: s.Capacity, PageSize: s.PageSize, PagesPerSeq: s.PagesPerSeq, NumPages: s.NumPages,
		Scale: s.Scale}
}

// WithDefaults fills Capacity, PagesPerSeq and NumPages where they are 0, and copies Context.
func (s MLAShape) WithDefaults() MLAShape {
	a := s.Attention().WithDefaults()
	s.Context, s.Capacity, s.PagesPerSeq, s.NumPages = a.Context, a.Capacity, a.PagesPerSeq, a.NumPages
	return s
}

// MaxContext is the longest context of the batch.
func (s MLAShape) MaxContext() int { return s.Attention().MaxContext() }

// SeqCapacity is how many tokens one sequence can hold.
func (s MLAShape) SeqCapacity() int { return s.Attention().SeqCapacity() }

// CacheElements is the element count of the latent cache.
func (s MLAShape) CacheElements() int { return s.Attention().CacheElements() }

// QElements is the element count of Q: Batch*QHeads*576.
func (s MLAShape) QElements() int { return s.Batch * s.QHeads * cgo.MLAQKDim }

// OutElements is the element count of the output: Batch*QHeads*512.
func (s MLAShape) OutElements() int { return s.Batch * s.QHeads * cgo.MLAVDim }

// RowOffset is the element offset in the cache of sequence b's token t.
func (s MLAShape) RowOffset(pageTable []int32, b, t int) int {
	return s.Attention().KVOffset(pageTable, b, 0, t)
}

// ShuffledPageTable is AttentionShape.ShuffledPageTable for the latent cache.
func (s MLAShape) ShuffledPageTable(seed uint64) []int32 {
	return s.Attention().ShuffledPageTable(seed)
}

// Validate reports the first thing wrong with s (after WithDefaults), in the words
// db_mla_attention_plan uses and with the kernel's limits from kernels/decodebench.h.
func (s MLAShape) Validate() error {
	switch {
	case s.Batch < 1 || s.Batch > cgo.MaxBatch:
		return fmt.Errorf("batch %d out of range 1..%d", s.Batch, cgo.MaxBatch)
	case s.QHeads < 1 || s.QHeads > cgo.MLAMaxHeads:
		return fmt.Errorf("q_heads %d out of range 1..%d (the MLA kernel's limit)", s.QHeads, cgo.MLAMaxHeads)
	case len(s.Context) != s.Batch:
		return fmt.Errorf("%d context lengths for a batch of %d", len(s.Context), s.Batch)
	case !(s.Scale > 0) || math.IsInf(s.Scale, 0):
		return fmt.Errorf("scale %g must be finite and > 0 (the model's softmax scale)", s.Scale)
	}
	if err := s.Attention().validateCache(); err != nil {
		return err
	}
	if float64(s.CacheElements()) > math.MaxInt64/4 {
		return fmt.Errorf("latent cache too large")
	}
	return nil
}

// MLAReference is the float64 reference of MLA decode for some sequences' heads.
type MLAReference struct {
	// Want[row*512+i]: row is one (sequence, query head), in the order MLAPairs gives.
	Want []float64
	// full is the 576-wide attention reference: its score scales (576 products) and the
	// weighted |values| of the first 512 dims bound the kernel's errors.
	full AttentionReference
}

// ElementBounds gives every output element's largest acceptable |out - ref| for the MLA kernel
// with up to splits KV splits: the bounds of the GQA tensor-core kernel (ElementBoundsMMA), which
// rounds the probabilities to the input dtype and accumulates on the tensor cores as the MLA
// kernel does, over 576-element scores. The L2 tolerance is MLATolerance.
func (r MLAReference) ElementBounds(d DType, splits int) []float64 {
	return mlaValues(r.full.ElementBoundsMMA(d, splits))
}

// MLATolerance is the largest acceptable ||out-ref||_2 / ||ref||_2: AttentionTolerance.
func MLATolerance(d DType) float64 { return AttentionTolerance(d) }

// mlaValues keeps the first 512 of every 576-wide row.
func mlaValues(full []float64) []float64 {
	rows := len(full) / cgo.MLAQKDim
	out := make([]float64, 0, rows*cgo.MLAVDim)
	for r := range rows {
		out = append(out, full[r*cgo.MLAQKDim:][:cgo.MLAVDim]...)
	}
	return out
}

// MLAInputs give the reference its inputs one 576-long vector at a time, as the device holds
// them: Q(row, dst) the query of output row b*QHeads+h, Row(b, t, dst) sequence b's token t.
type MLAInputs struct {
	Q   func(row int, dst []float64)
	Row func(b, t int, dst []float64)
}

// MLAPairs is the reference for every query head of the chosen sequences, on every core; elems
// gives each element's index in the whole output [Batch, QHeads, 512]. s must be valid.
func MLAPairs(s MLAShape, in MLAInputs, seqs []int) (MLAReference, []int) {
	row := func(b, _, t int, dst []float64) { in.Row(b, t, dst) }
	full, fullElems := AttentionPairs(s.Attention(), AttentionInputs{Q: in.Q, K: row, V: row}, seqs)
	elems := make([]int, 0, len(fullElems)/cgo.MLAQKDim*cgo.MLAVDim)
	for r := 0; r < len(fullElems); r += cgo.MLAQKDim {
		out := fullElems[r] / cgo.MLAQKDim // the output row (sequence, head)
		for i := range cgo.MLAVDim {
			elems = append(elems, out*cgo.MLAVDim+i)
		}
	}
	return MLAReference{Want: mlaValues(full.Want), full: full}, elems
}

// MLA is the float64 reference of a whole MLA call: q [Batch, QHeads, 576], cache the latent
// cache in s's layout (CacheElements), pageTable [Batch, PagesPerSeq] when paged.
func MLA(s MLAShape, pageTable []int32, q, cache []float32) (MLAReference, error) {
	if err := s.Validate(); err != nil {
		return MLAReference{}, err
	}
	if len(q) != s.QElements() || len(cache) != s.CacheElements() {
		return MLAReference{}, fmt.Errorf("input sizes q %d, cache %d do not match the shape (q %d, cache %d)",
			len(q), len(cache), s.QElements(), s.CacheElements())
	}
	if s.Layout == KVPaged {
		if err := s.Attention().ValidatePageTable(pageTable, s.Context); err != nil {
			return MLAReference{}, err
		}
	}
	d := cgo.MLAQKDim
	widen := func(src []float32, dst []float64) {
		for i := range dst {
			dst[i] = float64(src[i])
		}
	}
	in := MLAInputs{
		Q:   func(row int, dst []float64) { widen(q[row*d:][:d], dst) },
		Row: func(b, t int, dst []float64) { widen(cache[s.RowOffset(pageTable, b, t):][:d], dst) },
	}
	seqs := make([]int, s.Batch)
	for b := range seqs {
		seqs[b] = b
	}
	r, _ := MLAPairs(s, in, seqs)
	return r, nil
}

// AppendMLA writes each sequence's new latent row (rows [Batch, 576]) into the cache at
// positions[b], as db_mla_kv_append does.
func AppendMLA(s MLAShape, pageTable []int32, positions []int, cache, rows []float32) error {
	if len(positions) != s.Batch {
		return fmt.Errorf("%d positions for a batch of %d", len(positions), s.Batch)
	}
	d := cgo.MLAQKDim
	for b, p := range positions {
		if p < 0 || p >= s.SeqCapacity() {
			return fmt.Errorf("position %d of sequence %d outside the cache (capacity %d)", p, b, s.SeqCapacity())
		}
		off := s.RowOffset(pageTable, b, p)
		copy(cache[off:off+d], rows[b*d:(b+1)*d])
	}
	return nil
}

// MLALatentRow is the cache row db_mla_rope_append writes for one sequence at pos from its
// kv_a_proj row kvA (latent, then k_pe): the latent normalised by kv_a_layernorm (weight
// kvNorm, eps), then k_pe rotated (neox, r.RotaryDim = the rotary width), MLAQKDim elements.
func MLALatentRow(d DType, r Rope, kvA, kvNorm []float32, pos int, eps float64) (want, bounds []float64) {
	latent := cgo.MLALatentDim
	norm := RMSNorm(d, kvA[:latent], nil, kvNorm, latent, eps, false)
	pe, peBounds := RopeHead(r, d, kvA[latent:latent+cgo.MLARoPEDim], pos)
	return append(norm.Want, pe...), append(norm.Bounds, peBounds...)
}

// MLASoftmaxScale is the softmax scale of an MLA model's attention in the step, the sweep and
// the forward pass: 1/sqrt of the query head's QK width in the unabsorbed form (qk_nope +
// qk_rope, 192 for DeepSeek-V3). The shape does not carry the yarn mscale DeepSeek multiplies
// in (mscale^2 = 1.89 at its factor of 40); the scale changes the softmax's values, not what a
// kernel reads or its time.
func MLASoftmaxScale(s model.Shape) float64 { return 1 / math.Sqrt(float64(s.HeadDim)) }
