package measure

import (
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// Check is one verification in full, as `decodebench verify` reports it: the verdict, what
// the planner resolved, and the elements that decided it. The timed measurements keep only
// its Verification.
type Check struct {
	Verification
	Kernel string
	// Status is StatusOK when the kernel ran and its output was compared (passed or not: see
	// Passed); StatusSkipped (the shape is refused) or StatusFailed when it could not run, and
	// Verification.Reason says why.
	Status   string
	Plan     Plan
	Emulated bool
	// Bytes and FLOPs of the call, as the planner counts them (probes) or the spec does.
	Bytes, FLOPs float64
	// From the comparison against the float64 reference, indices into the whole output
	// (linear Y[batch x n], attention out[batch, q_heads, head_dim]): the element with the
	// largest error (Index -1 where no element was compared: the probes compare words), how
	// many lie outside their bound, and the first few of those.
	Worst      ref.Element
	OutOfBound int
	Mismatches []ref.Element
	// Outputs are the outputs compared one by one, where a call writes several (the small
	// ops); Verification then sums their counts and names the first that failed.
	Outputs []OutputCheck
}

// Verify runs the call s once, with one copy of its operands, and checks every output against
// the float64 reference: the check `decodebench verify` prints, and the one every timed
// measurement starts with (which compares a sample of a large output). Nothing is timed.
func Verify(dev *cgo.Device, s Spec, o Options) Check {
	if why := s.shapeError(); why != "" {
		return Check{Kernel: s.Kind, Status: StatusFailed, Verification: Verification{Reason: why}, Worst: noElement}
	}
	o.checkOnly = true
	o.MaxRotateBytes = 1 // one copy of every operand
	var out Outcome
	var c Check
	switch s.Kind {
	case KindLinear:
		out, c = linear(dev, *s.Linear, o)
	case KindAttention:
		out, c = attention(dev, *s.Attention, o)
	case KindAttentionMLA:
		out, c = mla(dev, *s.MLA, o)
	case KindLinearGrouped:
		out, c = grouped(dev, *s.Grouped, o)
	case KindSmallOp:
		out, c = smallOp(dev, *s.SmallOp, o)
	default:
		out, c = probe(dev, *s.Probe, o)
	}
	c.Kernel, c.Plan, c.Emulated, c.Bytes, c.FLOPs = out.Kernel, out.Plan, out.Emulated, out.Bytes, out.FLOPs
	c.Status = StatusOK
	if !c.Ran() {
		c.Status, c.Verification.Reason = out.Status, out.Reason
	}
	return c
}

// Ran reports whether the kernel ran and its output was compared (passed or not).
func (c Check) Ran() bool { return c.Checked > 0 }

// noElement is the Worst of a check that compared no element.
var noElement = ref.Element{Index: -1}

// noCheck is the Check of a measurement that stopped before its verification.
var noCheck = Check{Worst: noElement}

// checkOf is a Check of v alone: no element-level comparison (the probes compare words).
func checkOf(v Verification) Check { return Check{Verification: v, Worst: noElement} }

// elementsOf is a comparison's worst element and mismatches with their indices mapped from
// the compared subset into the whole output by index.
func elementsOf(cmp ref.Comparison, index func(i int) int) (worst ref.Element, mismatches []ref.Element) {
	worst = cmp.Worst
	if worst.Index >= 0 {
		worst.Index = index(worst.Index)
	}
	for _, m := range cmp.Mismatches {
		m.Index = index(m.Index)
		mismatches = append(mismatches, m)
	}
	return worst, mismatches
}
