package validate

import (
	"strings"
	"testing"
	"time"
)

// An H100 report of 10 TB/s (3x its 3.35 TB/s datasheet) is a forged report or a timer fault:
// the fleet fails that card, names the value and the bound, and keeps it out of the medians.
func TestFleetRefusesImplausibleGates(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	forged := synthBox(t, "node01", 4, map[int]float64{2: 10e12 / 3.35e12}, t0)
	s := AnalyzeFleet([]LoadedReport{{Path: "a", Report: forged}}, nil, FleetOptions{})
	if s.Verdict != Fail || len(s.FailingCards) != 1 || s.FailingCards[0].UUID != "GPU-node01-2" {
		t.Fatalf("verdict %s, failing %+v; want FAIL on GPU-node01-2", s.Verdict, s.FailingCards)
	}
	var read *Finding
	for i, f := range s.FailingCards[0].Findings {
		if f.ID == "implausible."+GateReadBandwidth {
			read = &s.FailingCards[0].Findings[i]
		}
	}
	if read == nil || !strings.Contains(read.Message, "10.00 TB/s") || !strings.Contains(read.Message, "3.35 TB/s") {
		t.Errorf("findings %+v; want implausible.read_bandwidth naming the 10 TB/s and the 3.35 TB/s bound", s.FailingCards[0].Findings)
	}
	for _, d := range s.Distributions {
		if d.Gate == GateReadBandwidth && d.Max > 4e12 {
			t.Errorf("the forged value reached the distribution: %+v", d)
		}
	}
}
