package measure

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/units"
)

// Datasheet is a card's published ceilings. No honest measurement exceeds them: a rate above
// PlausibleMargin x either is a timer that under-reports (or a kernel that skipped its work)
// and is recorded as failed, never as a speed.
type Datasheet struct {
	BytesPerSec float64 `json:"bytes_per_s"` // memory bandwidth, decimal
	FLOPsPerSec float64 `json:"flops_per_s"` // the fastest arithmetic rate (dense bf16 tensor)
	Source      string  `json:"source"`
}

// PlausibleMargin is how far above the datasheet a measurement may be: boost clocks and the
// datasheet's rounding give a few percent, never more.
const PlausibleMargin = 1.05

// L2Margin replaces PlausibleMargin for the bandwidth of a call whose rotated operands could
// not be kept out of L2 (a working set under twice L2, which its Rotation says): L2 serves a
// few times HBM's bandwidth, so only a rate beyond any cache (10x HBM) is a fault there.
const L2Margin = 10

// ImplausibleReason starts the reason of an Outcome failed for a speed no card reaches.
const ImplausibleReason = "implausible: timer or kernel fault"

// DatasheetOf is the spec row of a device by the name it reports (an NVML product name or a
// row key), zero for a device without one (the emulator, an unknown card).
func DatasheetOf(name string, memoryBytes uint64) Datasheet {
	g, ok := roofline.MatchNVML(name, memoryBytes)
	if !ok {
		var err error
		if g, err = roofline.LookupGPU(name); err != nil {
			return Datasheet{}
		}
	}
	return Datasheet{BytesPerSec: g.BandwidthBytesPerSec, FLOPsPerSec: max(g.TensorBF16FLOPs, g.FP32FLOPs), Source: "spec table: " + g.Name}
}

// datasheet is Options.Datasheet, or the device's own spec row where the options leave it zero.
func (o Options) datasheet(info deviceInfo) Datasheet {
	if o.Datasheet.BytesPerSec > 0 || o.Datasheet.FLOPsPerSec > 0 {
		return o.Datasheet
	}
	return DatasheetOf(info.props.Name, info.props.MemTotalBytes)
}

// mayHitL2 reports whether r left the operands small enough for L2 to serve them.
func mayHitL2(r Rotation) bool { return r.L2Bytes > 0 && r.WorkingSetBytes < 2*r.L2Bytes }

// implausible says why bytes and flops moved in secondsPerCall cannot be true of a card with
// datasheet d ("" if they can, or d is unknown); inL2: the operands may come from L2.
func implausible(bytes, flops, secondsPerCall float64, d Datasheet, inL2 bool) string {
	if !(secondsPerCall > 0) {
		return ""
	}
	margin := PlausibleMargin
	if inL2 {
		margin = L2Margin
	}
	why := beyond("bandwidth", bytes/secondsPerCall, d.BytesPerSec, margin, UnitBytesPerSec)
	if why == "" {
		why = beyond("arithmetic rate", flops/secondsPerCall, d.FLOPsPerSec, PlausibleMargin, UnitFLOPsPerSec)
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("%s: %s (%s; %.3g s a call)", ImplausibleReason, why, d.Source, secondsPerCall)
}

// Units Implausible formats (any other is printed after the number as it is).
const (
	UnitBytesPerSec  = "B/s"
	UnitFLOPsPerSec  = "FLOP/s"
	UnitTokensPerSec = "tokens/s"
)

// CacheableBytes is more than any card's last-level cache holds twice over (an H200 has 60 MB
// of L2): a step or call that reads more cannot have been served by a cache.
const CacheableBytes = 256e6

// Implausible is the one check of a number against the datasheet bound no card passes, for
// every number read back from a file (a sweep's records, a validate report): it says why value
// (what, in unit) is more than PlausibleMargin x bound, naming both, or "" when it is not or the
// bound is unknown (0). inCache: the value's operands may have come from a cache (it read under
// CacheableBytes), so only L2Margin x bound is a fault. A value that is not a finite number is
// implausible whatever the bound.
func Implausible(what string, value, bound float64, unit string, inCache bool) string {
	margin := PlausibleMargin
	if inCache {
		margin = L2Margin
	}
	return beyond(what, value, bound, margin, unit)
}

func beyond(what string, value, bound, margin float64, unit string) string {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Sprintf("%s is %v, not a number", what, value)
	}
	if !(bound > 0) || value <= margin*bound {
		return ""
	}
	return fmt.Sprintf("%s %s is %.3gx the datasheet bound of %s", what, formatRate(value, unit), value/bound, formatRate(bound, unit))
}

func formatRate(v float64, unit string) string {
	if unit == UnitBytesPerSec {
		return units.Bytes(v) + "/s"
	}
	return fmt.Sprintf("%.4g %s", v, unit)
}

// errImplausible is a sample no card could give, found while calibrating.
type errImplausible string

func (e errImplausible) Error() string { return string(e) }
