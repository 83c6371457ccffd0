package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/report"
)

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "set two sweeps side by side (two cards, two drivers): tokens/s ratios and overlaid curves",
		UsageText: "decodebench compare [--out DIR] DIR_A DIR_B   (flags go before the directories)",
		Description: "Matches the configurations measured ok in both runs (model, batch, context), prints per-server\n" +
			"tokens/s of each and the ratio B / A (above 1: B is faster), and writes compare.html, compare.md,\n" +
			"compare.csv and overlaid charts into --out.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, EnvVars: []string{"DECODEBENCH_COMPARE_OUT"},
				Usage: "directory for the comparison (default: compare-<A>-vs-<B> beside DIR_A)"},
		},
		OnUsageError: onUsageError,
		Action:       compareAction,
	}
}

func compareAction(c *cli.Context) error {
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return usageError("compare: %q after the directories: flags go first, as in decodebench compare --out DIR DIR_A DIR_B", a)
		}
	}
	if c.NArg() != 2 {
		return usageError("compare takes two run directories (got %d arguments): decodebench compare DIR_A DIR_B", c.NArg())
	}
	a, b := c.Args().Get(0), c.Args().Get(1)
	for _, dir := range []string{a, b} {
		if !isRunDir(dir) {
			return usageError("%s is not a run directory of decodebench sweep (no run.json)", dir)
		}
	}
	cmp, err := report.Compare(a, b)
	if err != nil {
		return failure("%v", err)
	}
	out := c.String("out")
	if err := checkOutDir(out); out != "" && err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(filepath.Dir(filepath.Clean(a)),
			fmt.Sprintf("compare-%s-vs-%s", filepath.Base(filepath.Clean(a)), filepath.Base(filepath.Clean(b))))
	}
	fmt.Fprintf(c.App.Writer, "A: %s (%s)\nB: %s (%s)\n\n", cmp.LabelA, a, cmp.LabelB, b)
	w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "MODEL\tBATCH\tCONTEXT\tA per-server tok/s\tB per-server tok/s\tB / A\t")
	for _, p := range cmp.Pairs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.1f\t%.1f\t%.3f\t\n", p.Model, p.Batch, p.Context, p.A.PerServerTokensPerSec, p.B.PerServerTokensPerSec, p.ServerRatio())
	}
	w.Flush()
	fmt.Fprintf(c.App.Writer, "\n%d configuration(s) in both; geometric mean of B / A: %.3f\n", len(cmp.Pairs), cmp.GeoMeanRatio())
	for _, n := range cmp.Notes {
		fmt.Fprintln(c.App.ErrWriter, "decodebench: note: "+n)
	}
	if cmp.InfoA.Backend.Emulated || cmp.InfoB.Backend.Emulated {
		fmt.Fprintln(c.App.Writer, "EMULATED: a run in this comparison ran on the CPU emulator; its times are not a speed.")
	}
	written, err := report.WriteComparison(cmp, out)
	if err != nil {
		return failure("writing %s: %v", out, err)
	}
	fmt.Fprintf(c.App.Writer, "comparison: %s\n", written.Files[0])
	return nil
}

// isRunDir reports whether dir has the run.json of a sweep.
func isRunDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, sweep.InfoFile))
	return err == nil && !fi.IsDir()
}
