package validate

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/measure"
)

// implausibleGates holds each gate of c, as its report gives it, to the datasheet bound no card
// of its kind passes (measure.Implausible): the bandwidth gates to the datasheet bandwidth, the
// tensor gate to the dense rate, the model step to the roofline bound the report names. A gate
// past its bound is a forged report or a timer fault, never a fast card: it becomes a FAIL
// finding and leaves the card's gates, so that no median, outlier or baseline counts it.
func implausibleGates(c Card, fc *FleetCard) {
	key := c.SpecKey
	if key == "" {
		key = c.Name
	}
	ds := measure.DatasheetOf(key, c.MemoryBytes)
	for _, g := range c.Gates {
		if g.Emulated || g.Value == 0 {
			continue
		}
		var bound float64
		switch g.Gate {
		case GateReadBandwidth, GateLinearBatch1, GateAttentionLong:
			bound = ds.BytesPerSec
		case GateTensor:
			bound = ds.FLOPsPerSec
		case GateModelStep:
			bound = g.Reference
		}
		why := measure.Implausible(g.Gate, g.Value, bound, g.Unit, false)
		if why == "" {
			continue
		}
		if ds.Source != "" && g.Gate != GateModelStep {
			why += " (" + ds.Source + ")"
		}
		fc.Verdict = Fail
		fc.Findings = append(fc.Findings, Finding{ID: "implausible." + g.Gate, Verdict: Fail,
			Message: fmt.Sprintf("%s: %s; the report is forged or its timer is at fault.", measure.ImplausibleReason, why)})
		delete(fc.Gates, g.Gate)
	}
}
