package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep/report"
)

// printHeadlines prints the headline of each model of the run directory dir: what a sweep
// ends with, after its summary line.
func printHeadlines(w io.Writer, dir string) {
	hs, err := report.Headlines(dir)
	if err != nil {
		fmt.Fprintf(w, "headline: %v\n", err)
		return
	}
	for _, h := range hs {
		fmt.Fprintln(w)
		for _, line := range h.Lines() {
			fmt.Fprintln(w, "  "+line)
		}
	}
	if len(hs) > 0 {
		fmt.Fprintln(w)
	}
}

// benchHeadline is what a bench run ends with: the warnings that change how to read it (the
// emulator, failed, unconverged and throttled measurements, counted), then the device, the
// kernels measured ok, the best bandwidth and the median fraction of the read ceiling. Probes
// and the launch baseline are the ceilings, not kernels, and are left out of the numbers.
func benchHeadline(device string, emulated bool, records []benchRecord, labels []string) []string {
	var lines []string
	var kernels, ok, failed, unconverged, throttled int
	var fractions []float64
	best := -1
	for i, r := range records {
		if r.Kind == "probe" || r.Kind == "launch" {
			continue
		}
		kernels++
		switch r.Status {
		case measure.StatusOK:
			ok++
			if !r.Converged {
				unconverged++
			}
			if r.Throttled {
				throttled++
			}
			if r.FractionOfRead > 0 {
				fractions = append(fractions, r.FractionOfRead)
			}
			if best < 0 || r.AchievedGBps > records[best].AchievedGBps {
				best = i
			}
		case measure.StatusFailed:
			failed++
		}
	}
	of := func(n int, what string) string {
		return fmt.Sprintf("WARNING: %d of %d measurements %s", n, kernels, what)
	}
	if emulated {
		lines = append(lines, "WARNING: EMULATED on the CPU: these times are the emulator's, not a speed")
	}
	if failed > 0 {
		lines = append(lines, of(failed, "failed"))
	}
	if throttled > 0 {
		lines = append(lines, of(throttled, "taken while the card throttled"))
	}
	if unconverged > 0 {
		lines = append(lines, of(unconverged, "did not converge to the spread target"))
	}
	lines = append(lines, fmt.Sprintf("Device: %s; %d of %d kernel measurements ok", device, ok, kernels))
	if best >= 0 {
		r := records[best]
		s := fmt.Sprintf("Best bandwidth: %.4g GB/s (%s, median %s)", r.AchievedGBps, labels[best], micros(r.MedianSeconds))
		if r.FractionOfRead > 0 {
			s += fmt.Sprintf(", %s of the read ceiling", percent(r.FractionOfRead))
		}
		lines = append(lines, s)
	}
	if len(fractions) > 0 {
		slices.Sort(fractions)
		m := fractions[len(fractions)/2]
		if len(fractions)%2 == 0 {
			m = (fractions[len(fractions)/2-1] + m) / 2
		}
		lines = append(lines, fmt.Sprintf("Read ceiling, median: %s over %d kernels", percent(m), len(fractions)))
	}
	return lines
}

// Every sweep's and predict's axes unless asked otherwise: powers of two from 1 to 256
// sequences and from 1k to 32k tokens, the range where decode goes from bandwidth-bound to
// compute-bound on current cards.
const (
	defaultBatches  = "1-256*2"
	defaultContexts = "1k-32k*2"
)

// writeSweepSummary writes the run's headline per card and model as rows: what the table
// format prints as sentences.
func writeSweepSummary(w io.Writer, name, dir string) error {
	hs, err := report.Headlines(dir)
	if err != nil {
		return fmt.Errorf("headline: %w", err)
	}
	rows := format.Rows{Columns: []string{"card", "model", "emulated", "configs_ok", "configs", "batch1_batch", "batch1_context",
		"batch1_per_request_tokens_per_s", "peak_batch", "peak_context", "peak_per_server_tokens_per_s",
		"median_fraction_of_datasheet", "median_fraction_of_measured", "composed_over_e2e", "verdict", "warnings"}}
	for _, h := range hs {
		var sb, sc, pb, pc any
		var sRate, pRate any
		if h.Single != nil {
			sb, sc, sRate = h.Single.Batch, h.Single.Context, h.Single.PerRequestTokensPerSec
		}
		if h.Peak != nil {
			pb, pc, pRate = h.Peak.Batch, h.Peak.Context, h.Peak.PerServerTokensPerSec
		}
		rows.Add(h.Card, h.Model, h.Emulated, h.OK, h.Total, sb, sc, sRate, pb, pc, pRate,
			h.MedianDatasheet, h.MedianMeasured, h.EndToEnd, h.Verdict, strings.Join(h.Warnings, "; "))
	}
	return format.Write(w, name, rows)
}
