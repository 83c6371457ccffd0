package main

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
)

// A bench run's headline counts its warnings over the kernels (not the probes) and names the
// fastest kernel by bandwidth, not the first or the last.
func TestBenchHeadline(t *testing.T) {
	records := []benchRecord{
		{Kind: "probe", Status: measure.StatusOK, AchievedGBps: 4000, Converged: true},
		{Kind: "linear", Status: measure.StatusOK, AchievedGBps: 3000, FractionOfRead: 0.75, MedianSeconds: 10e-6, Converged: true},
		{Kind: "linear", Status: measure.StatusOK, AchievedGBps: 3600, FractionOfRead: 0.9, MedianSeconds: 20e-6, Converged: false, Throttled: true},
		{Kind: "linear", Status: measure.StatusOK, AchievedGBps: 2000, FractionOfRead: 0.5, MedianSeconds: 30e-6, Converged: true},
		{Kind: "attention", Status: measure.StatusFailed},
	}
	labels := []string{"probe read", "linear B=1", "linear B=8", "linear B=64", "attention S=4k"}
	text := strings.Join(benchHeadline("NVIDIA H200", false, records, labels), "\n")
	for _, want := range []string{
		"WARNING: 1 of 4 measurements failed", "WARNING: 1 of 4 measurements taken while the card throttled",
		"WARNING: 1 of 4 measurements did not converge", "Device: NVIDIA H200; 3 of 4 kernel measurements ok",
		"Best bandwidth: 3600 GB/s (linear B=8, median 20.0 µs), 90.0% of the read ceiling",
		"Read ceiling, median: 75.0% over 3 kernels",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("headline lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "EMULATED") {
		t.Errorf("a card's run called emulated:\n%s", text)
	}
}
