package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/validate"
)

func fleetCommand() *cli.Command {
	return &cli.Command{
		Name:      "fleet",
		Usage:     "read many boxes' validate reports and give the fleet verdict: failing cards, outliers, missing nodes, regressions",
		UsageText: "decodebench fleet [--out DIR] [--summary FILE] [--baseline FILE] [--expect-nodes N | --hostfile FILE] DIR...",
		Description: "Reads every validate report (*.json) under the directories, recursively, keeping each\n" +
			"host's latest, and prints: the failing cards by box and UUID, the boxes that could not\n" +
			"validate, the nodes that never reported (--expect-nodes or --hostfile), the cards more than\n" +
			"--outlier below the fleet median of their kind on a gate, and with --baseline (a summary an\n" +
			"earlier run wrote with --summary) the cards that got slower by more than --slower-by. Each\n" +
			"gate's distribution is drawn into --out (default out/fleet) as PNG and SVG, with the threshold.\n\n" +
			"A box whose validate was interrupted gives no verdict (its cards are not counted); a report\n" +
			"that cannot be read (another schema version, corrupt, cut short) is listed with the reason;\n" +
			"either makes the fleet INCOMPLETE, never PASS. A UUID on two cards, an empty UUID, or a serial\n" +
			"or bus id twice in a box fails the fleet, both places named.\n\n" +
			"Exit status: 0 when the fleet passes (warnings allowed), 1 when a card or box fails, a node\n" +
			"is missing, a card or a box is gone since the baseline, an identity is duplicated or the fleet is INCOMPLETE, 2 for a\n" +
			"bad flag or value.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: filepath.Join("out", "fleet"), TakesFile: true, // outFlag with a default
				Usage: "directory for the plots (fleet-<gate>.png and .svg), under out/ as every command's output"},
			&cli.StringFlag{Name: "summary",
				Usage: "write the fleet summary as JSON to this file (the --baseline of a later run)"},
			&cli.StringFlag{Name: "baseline",
				Usage: "an earlier fleet summary (--summary) to compare with: names the cards that got slower"},
			fractionFlag("slower-by", 0.05, "(0, 1)", "with --baseline, name a card slower by more than this fraction on any gate (0.05 or 5%)"),
			fractionFlag("outlier", 0.05, "(0, 1)", "flag a card more than this fraction below the fleet median of its kind on any gate (0.05 or 5%)"),
			&cli.IntFlag{Name: "expect-nodes",
				Usage: "the number of boxes that should have reported; fewer fails"},
			&cli.StringFlag{Name: "hostfile",
				Usage: "a file of the host names that should have reported, one a line (scontrol show hostnames writes one); names the missing"},
			&cli.BoolFlag{Name: "json",
				Usage: "print the summary as JSON instead of a table"},
		},
		OnUsageError: onUsageError,
		Action:       fleetAction,
	}
}

func fleetAction(c *cli.Context) error {
	dirs := c.Args().Slice()
	if len(dirs) == 0 {
		return usageError("fleet needs the directories holding the reports: decodebench fleet DIR...")
	}
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return usageError("%s is not a directory of reports", d)
		}
	}
	o := validate.FleetOptions{ExpectNodes: c.Int("expect-nodes"), OutlierBelowMedian: c.Float64("outlier"), SlowerBy: c.Float64("slower-by")}
	if o.ExpectNodes < 0 {
		return usageError("--expect-nodes %d: want 0 (no check) or the number of boxes", o.ExpectNodes)
	}
	if !(o.OutlierBelowMedian > 0 && o.OutlierBelowMedian < 1) {
		return usageError("--outlier %g: want a fraction in (0, 1), such as 0.05 for 5%%", o.OutlierBelowMedian)
	}
	if !(o.SlowerBy > 0 && o.SlowerBy < 1) {
		return usageError("--slower-by %g: want a fraction in (0, 1), such as 0.05 for 5%%", o.SlowerBy)
	}
	if path := c.String("hostfile"); path != "" {
		hosts, err := validate.ReadHostfile(path)
		if err != nil {
			return usageError("--hostfile: %v", err)
		}
		o.Hosts = hosts
	}
	if path := c.String("baseline"); path != "" {
		base, err := validate.ReadFleetSummary(path)
		if err != nil {
			return usageError("--baseline: %v", err)
		}
		o.Baseline, o.BaselineName = &base, path
	}
	loaded, unreadable, err := validate.LoadReports(dirs)
	if err != nil {
		return failure("reading the reports: %v", err)
	}
	s := validate.AnalyzeFleet(loaded, unreadable, o)

	var plots []string
	if out := c.String("out"); out != "" && s.CardCount > 0 {
		if plots, err = validate.PlotGateDistributions(s, out); err != nil {
			return failure("%v", err)
		}
	}
	if path := c.String("summary"); path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return failure("--summary: %v", err)
		}
		if err := validate.WriteFleetSummary(path, s); err != nil {
			return failure("--summary: %v", err)
		}
	}
	if c.Bool("json") {
		if err := writeJSON(c.App.Writer, s); err != nil {
			return err
		}
	} else {
		printFleet(c.App.Writer, s, plots)
	}
	if s.Boxes == 0 {
		return failure("no validate report in %s: fleet reads the *.json files that `decodebench validate --out FILE` writes (schema %s)%s",
			strings.Join(dirs, ", "), validate.ReportSchema, map[bool]string{true: "; see the unreadable files above", false: ""}[len(unreadable) > 0])
	}
	if s.Verdict == validate.Fail || s.Verdict == validate.Incomplete {
		return cli.Exit("", exitFailure)
	}
	return nil
}

// printFleet prints the verdict for a technician: what failed where, then what to look at.
func printFleet(w io.Writer, s validate.FleetSummary, plots []string) {
	s = printableSummary(s)
	kinds := ""
	if len(s.Kinds) > 0 {
		kinds = " (" + strings.Join(s.Kinds, ", ") + ")"
	}
	fmt.Fprintf(w, "fleet: %d box(es), %d card(s)%s: %d pass, %d warn, %d fail\n",
		s.Boxes, s.CardCount, kinds, s.CardCounts.Pass, s.CardCounts.Warn, s.CardCounts.Fail)
	if len(s.EmulatedBoxes) > 0 {
		fmt.Fprintf(w, "*** %d box(es) ran the emulated backend: their speeds are not GPU performance (%s) ***\n",
			len(s.EmulatedBoxes), strings.Join(s.EmulatedBoxes, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string, n int) bool {
		if n == 0 {
			return false
		}
		fmt.Fprintf(tw, "\n%s (%d):\n", title, n)
		return true
	}
	if section("MISSING NODES", s.MissingCount) {
		if len(s.MissingNodes) > 0 {
			fmt.Fprintf(tw, "  %s\n", strings.Join(s.MissingNodes, " "))
		} else {
			fmt.Fprintf(tw, "  %d of the %d expected boxes did not report\n", s.MissingCount, s.ExpectedNodes)
		}
	}
	if section("UNREADABLE NODES (a report is there but cannot be read)", len(s.UnreadableNodes)) {
		fmt.Fprintf(tw, "  %s\n", strings.Join(s.UnreadableNodes, " "))
	}
	if section("INTERRUPTED BOXES (no verdict: run validate again)", len(s.InterruptedBoxes)) {
		for _, e := range s.InterruptedBoxes {
			fmt.Fprintf(tw, "  %s\t%s\t(%s)\n", e.Host, e.Error, e.File)
		}
	}
	if section("DUPLICATE OR MISSING IDENTITIES", len(s.IdentityConflicts)) {
		for _, c := range s.IdentityConflicts {
			fmt.Fprintf(tw, "  %s\n", c.Message)
		}
	}
	if section("UNREADABLE REPORTS", len(s.Unreadable)) {
		for _, u := range s.Unreadable {
			fmt.Fprintf(tw, "  %s\n", u)
		}
	}
	if section("BOXES THAT COULD NOT VALIDATE", len(s.BoxErrors)) {
		for _, e := range s.BoxErrors {
			fmt.Fprintf(tw, "  %s\t%s\t(%s)\n", e.Host, e.Error, e.File)
		}
	}
	if section("FAILING CARDS", len(s.FailingCards)) {
		for _, c := range s.FailingCards {
			fmt.Fprintf(tw, "  %s\tGPU %d\t%s\tserial %s\t%s\n", c.Host, c.Index, c.UUID, orDash(c.Serial), c.PCIBusID)
			for _, f := range c.Findings {
				if f.Verdict == validate.Fail {
					fmt.Fprintf(tw, "      %s: %s\n", f.ID, f.Message) // no tab: not a column
				}
			}
		}
	}
	if section("CARDS GONE SINCE THE BASELINE", len(s.GoneCards)) {
		for _, c := range s.GoneCards {
			fmt.Fprintf(tw, "  %s\tGPU %d\t%s\tserial %s\tno longer seen on its box\n", c.Host, c.Index, c.UUID, orDash(c.Serial))
		}
	}
	if section("BOXES GONE SINCE THE BASELINE (no report now)", len(s.GoneBoxes)) {
		fmt.Fprintf(tw, "  %s\n", strings.Join(s.GoneBoxes, " "))
	}
	if section("FLEET OUTLIERS (below the fleet median of their kind)", len(s.Outliers)) {
		for _, o := range s.Outliers {
			fmt.Fprintf(tw, "  %s\tGPU %d\t%s\t%s\t%s\t%s, %.1f%% below the median %s of %d\n", o.Host, o.Index, o.UUID, o.Kind, o.Gate,
				validate.FormatValue(o.Value, o.Unit), 100*o.Below, validate.FormatValue(o.Median, o.Unit), o.Peers)
		}
	}
	if section("SLOWER THAN THE BASELINE "+s.Baseline, len(s.Slower)) {
		for _, r := range s.Slower {
			fmt.Fprintf(tw, "  %s\tGPU %d\t%s\t%s\t%s\t%s -> %s (%+.1f%%)\n", r.Host, r.Index, r.UUID, r.Kind, r.Gate,
				validate.FormatValue(r.Before, r.Unit), validate.FormatValue(r.Now, r.Unit), 100*r.Change)
		}
	}
	if len(s.Distributions) > 0 {
		fmt.Fprintf(tw, "\nGATES\tKIND\tCARDS\tMIN\tMEDIAN\tMAX\tTHRESHOLD\n")
		for _, d := range s.Distributions {
			threshold := "-"
			if d.RequiredFraction > 0 {
				threshold = fmt.Sprintf("%.0f%% of reference", 100*d.RequiredFraction)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.Gate, d.Kind, d.Count, validate.FormatValue(d.Min, d.Unit),
				validate.FormatValue(d.Median, d.Unit), validate.FormatValue(d.Max, d.Unit), threshold)
		}
	}
	tw.Flush()
	for _, d := range s.Duplicates {
		fmt.Fprintf(w, "older report passed over: %s\n", d)
	}
	if len(plots) > 0 {
		fmt.Fprintf(w, "\nplots: %s\n", strings.Join(plots, " "))
	}
	fmt.Fprintf(w, "\nfleet verdict: %s\n", s.Verdict)
}
