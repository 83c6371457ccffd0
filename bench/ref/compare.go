package ref

import (
	"fmt"
	"math"
)

// Element is one output element next to its reference.
type Element struct {
	Index  int
	Got    float32
	Want   float64
	AbsErr float64 // |Got − Want|; +Inf when Got is NaN or infinite
	Bound  float64 // the element's own bound, 0 when the comparison had none
}

// Comparison is the verdict on a kernel's output against a float64 reference.
type Comparison struct {
	Count int
	// RelError is ‖got−want‖₂ / ‖want‖₂ over the finite elements (or ‖got−want‖₂ when the
	// reference is all zero).
	RelError  float64
	Tolerance float64 // the largest acceptable RelError
	// Worst is the element with the largest AbsErr: the first non-finite one if any.
	Worst Element
	// NonFinite counts NaN and infinite outputs: any at all fails the comparison, whatever
	// the norms say.
	NonFinite int
	// OutOfBound counts elements outside their own bound (non-finite ones included).
	OutOfBound int
	// Mismatches lists the first few elements (in index order) that are non-finite or outside
	// their bound, for a report.
	Mismatches []Element
	Passed     bool
}

const maxMismatches = 8

// Compare checks got against want. bound, when not nil, gives each element's own largest
// acceptable |got − want|; tol bounds the L2 relative error. It passes when there is no NaN or
// infinity in got, RelError <= tol and no element is outside its bound.
func Compare(got []float32, want []float64, bound []float64, tol float64) Comparison {
	if len(got) != len(want) || (bound != nil && len(bound) != len(want)) {
		panic(fmt.Sprintf("ref.Compare: %d outputs, %d references, %d bounds", len(got), len(want), len(bound)))
	}
	c := Comparison{Count: len(got), Tolerance: tol, Worst: Element{Index: -1}}
	var diff2, want2 float64
	for i, g := range got {
		e := Element{Index: i, Got: g, Want: want[i], AbsErr: math.Inf(1)}
		if bound != nil {
			e.Bound = bound[i]
		}
		finite := !math.IsNaN(float64(g)) && !math.IsInf(float64(g), 0)
		if finite {
			d := float64(g) - want[i]
			e.AbsErr = math.Abs(d)
			diff2 += d * d
			want2 += want[i] * want[i]
		} else {
			c.NonFinite++
		}
		if c.Worst.Index < 0 || e.AbsErr > c.Worst.AbsErr {
			c.Worst = e
		}
		if !finite || (bound != nil && !(e.AbsErr <= e.Bound)) {
			c.OutOfBound++
			if len(c.Mismatches) < maxMismatches {
				c.Mismatches = append(c.Mismatches, e)
			}
		}
	}
	c.RelError = math.Sqrt(diff2)
	if want2 > 0 {
		c.RelError /= math.Sqrt(want2)
	}
	c.Passed = c.NonFinite == 0 && c.OutOfBound == 0 && c.RelError <= tol
	return c
}

// Reason says in one line why the comparison failed, or "" when it passed.
func (c Comparison) Reason() string {
	switch {
	case c.Passed:
		return ""
	case c.NonFinite > 0:
		e := c.Mismatches[0]
		return fmt.Sprintf("%d of %d outputs are NaN or infinite (first: element %d = %v, want %.6g)",
			c.NonFinite, c.Count, e.Index, e.Got, e.Want)
	case c.RelError > c.Tolerance:
		return fmt.Sprintf("relative L2 error %.3g exceeds tolerance %.3g", c.RelError, c.Tolerance)
	default:
		e := c.Mismatches[0]
		return fmt.Sprintf("%d of %d elements are outside their bound (first: element %d = %.6g, want %.6g, error %.3g > bound %.3g)",
			c.OutOfBound, c.Count, e.Index, e.Got, e.Want, e.AbsErr, e.Bound)
	}
}
