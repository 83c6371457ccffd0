package measure

import (
	"fmt"

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
	bw, rate := bytes/secondsPerCall, flops/secondsPerCall
	margin := PlausibleMargin
	if inL2 {
		margin = L2Margin
	}
	var why string
	switch {
	case d.BytesPerSec > 0 && bw > margin*d.BytesPerSec:
		why = fmt.Sprintf("%s/s is %.3gx the datasheet's %s/s", units.Bytes(bw), bw/d.BytesPerSec, units.Bytes(d.BytesPerSec))
	case d.FLOPsPerSec > 0 && rate > PlausibleMargin*d.FLOPsPerSec:
		why = fmt.Sprintf("%.3g FLOP/s is %.3gx the datasheet's %.3g FLOP/s", rate, rate/d.FLOPsPerSec, d.FLOPsPerSec)
	default:
		return ""
	}
	return fmt.Sprintf("%s: %s (%s; %.3g s a call)", ImplausibleReason, why, d.Source, secondsPerCall)
}

// errImplausible is a sample no card could give, found while calibrating.
type errImplausible string

func (e errImplausible) Error() string { return string(e) }
