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

// A whole box of the baseline that sends no report now is named and fails the fleet, as a card
// gone from a box that reported does; one whose report is there but unreadable is left to
// Unreadable (INCOMPLETE), not named twice.
func TestFleetBaselineNamesAGoneBox(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	base := AnalyzeFleet([]LoadedReport{
		{Path: "a", Report: synthBox(t, "node01", 2, nil, t0)},
		{Path: "b", Report: synthBox(t, "node02.cluster", 2, nil, t0)},
		{Path: "c", Report: synthBox(t, "node03", 2, nil, t0)},
	}, nil, FleetOptions{})
	later := t0.AddDate(0, 1, 0)
	s := AnalyzeFleet([]LoadedReport{{Path: "a", Report: synthBox(t, "node01", 2, nil, later)}},
		[]UnreadableReport{{File: "c", Host: "node03", Reason: "cut short"}},
		FleetOptions{Baseline: &base, BaselineName: "base.json"})
	if s.Verdict != Fail || len(s.GoneBoxes) != 1 || s.GoneBoxes[0] != "node02.cluster" {
		t.Errorf("verdict %s, gone boxes %v; want FAIL naming node02.cluster alone", s.Verdict, s.GoneBoxes)
	}
}
