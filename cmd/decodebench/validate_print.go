package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/validate"
)

// outcomeNote is one progress line's result.
func outcomeNote(o validate.Outcome) string {
	switch {
	case o.Status != measure.StatusOK:
		return fmt.Sprintf("%s: %s", o.Status, o.Reason)
	case o.FLOPs > 0 && o.Bytes == 0:
		return validate.FormatValue(o.FLOPsPerSec, validate.UnitFLOPsPerSec) + ", verified"
	}
	return fmt.Sprintf("%s in %s, verified", validate.FormatValue(o.BytesPerSec, validate.UnitBytesPerSec), micros(o.MedianSeconds))
}

// printReport prints the verdict: per card its identity and its warnings and failures (every
// check with allChecks), then the box's.
func printReport(w io.Writer, r validate.Report, allChecks bool) {
	fmt.Fprintf(w, "\ndecodebench validate on %s: %d card(s), driver %s, %s backend, %s suite, %.0f s\n",
		r.Hostname, len(r.Cards), orDash(r.Driver), orDash(r.Backend), r.Suite, r.Seconds)
	if r.Emulated {
		fmt.Fprintf(w, "*** %s ***\n", emulatedWarning)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, card := range r.Cards {
		counts := validate.CountChecks(card.Checks)
		fmt.Fprintf(tw, "\nGPU %d\t%s\t%s\tserial %s\t%s\t%s (%s)\n", card.Index, card.Name,
			card.UUID, orDash(card.Serial), card.PCIBusID, card.Verdict, countsText(counts))
		printChecks(tw, card.Checks, allChecks)
	}
	if slices.ContainsFunc(r.Checks, func(ch validate.Check) bool { return allChecks || ch.Verdict != validate.Pass }) {
		fmt.Fprintf(tw, "\nbox\n")
		printChecks(tw, r.Checks, allChecks)
	}
	tw.Flush()
	if r.Verdict == validate.Interrupted {
		cut := 0
		for _, c := range r.Cards {
			if c.CutShort {
				cut++
			}
		}
		fmt.Fprintf(w, "\nverdict: INTERRUPTED (%s): %d of %d card(s) cut short; what was measured is above and in the report, but it is no verdict on the hardware: run validate again\n",
			r.Interrupted, cut, len(r.Cards))
		return
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nverdict: FAIL: cannot validate: %s\n", r.Error)
		return
	}
	fmt.Fprintf(w, "\nverdict: %s (%d checks: %s)\n", r.Verdict, r.Counts.Total(), countsText(r.Counts))
	if r.Counts.Skip > 0 {
		fmt.Fprintf(w, "%d check(s) could not run (SKIP, listed above): they say nothing about the hardware, and the verdict does not count them\n", r.Counts.Skip)
	}
}

// countsText is "3 pass, 1 warn, 0 fail", with the skips when there are any.
func countsText(c validate.Counts) string {
	text := fmt.Sprintf("%d pass, %d warn, %d fail", c.Pass, c.Warn, c.Fail)
	if c.Skip > 0 {
		text += fmt.Sprintf(", %d skip", c.Skip)
	}
	return text
}

func printChecks(tw io.Writer, checks []validate.Check, all bool) {
	for _, ch := range checks {
		if ch.Verdict == validate.Pass && !all {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", ch.Verdict, ch.ID, checkValue(ch), ch.Message)
	}
}

// checkValue is a check's measured value against its threshold, short.
func checkValue(ch validate.Check) string {
	value, threshold := ch.ValueText, ch.ThresholdText
	if value == "" && ch.Value != nil {
		value = shortNumber(*ch.Value, ch.Unit)
	}
	if threshold == "" && ch.Threshold != nil {
		threshold = shortNumber(*ch.Threshold, ch.Unit)
	}
	switch {
	case value == "":
		return "-"
	case threshold == "":
		return value
	}
	cmp := ch.Compare
	if cmp == "" {
		cmp = "vs"
	}
	return value + " (" + cmp + " " + threshold + ")"
}

func shortNumber(v float64, unit string) string {
	switch unit {
	case validate.UnitBytesPerSec, validate.UnitFLOPsPerSec, validate.UnitTokensPerSec:
		return validate.FormatValue(v, unit)
	case "relative error":
		return fmt.Sprintf("%.2g", v)
	case "fraction of readings":
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	return strings.TrimSpace(fmt.Sprintf("%.4g %s", v, unit))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
