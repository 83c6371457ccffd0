package validate

import (
	"testing"
)

// box builds cards of one kind with these read bandwidths (every other gate equal).
func box(t *testing.T, kind string, reads ...float64) []Card {
	t.Helper()
	s := standard(t)
	var cards []Card
	for i, bw := range reads {
		r := goodH100()
		r.readBW = bw
		plan, out := runSuite(t, s, r)
		_, gates := PerformanceChecks(CardKind{Spec: gpuRow(t, kind)}, s, plan, out, DefaultThresholds())
		cards = append(cards, Card{Index: i, UUID: "GPU-" + string(rune('a'+i)), SpecKey: kind, Gates: gates})
	}
	return cards
}

func TestBoxOutlierBelowItsPeers(t *testing.T) {
	// Seven cards at 3.10 TB/s and one at 2.89 TB/s: 86% of datasheet passes the 85% gate, but
	// it is 6.8% below the median of its peers.
	cards := box(t, "h100-sxm", 3.10e12, 3.10e12, 3.11e12, 3.09e12, 2.89e12, 3.10e12, 3.10e12, 3.12e12)
	AddBoxOutliers(cards, BuiltinThresholds())
	for i, c := range cards {
		got := find(t, c.Checks, "outlier.read_bandwidth")
		if i == 4 {
			expect(t, got, Warn, "2.89 TB/s is 6.8% below the median 3.10 TB/s of the 8 h100-sxm cards in this box", "more than 5%")
		} else {
			expect(t, got, Pass, "the median 3.10 TB/s")
		}
	}
	// The linear and attention gates scale with the read bandwidth here, so the slow card is
	// an outlier on them too; the tensor gate is equal on all.
	expect(t, find(t, cards[4].Checks, "outlier.linear_batch1"), Warn)
	expect(t, find(t, cards[4].Checks, "outlier.tensor"), Pass)
}

func TestOutlierVerdictFromThresholds(t *testing.T) {
	cards := box(t, "h100-sxm", 3.1e12, 3.1e12, 2.8e12)
	d := DefaultThresholds()
	d.Outlier = OutlierThreshold{BelowMedian: 0.05, Verdict: Fail}
	AddBoxOutliers(cards, ThresholdSet{Default: d, ByGPU: builtinByGPU(d)})
	expect(t, find(t, cards[2].Checks, "outlier.read_bandwidth"), Fail)
}

func TestOutliersCompareOnlyIdenticalPeers(t *testing.T) {
	// An H100 SXM and an H100 PCIe in one box are no peers: no outlier checks at all.
	cards := append(box(t, "h100-sxm", 3.1e12), box(t, "h100-pcie", 1.8e12)...)
	AddBoxOutliers(cards, BuiltinThresholds())
	for _, c := range cards {
		if len(c.Checks) != 0 {
			t.Errorf("card %s of %s got %d checks without a peer", c.UUID, c.SpecKey, len(c.Checks))
		}
	}
	// Emulated values are no speed and never compared.
	cards = box(t, "h100-sxm", 3.1e12, 2.0e12)
	for i := range cards {
		for j := range cards[i].Gates {
			cards[i].Gates[j].Emulated = true
		}
	}
	AddBoxOutliers(cards, BuiltinThresholds())
	if len(cards[1].Checks) != 0 {
		t.Errorf("emulated cards compared: %+v", cards[1].Checks)
	}
}

func TestBelowMedian(t *testing.T) {
	if b := BelowMedian(95, 100); b != 0.05 {
		t.Errorf("BelowMedian = %g", b)
	}
}
