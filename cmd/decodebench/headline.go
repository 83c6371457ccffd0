package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
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

// writeSweepSummary writes the run's configurations as rows, one a configuration with the
// columns of results.csv (in md rounded for people, in csv and json every digit, a missing
// value empty or null); the headline, prose, goes to prose (stderr).
func writeSweepSummary(w, prose io.Writer, name, dir string) error {
	p, err := sweep.Load(dir)
	if err != nil {
		return err
	}
	if err := format.Write(w, name, report.ResultRows(p.Info, p.Records)); err != nil {
		return err
	}
	printHeadlines(prose, dir)
	return nil
}
