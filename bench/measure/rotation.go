package measure

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"math"
)

// maxCopies bounds the rotation of tiny operands (an N=1 weight row is 8 kB): past it the
// working set stays under the factor asked and Method says so.
const maxCopies = 1 << 16

// copiesFor is how many copies of an operand of bytesPerCopy the timed calls cycle through so
// that copies x bytesPerCopy >= factor x l2: at least 1, at most what capBytes holds (and
// maxCopies). A copy that alone exceeds factor x l2 needs no rotation.
func copiesFor(bytesPerCopy, l2Bytes, factor, capBytes float64) int {
	if !(bytesPerCopy > 0) {
		return 1
	}
	want := math.Ceil(factor * l2Bytes / bytesPerCopy)
	limit := math.Floor(capBytes / bytesPerCopy)
	n := math.Min(math.Min(want, limit), maxCopies)
	if !(n >= 1) { // NaN or below one
		return 1
	}
	return int(n)
}

// planRotation decides the copies of an operand that a call reads bytesPerCopy of and that
// takes allocPerCopy of memory (more, for a cache sized for its longest sequence), within
// capBytes of memory, and describes the choice.
func planRotation(bytesPerCopy, allocPerCopy, l2Bytes, factor float64, capBytes uint64) Rotation {
	capRead := float64(capBytes)
	if allocPerCopy > bytesPerCopy && allocPerCopy > 0 {
		capRead *= bytesPerCopy / allocPerCopy
	}
	copies := copiesFor(bytesPerCopy, l2Bytes, factor, capRead)
	return describeRotation(copies, bytesPerCopy, l2Bytes, factor, capBytes)
}

// describeRotation fills Rotation for copies of bytesPerCopy, and says when the working set
// falls short of factor x L2 and why.
func describeRotation(copies int, bytesPerCopy, l2Bytes, factor float64, capBytes uint64) Rotation {
	r := Rotation{Copies: copies, WorkingSetBytes: float64(copies) * bytesPerCopy, L2Bytes: l2Bytes}
	times := "?"
	if l2Bytes > 0 {
		times = fmt.Sprintf("%.3gx", r.WorkingSetBytes/l2Bytes)
	}
	l2 := fmt.Sprintf("L2 (%s)", units.Bytes(l2Bytes))
	if copies == 1 {
		r.Method = fmt.Sprintf("single copy, working set %s = %s %s", units.Bytes(r.WorkingSetBytes), times, l2)
	} else {
		r.Method = fmt.Sprintf("rotate %d copies, %s working set = %s %s", copies, units.Bytes(r.WorkingSetBytes), times, l2)
	}
	if l2Bytes > 0 && r.WorkingSetBytes < factor*l2Bytes {
		why := fmt.Sprintf("capped by %s for rotated copies", units.Bytes(float64(capBytes)))
		if copies >= maxCopies {
			why = fmt.Sprintf("capped at %d copies", maxCopies)
		}
		r.Method += fmt.Sprintf(", below the %gx asked (%s)", factor, why)
		if r.WorkingSetBytes < l2Bytes {
			r.Method += ": operands may come from L2"
		}
	}
	return r
}
