package validate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/decodebench/decodebench/plots"
)

// referenceLabel says what a gate's fraction is of, for an axis.
func referenceLabel(gate string) string {
	switch gate {
	case GateReadBandwidth:
		return "% of the datasheet bandwidth"
	case GateTensor:
		return "% of the datasheet dense bf16 rate"
	case GateLinearBatch1, GateAttentionLong:
		return "% of the card's measured read bandwidth"
	case GateModelStep:
		return "% of the roofline bound (datasheet)"
	}
	return "% of reference"
}

// PlotGateDistributions draws one chart per gate through plots.Distribution: every card's
// value as a percentage of the gate's reference, one column per kind of card, the kind's
// threshold as a dashed line labelled inside the frame, failing cards crossed and fleet
// outliers marked. Cards whose gate has no reference (no spec row, an absolute threshold) are
// left out. It writes <dir>/fleet-<gate>.png and .svg and returns the paths written.
func PlotGateDistributions(s FleetSummary, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	outlier := map[string]bool{}
	for _, o := range s.Outliers {
		outlier[o.UUID+"/"+o.Gate] = true
	}
	var paths []string
	for _, gate := range Gates {
		columns := gateColumns(s, gate, outlier)
		if len(columns) == 0 {
			continue
		}
		c := plots.Chart{Title: fmt.Sprintf("%s across the fleet (%d boxes)", gateLabel(gate), s.Boxes),
			Subtitle: "each marker one card, spread across its kind's column in fleet order; dashed: the kind's threshold"}
		if len(s.EmulatedBoxes) > 0 {
			c.Title += ": includes emulated runs, no speed"
		}
		p, err := plots.Distribution(c, referenceLabel(gate), columns, filepath.Join(dir, "fleet-"+gate))
		if err != nil {
			return paths, fmt.Errorf("plotting the %s gate: %w", gate, err)
		}
		paths = append(paths, p...)
	}
	return paths, nil
}

// gateColumns are the gate's values by kind of card, in percent of the reference.
func gateColumns(s FleetSummary, gate string, outlier map[string]bool) []plots.DistributionColumn {
	var out []plots.DistributionColumn
	for _, kind := range s.Kinds {
		col := plots.DistributionColumn{}
		required := 0.0
		for _, c := range s.Cards {
			g, ok := c.Gates[gate]
			if !ok || c.Kind != kind || !(g.Fraction > 0) || math.IsInf(g.Fraction, 0) {
				continue
			}
			mark := plots.MarkOK
			switch {
			case c.Verdict == Fail:
				mark = plots.MarkFailing
			case outlier[c.UUID+"/"+gate]:
				mark = plots.MarkOutlier
			}
			col.Values, col.Marks = append(col.Values, 100*g.Fraction), append(col.Marks, mark)
			required = max(required, g.RequiredFraction)
		}
		if len(col.Values) == 0 {
			continue
		}
		col.Label = fmt.Sprintf("%s (%d)", kind, len(col.Values))
		col.Threshold = 100 * required
		col.ThresholdText = fmt.Sprintf("threshold %.4g%%", 100*required)
		out = append(out, col)
	}
	return out
}
