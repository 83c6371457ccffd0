package measure

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/cgo"
)

// Kinds of a Spec.
const (
	KindLinear    = "linear"
	KindAttention = "attention"
	KindProbe     = "probe"
)

// Spec is one kernel call to measure: its kind and the one description of that kind. A new
// kernel family adds a kind and a field; a new implementation of a family (another linear
// variant, a vendor library as a peer) is a value of that family's Variant.
type Spec struct {
	Kind      string         `json:"kind"`
	Linear    *LinearSpec    `json:"linear,omitempty"`
	Attention *AttentionSpec `json:"attention,omitempty"`
	MLA       *MLASpec       `json:"mla,omitempty"`     // KindAttentionMLA
	Grouped   *GroupedSpec   `json:"grouped,omitempty"` // KindLinearGrouped
	Probe     *ProbeSpec     `json:"probe,omitempty"`
	SmallOp   *SmallOpSpec   `json:"smallop,omitempty"` // KindSmallOp
}

// Spec wraps s.
func (s LinearSpec) Spec() Spec { return Spec{Kind: KindLinear, Linear: &s} }

// Spec wraps s.
func (s AttentionSpec) Spec() Spec {
	s.Contexts = append([]int(nil), s.Contexts...)
	return Spec{Kind: KindAttention, Attention: &s}
}

// Spec wraps s.
func (s ProbeSpec) Spec() Spec { return Spec{Kind: KindProbe, Probe: &s} }

// shapeError says what is wrong with the spec itself ("" when its kind has its description).
func (s Spec) shapeError() string {
	switch {
	case s.Kind == KindLinear && s.Linear != nil, s.Kind == KindAttention && s.Attention != nil, s.Kind == KindProbe && s.Probe != nil,
		s.Kind == KindAttentionMLA && s.MLA != nil, s.Kind == KindLinearGrouped && s.Grouped != nil, s.Kind == KindSmallOp && s.SmallOp != nil:
		return ""
	case s.Kind == KindLinear || s.Kind == KindAttention || s.Kind == KindProbe || s.Kind == KindAttentionMLA || s.Kind == KindLinearGrouped || s.Kind == KindSmallOp:
		return fmt.Sprintf("invalid spec: kind %s without its %s description", s.Kind, s.Kind)
	}
	return fmt.Sprintf("invalid spec: unknown kind %q (want %s, %s, %s, %s, %s or %s)", s.Kind, KindLinear, KindLinearGrouped, KindAttention, KindAttentionMLA, KindProbe, KindSmallOp)
}

// Measure verifies, then times, the call s describes (see Linear, Attention and Probe).
func Measure(dev *cgo.Device, s Spec, o Options) Outcome {
	if why := s.shapeError(); why != "" {
		return Outcome{Spec: s, Kernel: s.Kind, Status: StatusFailed, Reason: why}
	}
	switch s.Kind {
	case KindLinear:
		return Linear(dev, *s.Linear, o)
	case KindAttention:
		return Attention(dev, *s.Attention, o)
	case KindAttentionMLA:
		return MLA(dev, *s.MLA, o)
	case KindLinearGrouped:
		return Grouped(dev, *s.Grouped, o)
	case KindSmallOp:
		return Outcome{Spec: s, Kernel: "smallop:" + s.SmallOp.Op, Status: StatusFailed,
			Reason: "small ops are verified (Verify), not timed: a step composes their time from bandwidth"}
	}
	return Probe(dev, *s.Probe, o)
}

// Key identifies the call: two specs with one key are one measurement. Settings left to the
// kernel (auto, 0) are not written: "linear bf16 m=8 n=6144 k=4096", "linear bf16 m=8 n=6144
// k=4096 variant=gemv split_k=4", "attention bf16 b=8 q=32 kv=8 d=128 ctx=4096",
// "attention_mla bf16 b=8 q=16 ctx=4096 scale=0.1875", "probe read 1073741824 B", "probe mma".
func (s Spec) Key() string {
	if why := s.shapeError(); why != "" {
		return s.Kind
	}
	var b strings.Builder
	switch s.Kind {
	case KindLinear:
		l := s.Linear
		fmt.Fprintf(&b, "linear %s m=%d n=%d k=%d", l.DType, l.Batch, l.N, l.K)
		if l.WeightFormat != cgo.WeightDense {
			fmt.Fprintf(&b, " w=%s", l.WeightFormat)
			if l.GroupSize != 0 {
				fmt.Fprintf(&b, " group=%d", l.GroupSize)
			}
		}
		if l.Variant != cgo.LinearAuto {
			fmt.Fprintf(&b, " variant=%s", l.Variant)
		}
		if l.SplitK != 0 {
			fmt.Fprintf(&b, " split_k=%d", l.SplitK)
		}
	case KindAttention:
		a := s.Attention
		ctx := make([]string, len(a.Contexts))
		for i, n := range a.Contexts {
			ctx[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(&b, "attention %s b=%d q=%d kv=%d d=%d ctx=%s", a.DType, a.Batch, a.QHeads, a.KVHeads, a.HeadDim, strings.Join(ctx, ","))
		if a.PageSize != 0 {
			fmt.Fprintf(&b, " page=%d", a.PageSize)
		}
		if a.Splits != 0 {
			fmt.Fprintf(&b, " splits=%d", a.Splits)
		}
		if a.Variant != cgo.AttentionAuto {
			fmt.Fprintf(&b, " variant=%s", a.Variant)
		}
		if a.Scale != 0 {
			fmt.Fprintf(&b, " scale=%g", a.Scale)
		}
		if a.Append {
			b.WriteString(" append")
		}
		if a.Window != 0 {
			fmt.Fprintf(&b, " window=%d", a.Window)
		}
		if a.Chunk != 0 {
			fmt.Fprintf(&b, " chunk=%d", a.Chunk)
		}
		if a.Sinks {
			b.WriteString(" sinks")
		}
		if a.KVDType != 0 && a.KVDType != a.DType {
			fmt.Fprintf(&b, " kv=%s", a.KVDType)
		}
		if a.perHeadScales() {
			b.WriteString(" kv_scales=head")
		}
	case KindAttentionMLA:
		m := s.MLA
		ctx := make([]string, len(m.Contexts))
		for i, n := range m.Contexts {
			ctx[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(&b, "attention_mla %s b=%d q=%d ctx=%s scale=%g", m.DType, m.Batch, m.QHeads, strings.Join(ctx, ","), m.Scale)
		if m.PageSize != 0 {
			fmt.Fprintf(&b, " page=%d", m.PageSize)
		}
		if m.Splits != 0 {
			fmt.Fprintf(&b, " splits=%d", m.Splits)
		}
		if m.Append {
			b.WriteString(" append")
		}
	case KindLinearGrouped:
		g := s.Grouped
		fmt.Fprintf(&b, "linear_grouped %s groups=%d m=%d n=%d k=%d", g.DType, g.Groups, g.Rows, g.N, g.K)
		if g.XRowStride != 0 || g.XGroupStride != 0 || g.YRowStride != 0 || g.YGroupStride != 0 {
			fmt.Fprintf(&b, " strides=%d,%d,%d,%d", g.XRowStride, g.XGroupStride, g.YRowStride, g.YGroupStride)
		}
	case KindSmallOp:
		o := s.SmallOp
		fmt.Fprintf(&b, "smallop %s %s b=%d hidden=%d", o.Op, o.DType, o.Batch, o.Hidden)
	case KindProbe:
		p := s.Probe
		fmt.Fprintf(&b, "probe %s", p.Kind)
		if p.Bytes > 0 {
			fmt.Fprintf(&b, " %d B", p.Bytes)
		}
		if p.Iterations > 0 {
			fmt.Fprintf(&b, " it=%d", p.Iterations)
		}
		if p.Blocks > 0 || p.Threads > 0 {
			fmt.Fprintf(&b, " grid=%dx%d", p.Blocks, p.Threads)
		}
	}
	return b.String()
}

// Label is a short name for tables and progress: "linear 8x6144x4096", "attention B=8 S=4096",
// "read probe".
func (s Spec) Label() string {
	if s.shapeError() != "" {
		return s.Kind
	}
	switch s.Kind {
	case KindLinear:
		if l := s.Linear; l.WeightFormat != cgo.WeightDense {
			return fmt.Sprintf("linear %dx%dx%d %s", l.Batch, l.N, l.K, l.WeightFormat)
		}
		return fmt.Sprintf("linear %dx%dx%d", s.Linear.Batch, s.Linear.N, s.Linear.K)
	case KindAttention:
		return fmt.Sprintf("attention B=%d S=%d", s.Attention.Batch, s.Attention.contextsMax())
	case KindAttentionMLA:
		return fmt.Sprintf("MLA attention B=%d S=%d", s.MLA.Batch, s.MLA.contextsMax())
	case KindLinearGrouped:
		g := s.Grouped
		return fmt.Sprintf("grouped linear %dx(%dx%dx%d)", g.Groups, g.Rows, g.N, g.K)
	case KindSmallOp:
		return s.SmallOp.Op + " small op"
	}
	return s.Probe.Kind.String() + " probe"
}

// Bytes is the least one call moves (0 where it is known only once planned: compute probes).
func (s Spec) Bytes() float64 {
	switch {
	case s.shapeError() != "":
		return 0
	case s.Kind == KindLinear:
		return s.Linear.Bytes()
	case s.Kind == KindAttention:
		return s.Attention.Bytes()
	case s.Kind == KindAttentionMLA:
		return s.MLA.Bytes()
	case s.Kind == KindLinearGrouped:
		return s.Grouped.Bytes()
	case s.Kind == KindSmallOp:
		return 0
	case s.Probe.Kind.Memory():
		return float64(s.Probe.Bytes * probeBuffers(s.Probe.Kind))
	}
	return 0
}

// FLOPs of one call (0 where it is known only once planned: compute probes).
func (s Spec) FLOPs() float64 {
	switch {
	case s.shapeError() != "":
		return 0
	case s.Kind == KindLinear:
		return s.Linear.FLOPs()
	case s.Kind == KindAttention:
		return s.Attention.FLOPs()
	case s.Kind == KindAttentionMLA:
		return s.MLA.FLOPs()
	case s.Kind == KindLinearGrouped:
		return s.Grouped.FLOPs()
	}
	return 0
}

// MinDeviceBytes is the device memory one copy of the call's buffers takes: what Fits is
// asked before anything is allocated. 0 where it is not known before planning.
func (s Spec) MinDeviceBytes() uint64 {
	switch {
	case s.shapeError() != "":
		return 0
	case s.Kind == KindLinear:
		return s.Linear.MinDeviceBytes()
	case s.Kind == KindAttention:
		return s.Attention.MinDeviceBytes()
	case s.Kind == KindAttentionMLA:
		return s.MLA.MinDeviceBytes()
	case s.Kind == KindLinearGrouped:
		return s.Grouped.MinDeviceBytes()
	case s.Kind == KindSmallOp:
		return 0
	case s.Probe.Kind.Memory():
		return s.Probe.Bytes * probeBuffers(s.Probe.Kind)
	}
	return 0
}

func (s AttentionSpec) contextsMax() int {
	m := 0
	for _, n := range s.Contexts {
		m = max(m, n)
	}
	return m
}
