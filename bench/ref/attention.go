package ref

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/decodebench/decodebench/cgo"
)

// Decode attention: one new query token per sequence against that sequence's KV cache.
//
//	out[b, hq, :] = sum_t softmax_t(scale * q[b, hq, :] . k[b, hkv, t, :]) * v[b, hkv, t, :]
//
// over t < Context[b], where hkv = hq / (QHeads / KVHeads): each KV head serves a group of
// consecutive query heads (GQA; a group of 1 is multi-head attention, KVHeads = 1 multi-query).
//
// Spans and sinks, as db_attention_params defines them: with a sliding Window the sum runs over
// the last Window tokens only, t >= Context[b] - Window; with a Chunk over the tokens of the
// query's own chunk, t >= floor((Context[b] - 1) / Chunk) * Chunk (SpanStart). A sink is one
// logit per query head (AttentionInputs.Sinks, natural-log units like scale * q.k) that joins
// the softmax's denominator and contributes no value:
//
//	w_t = e^(s_t) / (sum_t' e^(s_t') + e^(sink))

// KVLayout is how a KV cache is stored. The values are the DB_KV_* enum of kernels/decodebench.h.
type KVLayout int32

const (
	// KVContiguous: [Batch, KVHeads, Capacity, HeadDim]; sequence b's token t of head h is row
	// (b*KVHeads + h)*Capacity + t.
	KVContiguous KVLayout = 0
	// KVPaged: [NumPages, KVHeads, PageSize, HeadDim]; token t of sequence b lives in page
	// pageTable[b*PagesPerSeq + t/PageSize], at row (page*KVHeads + h)*PageSize + t%PageSize.
	KVPaged KVLayout = 1
)

func (l KVLayout) String() string {
	switch l {
	case KVContiguous:
		return "contiguous"
	case KVPaged:
		return "paged"
	}
	return fmt.Sprintf("layout(%d)", int32(l))
}

// AttentionShape describes one decode-attention call and the cache it reads.
type AttentionShape struct {
	Batch, QHeads, KVHeads, HeadDim int
	Context                         []int // per sequence, len Batch, each >= 1
	Layout                          KVLayout

	// Contiguous: tokens per (sequence, KV head) the cache holds; 0 means MaxContext().
	Capacity int
	// Paged: tokens per page, the page table's width (pages per sequence) and the number of
	// pages in the cache. PagesPerSeq 0 means ceil(Capacity or MaxContext() / PageSize);
	// NumPages 0 means Batch*PagesPerSeq.
	PageSize, PagesPerSeq, NumPages int

	// Scale multiplies q.k before the softmax; 0 means 1/sqrt(HeadDim).
	Scale float64

	// Window > 0: each sequence attends to its last Window tokens only (a sliding window).
	// Chunk > 0: only to the tokens of its own chunk of Chunk tokens (chunked attention). At
	// most one of them is set; 0 means the whole context.
	Window, Chunk int
}

// SpanStart is the first token a sequence of context tokens attends to: 0, or where its
// window or chunk begins. The caches keep every token; the span only says which are read.
func (s AttentionShape) SpanStart(context int) int {
	switch {
	case s.Window > 0:
		return max(0, context-s.Window)
	case s.Chunk > 0 && context > 0:
		return (context - 1) / s.Chunk * s.Chunk
	}
	return 0
}

// MaxSpan is the most tokens any sequence of the batch attends to.
func (s AttentionShape) MaxSpan() int {
	m := 0
	for _, c := range s.Context {
		m = max(m, c-s.SpanStart(c))
	}
	return m
}

// Group is the number of query heads per KV head.
func (s AttentionShape) Group() int { return s.QHeads / s.KVHeads }

// MaxContext is the longest context of the batch (0 for an empty one).
func (s AttentionShape) MaxContext() int {
	m := 0
	for _, c := range s.Context {
		m = max(m, c)
	}
	return m
}

// SoftmaxScale is Scale, or 1/sqrt(HeadDim) where Scale is 0.
func (s AttentionShape) SoftmaxScale() float64 {
	if s.Scale != 0 {
		return s.Scale
	}
	return 1 / math.Sqrt(float64(s.HeadDim))
}

// WithDefaults fills Capacity, PagesPerSeq and NumPages where they are 0, and copies Context
// so that the result shares nothing with s.
func (s AttentionShape) WithDefaults() AttentionShape {
	s.Context = append([]int(nil), s.Context...)
	if s.Capacity == 0 {
		s.Capacity = s.MaxContext()
	}
	if s.Layout == KVPaged && s.PageSize > 0 {
		if s.PagesPerSeq == 0 {
			s.PagesPerSeq = (s.Capacity + s.PageSize - 1) / s.PageSize
		}
		if s.NumPages == 0 {
			s.NumPages = s.Batch * s.PagesPerSeq
		}
	}
	return s
}

// SeqCapacity is how many tokens one sequence can hold: Capacity when contiguous,
// PagesPerSeq*PageSize when paged.
func (s AttentionShape) SeqCapacity() int {
	if s.Layout == KVPaged {
		return s.PagesPerSeq * s.PageSize
	}
	return s.Capacity
}

// Validate reports the first thing wrong with s (after WithDefaults), in the words
// db_attention_plan uses and with the kernels' limits as kernels/decodebench.h defines them
// (through cgo), so that a shape the kernels refuse is refused before any device work.
func (s AttentionShape) Validate() error {
	switch {
	case s.Batch < 1 || s.Batch > cgo.MaxBatch:
		return fmt.Errorf("batch %d out of range 1..%d", s.Batch, cgo.MaxBatch)
	case s.QHeads < 1:
		return fmt.Errorf("q_heads %d must be >= 1", s.QHeads)
	case s.KVHeads < 1:
		return fmt.Errorf("kv_heads %d must be >= 1", s.KVHeads)
	case s.QHeads%s.KVHeads != 0:
		return fmt.Errorf("q_heads %d is not a multiple of kv_heads %d", s.QHeads, s.KVHeads)
	case !cgo.IsAttentionHeadDim(s.HeadDim):
		return fmt.Errorf("head_dim %d unsupported (want one of %v)", s.HeadDim, cgo.AttentionHeadDims)
	case len(s.Context) != s.Batch:
		return fmt.Errorf("%d context lengths for a batch of %d", len(s.Context), s.Batch)
	case s.Scale < 0 || math.IsNaN(s.Scale) || math.IsInf(s.Scale, 0):
		return fmt.Errorf("scale %g must be finite and >= 0 (0 = 1/sqrt(head_dim))", s.Scale)
	case s.Window < 0 || s.Chunk < 0:
		return fmt.Errorf("window %d and chunk %d must be >= 0 (0 = the whole context)", s.Window, s.Chunk)
	case s.Window > 0 && s.Chunk > 0:
		return fmt.Errorf("window %d and chunk %d are both set: a layer has one span or none", s.Window, s.Chunk)
	}
	if err := s.validateCache(); err != nil {
		return err
	}
	if s.CacheElements() > math.MaxInt64/4 {
		return errors.New("KV cache too large")
	}
	return nil
}

// validateCache reports the first context length or cache field (of either layout) that
// cannot hold the contexts: the checks GQA and MLA attention share.
func (s AttentionShape) validateCache() error {
	for b, c := range s.Context {
		if c < 1 {
			return fmt.Errorf("context length %d of sequence %d must be >= 1", c, b)
		}
	}
	switch s.Layout {
	case KVContiguous:
		if s.Capacity < s.MaxContext() {
			return fmt.Errorf("cache capacity %d is less than the longest context %d", s.Capacity, s.MaxContext())
		}
	case KVPaged:
		if err := ValidatePageSize(s.PageSize); err != nil {
			return err
		}
		if s.PagesPerSeq < 1 {
			return fmt.Errorf("pages per sequence %d must be >= 1", s.PagesPerSeq)
		}
		if s.NumPages < 1 {
			return fmt.Errorf("num_pages %d must be >= 1", s.NumPages)
		}
		if s.SeqCapacity() < s.MaxContext() {
			return fmt.Errorf("%d pages of %d tokens hold %d tokens, less than the longest context %d",
				s.PagesPerSeq, s.PageSize, s.SeqCapacity(), s.MaxContext())
		}
	default:
		return fmt.Errorf("unknown KV layout %d", int32(s.Layout))
	}
	return nil
}

// ValidatePageSize accepts the page sizes the kernels take (cgo.ValidPageSize), and says which
// those are when p is not one.
func ValidatePageSize(p int) error {
	if !cgo.ValidPageSize(p) {
		return fmt.Errorf("page size %d unsupported (want a power of two from %d to %d)", p, cgo.MinPageSize, cgo.MaxPageSize)
	}
	return nil
}

// CacheElements is the element count of one of the K and V caches.
func (s AttentionShape) CacheElements() int {
	if s.Layout == KVPaged {
		return s.NumPages * s.KVHeads * s.PageSize * s.HeadDim
	}
	return s.Batch * s.KVHeads * s.Capacity * s.HeadDim
}

// QElements is the element count of Q and of the output: Batch*QHeads*HeadDim.
func (s AttentionShape) QElements() int { return s.Batch * s.QHeads * s.HeadDim }

// KVOffset is the element offset in a cache of the HeadDim-long vector of sequence b, KV head
// h, token t. Paged caches read pageTable.
func (s AttentionShape) KVOffset(pageTable []int32, b, h, t int) int {
	if s.Layout == KVPaged {
		page := int(pageTable[b*s.PagesPerSeq+t/s.PageSize])
		return ((page*s.KVHeads+h)*s.PageSize + t%s.PageSize) * s.HeadDim
	}
	return ((b*s.KVHeads+h)*s.Capacity + t) * s.HeadDim
}

// ValidatePageTable checks that every page a sequence can reach through its first pages
// slots (those covering tokens < tokens[b]) is a page of the cache, and that no page is
// given to two sequences (or twice to one), which would let an append overwrite another
// sequence's tokens.
func (s AttentionShape) ValidatePageTable(pageTable []int32, tokens []int) error {
	return s.validatePages(pageTable, tokens, false)
}

// validatePages is ValidatePageTable; with spanOnly, only the pages that hold a token of a
// sequence's span are checked (those before it are never read).
func (s AttentionShape) validatePages(pageTable []int32, tokens []int, spanOnly bool) error {
	if len(pageTable) != s.Batch*s.PagesPerSeq {
		return fmt.Errorf("page table has %d entries, want batch %d x %d pages", len(pageTable), s.Batch, s.PagesPerSeq)
	}
	owner := make(map[int32]int)
	for b := 0; b < s.Batch; b++ {
		need := (tokens[b] + s.PageSize - 1) / s.PageSize
		if need > s.PagesPerSeq {
			return fmt.Errorf("sequence %d needs %d pages, the table has %d", b, need, s.PagesPerSeq)
		}
		first := 0
		if spanOnly {
			first = s.SpanStart(tokens[b]) / s.PageSize
		}
		for i := first; i < need; i++ {
			p := pageTable[b*s.PagesPerSeq+i]
			if p < 0 || int(p) >= s.NumPages {
				return fmt.Errorf("page table[%d][%d] = %d out of range 0..%d", b, i, p, s.NumPages-1)
			}
			if o, dup := owner[p]; dup {
				return fmt.Errorf("page %d is given twice (sequences %d and %d)", p, o, b)
			}
			owner[p] = b
		}
	}
	return nil
}

// ShuffledPageTable gives each sequence PagesPerSeq distinct pages drawn from a permutation
// of 0..NumPages-1 (so that consecutive tokens of a sequence live in scattered pages, as in a
// serving engine), or -1 where the pages run out. The shuffle is a Fisher-Yates driven by
// Hash64(seed, i).
func (s AttentionShape) ShuffledPageTable(seed uint64) []int32 {
	perm := make([]int32, s.NumPages)
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := len(perm) - 1; i > 0; i-- {
		j := int(Hash64(seed, uint64(i)) % uint64(i+1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	table := make([]int32, s.Batch*s.PagesPerSeq)
	for i := range table {
		table[i] = -1
		if i < len(perm) {
			table[i] = perm[i]
		}
	}
	return table
}

// AttentionSeeds are the hash seeds of each input of an attention check, all derived from one
// user seed so that Q, K, V and the appended token are independent streams.
type AttentionSeeds struct {
	Q, K, V, KNew, VNew, PageTable, Sinks uint64
}

// NewAttentionSeeds derives the input seeds from seed.
func NewAttentionSeeds(seed uint64) AttentionSeeds {
	sub := func(tag uint64) uint64 { return Hash64(seed, 0xA77E0000+tag) }
	return AttentionSeeds{Q: sub(0), K: sub(1), V: sub(2), KNew: sub(3), VNew: sub(4), PageTable: sub(5), Sinks: sub(6)}
}

// AttentionReference is the float64 reference of one decode-attention call, with the sums
// that scale a correct kernel's rounding errors.
type AttentionReference struct {
	// Want[(b*QHeads+hq)*HeadDim+i] = sum_t w_t v_t[i], w = softmax_t(scale * q.k_t).
	Want []float64
	// AbsWeighted[...] = sum_t w_t |v_t[i]|: the scale of the P.V accumulation error, which
	// Want alone cannot give where the sum cancels.
	AbsWeighted []float64
	// ScoreAbs[b*QHeads+hq] = max_t scale * sum_i |q_i k_t[i]|: the scale of a score's error.
	ScoreAbs []float64
	// Context is each sequence's tokens summed (its span's length).
	Context []int
	HeadDim int
}

// Attention is the float64 reference of decode attention: q is [Batch, QHeads, HeadDim], k
// and v are whole caches in s's layout (CacheElements each), pageTable is [Batch,
// PagesPerSeq] for a paged cache (nil otherwise). The inputs are the values the device holds
// (bf16 or fp16, widened exactly); every product of two of them is exact in float64. Only the
// tokens of each sequence's span are read.
func Attention(s AttentionShape, pageTable []int32, q, k, v []float32) (AttentionReference, error) {
	return AttentionWithSinks(s, pageTable, q, k, v, nil)
}

// AttentionWithSinks is Attention with a sink logit per query head (len QHeads; nil for none).
func AttentionWithSinks(s AttentionShape, pageTable []int32, q, k, v []float32, sinks []float64) (AttentionReference, error) {
	if err := s.Validate(); err != nil {
		return AttentionReference{}, err
	}
	if len(q) != s.QElements() || len(k) != s.CacheElements() || len(v) != s.CacheElements() {
		return AttentionReference{}, fmt.Errorf("input sizes q %d, k %d, v %d do not match the shape (q %d, caches %d)",
			len(q), len(k), len(v), s.QElements(), s.CacheElements())
	}
	if sinks != nil && len(sinks) != s.QHeads {
		return AttentionReference{}, fmt.Errorf("%d sinks for %d query heads", len(sinks), s.QHeads)
	}
	if s.Layout == KVPaged {
		if err := s.validatePages(pageTable, s.Context, true); err != nil {
			return AttentionReference{}, err
		}
	}
	widen := func(src []float32, dst []float64) {
		for i := range dst {
			dst[i] = float64(src[i])
		}
	}
	d := s.HeadDim
	in := AttentionInputs{
		Q:     func(row int, dst []float64) { widen(q[row*d:][:d], dst) },
		K:     func(b, h, t int, dst []float64) { widen(k[s.KVOffset(pageTable, b, h, t):][:d], dst) },
		V:     func(b, h, t int, dst []float64) { widen(v[s.KVOffset(pageTable, b, h, t):][:d], dst) },
		Sinks: sinks,
	}
	pairs := make([]int, s.Batch*s.KVHeads)
	for p := range pairs {
		pairs[p] = p
	}
	r, _ := AttentionPairs(s, in, pairs)
	r.Context = make([]int, s.Batch) // every row, in order: one span length per sequence
	for b, c := range s.Context {
		r.Context[b] = c - s.SpanStart(c)
	}
	return r, nil
}

// AttentionInputs give the reference its inputs one HeadDim-long vector at a time, exactly as
// the device holds them: Q(row, dst) the query of output row b*QHeads+hq, K(b, h, t, dst) and
// V(b, h, t, dst) token t of sequence b's KV head h (only tokens of the sequence's span are
// asked for). A caller that generates them from the hash reads only what the chosen pairs
// need. Sinks, when not nil, are the QHeads sink logits (the device's f32 values, widened).
type AttentionInputs struct {
	Q     func(row int, dst []float64)
	K, V  func(b, h, t int, dst []float64)
	Sinks []float64
}

// AttentionPairs is the reference for the query heads of the chosen (sequence, KV head) pairs
// (pair = b*KVHeads + h), the pairs on every core: each K and V vector is read once for the
// whole group of query heads it serves. Its rows are one (sequence, query head) each, in pair
// order, and Context has one length per row, so that ElementBounds reads each row's own
// context; elems gives each element's index in the whole output. s must be valid (Validate).
func AttentionPairs(s AttentionShape, in AttentionInputs, pairs []int) (AttentionReference, []int) {
	d, group, scale := s.HeadDim, s.Group(), s.SoftmaxScale()
	rows := len(pairs) * group
	r := AttentionReference{
		Want:        make([]float64, rows*d),
		AbsWeighted: make([]float64, rows*d),
		ScoreAbs:    make([]float64, rows),
		Context:     make([]int, rows),
		HeadDim:     d,
	}
	elems := make([]int, rows*d)
	jobs := make(chan int, len(pairs))
	for p := range pairs {
		jobs <- p
	}
	close(jobs)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pairs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				attentionPair(s, in, pairs[p], p, scale, &r, elems)
			}
		}()
	}
	wg.Wait()
	return r, elems
}

// attentionPair computes the rows p*group.. of r for pair (sequence b, KV head h) over the
// sequence's span: scores in float64 (every product of two inputs is exact), the softmax
// (with the sink in its denominator) after subtracting the max, then the weighted sum of V.
// Context holds the span's length, the tokens a kernel accumulates.
func attentionPair(s AttentionShape, in AttentionInputs, pair, p int, scale float64, r *AttentionReference, elems []int) {
	d, group := s.HeadDim, s.Group()
	b, h := pair/s.KVHeads, pair%s.KVHeads
	start := s.SpanStart(s.Context[b])
	n := s.Context[b] - start
	q := make([][]float64, group)
	scores := make([][]float64, group)
	maxScore := make([]float64, group)
	for g := range group {
		row := b*s.QHeads + h*group + g // the output row of query head h*group+g
		q[g] = make([]float64, d)
		in.Q(row, q[g])
		scores[g] = make([]float64, n)
		maxScore[g] = math.Inf(-1)
		local := p*group + g
		r.Context[local] = n
		for i := 0; i < d; i++ {
			elems[local*d+i] = row*d + i
		}
	}
	kv := make([]float64, d)
	for t := 0; t < n; t++ {
		in.K(b, h, start+t, kv)
		for g := range group {
			dot, abs := 0.0, 0.0
			for i, qi := range q[g] {
				prod := qi * kv[i]
				dot += prod
				abs += math.Abs(prod)
			}
			scores[g][t] = dot * scale
			maxScore[g] = math.Max(maxScore[g], scores[g][t])
			local := p*group + g
			r.ScoreAbs[local] = math.Max(r.ScoreAbs[local], abs*scale)
		}
	}
	sums := make([]float64, group)
	sink := make([]float64, group) // e^(sink - max), 0 without sinks
	for g := range group {
		if in.Sinks != nil {
			x := in.Sinks[h*group+g]
			maxScore[g] = math.Max(maxScore[g], x)
			// a sink's magnitude scales its weight's error as a score's does
			local := p*group + g
			r.ScoreAbs[local] = math.Max(r.ScoreAbs[local], math.Abs(x))
			sink[g] = x
		}
	}
	for g := range group {
		if in.Sinks != nil {
			sink[g] = math.Exp(sink[g] - maxScore[g])
			sums[g] += sink[g]
		}
		for t := 0; t < n; t++ {
			scores[g][t] = math.Exp(scores[g][t] - maxScore[g]) // the softmax subtracts the max first
			sums[g] += scores[g][t]
		}
	}
	for t := 0; t < n; t++ {
		in.V(b, h, start+t, kv)
		for g := range group {
			local := p*group + g
			want, absw := r.Want[local*d:][:d], r.AbsWeighted[local*d:][:d]
			w := scores[g][t] / sums[g]
			for i := range want {
				want[i] += w * kv[i]
				absw[i] += w * math.Abs(kv[i])
			}
		}
	}
}

// Attention tolerances. What separates a correct kernel from the reference:
//
//   - Output rounding to bf16 or fp16, as for linear: at most u (2^-8, 2^-11) of each element,
//     about u/sqrt(3) in the L2 norm. It dominates.
//   - Scores: an fp32 dot of HeadDim exact products plus the rounding of the pre-scaled query
//     errs by at most (HeadDim+2) 2^-24 of ScoreAbs; exp2f adds about 2 ulp. A score off by
//     delta moves its normalised weight by at most 2 delta relatively (numerator and sum), so
//     the output moves by at most that times AbsWeighted.
//   - fp32 accumulation of P.V, of the running sum and of the split merge: each token, tile
//     rescale and split adds at most 2^-24 of AbsWeighted, whatever the order.
//
// The element bound doubles the sum of these worst cases; the L2 tolerance is LinearTolerance
// (1e-2 for bf16, 2e-3 for fp16): a dropped token among a few, a wrong page or a wrong KV
// head gives 0.1 or more.

// AttentionTolerance is the largest acceptable ||out-ref||_2 / ||ref||_2 for an output of d.
func AttentionTolerance(d DType) float64 { return LinearTolerance(d) }

// ElementBounds gives every output element's largest acceptable |out - ref| for an output of
// dtype d computed with up to splits KV splits by the fp32 CUDA-core kernel (DB_ATTENTION_SIMT).
func (r AttentionReference) ElementBounds(d DType, splits int) []float64 {
	return r.elementBounds(d, splits, false)
}

// ElementBoundsMMA is ElementBounds for the tensor-core kernel (DB_ATTENTION_MMA), which differs
// in two ways (the L2 tolerance stays AttentionTolerance: both add about u/sqrt(3) of noise, not
// a bias, next to the output's own rounding):
//
//   - It rounds every probability to the input dtype before P.V, as FlashAttention does, while
//     the running sum adds the unrounded fp32 ones: each term p_t v_t errs by at most u
//     relatively, the output by at most u * AbsWeighted. (fp16 probabilities are scaled by 2^15
//     first, so they stay normal down to 2^-29; below that a token errs by at most 2^-40
//     absolutely, far under the fp16 output's halfSubnormalSpacing.)
//   - A tensor core's fp32 accumulation order and rounding are unspecified (it may truncate),
//     so the score and accumulation terms count a whole ulp per addition instead of half.
func (r AttentionReference) ElementBoundsMMA(d DType, splits int) []float64 {
	return r.elementBounds(d, splits, true)
}

func (r AttentionReference) elementBounds(d DType, splits int, mma bool) []float64 {
	out := make([]float64, len(r.Want))
	heads := len(r.ScoreAbs) / max(1, len(r.Context))
	ulps, pRounding := 1.0, 0.0
	if mma {
		ulps, pRounding = 2, d.UnitRoundoff()
	}
	for i := range out {
		row := i / r.HeadDim
		n := r.Context[row/heads]
		scoreErr := ulps*float64(r.HeadDim+2)*0x1p-24*r.ScoreAbs[row] + 0x1p-22
		accumulation := (2*scoreErr + ulps*float64(n+splits+8)*0x1p-24 + pRounding) * r.AbsWeighted[i]
		out[i] = 2*(accumulation+d.UnitRoundoff()*(math.Abs(r.Want[i])+accumulation)) + halfSubnormalSpacing(d)
	}
	return out
}

// AppendKV writes each sequence's new token into the caches at position positions[b], as
// db_kv_append does: kNew and vNew are [Batch, KVHeads, HeadDim].
func AppendKV(s AttentionShape, pageTable []int32, positions []int, k, v, kNew, vNew []float32) error {
	if len(positions) != s.Batch {
		return fmt.Errorf("%d positions for a batch of %d", len(positions), s.Batch)
	}
	for b, p := range positions {
		if p < 0 || p >= s.SeqCapacity() {
			return fmt.Errorf("position %d of sequence %d outside the cache (capacity %d)", p, b, s.SeqCapacity())
		}
	}
	d := s.HeadDim
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.KVHeads; h++ {
			off := s.KVOffset(pageTable, b, h, positions[b])
			src := (b*s.KVHeads + h) * d
			copy(k[off:off+d], kNew[src:src+d])
			copy(v[off:off+d], vNew[src:src+d])
		}
	}
	return nil
}

// SoftmaxPartial is one split's share of a softmax-weighted sum: Max is the largest score it
// saw (-Inf when it saw none), Sum = sum_t exp(score_t - Max), Acc = sum_t exp(score_t - Max) * v_t.
type SoftmaxPartial struct {
	Max, Sum float64
	Acc      []float64
}

// MergeSoftmaxPartials is the log-sum-exp merge the split-KV kernels use: with
// M = max over splits of Max, out = sum_s exp(Max_s - M) Acc_s / sum_s exp(Max_s - M) Sum_s.
// Splits that saw no token (Sum 0) contribute nothing; if none saw any, out is zero.
func MergeSoftmaxPartials(parts []SoftmaxPartial, d int) []float64 {
	m := math.Inf(-1)
	for _, p := range parts {
		if p.Sum > 0 {
			m = math.Max(m, p.Max)
		}
	}
	out := make([]float64, d)
	total := 0.0
	for _, p := range parts {
		if p.Sum <= 0 {
			continue
		}
		w := math.Exp(p.Max - m)
		total += w * p.Sum
		for i := range out {
			out[i] += w * p.Acc[i]
		}
	}
	if total > 0 {
		for i := range out {
			out[i] /= total
		}
	}
	return out
}
