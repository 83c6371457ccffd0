package validate

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/timing"
)

// PeerKey groups identical cards: the spec row, or for a card without one, its NVML name and
// memory size. Cards are compared only with cards of the same key.
func PeerKey(c Card) string {
	if c.SpecKey != "" {
		return c.SpecKey
	}
	return fmt.Sprintf("%s (%d MiB)", c.Name, c.MemoryBytes>>20)
}

// BelowMedian is how far below median x is, as a fraction of the median (negative above it).
func BelowMedian(x, median float64) float64 {
	if median <= 0 {
		return 0
	}
	return (median - x) / median
}

// outlierValue is a gate value eligible for comparison: measured, on real hardware.
func outlierValue(g GateValue) (float64, bool) {
	return g.Value, g.Value > 0 && !g.Emulated
}

// AddBoxOutliers compares every card with the median of its identical peers in the box (same
// PeerKey, the card itself included) on each gate's value, and adds an "outlier.<gate>" check
// to each card of a group of two or more: the group's verdict (WARN unless thresholds say FAIL)
// for a card more than below_median under the median, PASS otherwise. The value compared is
// the gate's own (B/s, FLOP/s, tokens/s), so a card is judged by how fast it is, not by how its
// kernel did against its own slow memory.
func AddBoxOutliers(cards []Card, set ThresholdSet) {
	for _, gate := range Gates {
		groups := map[string][]int{}
		for i, c := range cards {
			if g, ok := c.Gate(gate); ok {
				if _, ok := outlierValue(g); ok {
					groups[PeerKey(c)] = append(groups[PeerKey(c)], i)
				}
			}
		}
		for key, members := range groups {
			if len(members) < 2 {
				continue
			}
			var values []float64
			for _, i := range members {
				g, _ := cards[i].Gate(gate)
				values = append(values, g.Value)
			}
			med := timing.Median(values)
			t := set.For(cards[members[0]].SpecKey).Outlier
			for j, i := range members {
				cards[i].Checks = append(cards[i].Checks, outlierCheck(gate, key, values[j], med, len(members), t, "in this box"))
			}
		}
	}
}

// outlierCheck holds one value against its group's median.
func outlierCheck(gate, key string, value, median float64, peers int, t OutlierThreshold, where string) Check {
	unit := gateUnit(gate)
	below := BelowMedian(value, median)
	c := Check{
		ID: "outlier." + gate, Category: CategoryOutlier, Unit: unit, Compare: ">=",
		Value: num(value), Threshold: num(median * (1 - t.BelowMedian)),
	}
	if below > t.BelowMedian {
		c.Verdict = t.Verdict
		c.Message = fmt.Sprintf("%s %s is %.1f%% below the median %s of the %d %s cards %s (more than %.0f%%): even if it passes its gate, this card is slower than its peers; check its clocks, cooling and PCIe link against theirs.",
			gateLabel(gate), FormatValue(value, unit), 100*below, FormatValue(median, unit), peers, key, where, 100*t.BelowMedian)
		return c
	}
	c.Verdict = Pass
	rel := "below"
	if below < 0 {
		rel, below = "above", -below
	}
	c.Message = fmt.Sprintf("%s %s is %.1f%% %s the median %s of the %d %s cards %s.",
		gateLabel(gate), FormatValue(value, unit), 100*below, rel, FormatValue(median, unit), peers, key, where)
	return c
}

func gateUnit(gate string) string {
	switch gate {
	case GateTensor:
		return UnitFLOPsPerSec
	case GateModelStep:
		return UnitTokensPerSec
	}
	return UnitBytesPerSec
}

// gateLabel names a gate in a sentence.
func gateLabel(gate string) string {
	switch gate {
	case GateReadBandwidth:
		return "Read bandwidth"
	case GateTensor:
		return "Tensor-core rate"
	case GateLinearBatch1:
		return "Batch-1 decode linear"
	case GateAttentionLong:
		return "Long-context attention"
	case GateModelStep:
		return "Reference model step"
	}
	return gate
}
