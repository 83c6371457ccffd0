package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/report"
	"github.com/decodebench/decodebench/bench/units"
)

// exitCompareWrite is compare's exit status when it judged the runs but could not write the
// comparison (a full disk, an --out it may not write): distinct from SLOWER's 1, so that a CI
// gate does not take a broken disk for a regression, nor a regression for a broken disk.
const exitCompareWrite = 3

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "set two sweeps side by side (two cards, two drivers, two builds): ratios with confidence intervals and a verdict that can gate",
		UsageText: "decodebench compare [--threshold 3%] [--confidence 95%] [--format table|md|json] [--out DIR] DIR_A DIR_B",
		Description: "Matches the configurations measured ok in both runs (model, weight and KV formats, batch, context) and gives, per configuration\n" +
			"and per kernel measurement, B / A of tokens/s (above 1: B is faster) with a bootstrap confidence interval\n" +
			"from the kept samples, and a verdict against --threshold: SLOWER (the whole interval below 1 - threshold),\n" +
			"FASTER (all above 1 + threshold), SAME (all within), UNSURE (the interval holds an edge, or no samples).\n" +
			"Exit status: 0 nothing SLOWER, 1 something SLOWER (for CI and fleet qualification), 2 bad input,\n" +
			"3 the comparison could not be written (stdout or --out).\n" +
			"Writes compare.html, compare.md, compare.csv and charts into --out.",
		Flags: []cli.Flag{
			outFlag("directory for the comparison (default: compare-<A>-vs-<B> beside DIR_A)", "o"),
			&cli.StringFlag{Name: "threshold", Value: "3%", Usage: "the change that counts: a fraction or a percentage in (0, 1), e.g. 0.03 or 3%"},
			&cli.StringFlag{Name: "confidence", Value: "95%", Usage: "confidence of the intervals: a fraction or a percentage in [0.5, 1), e.g. 0.95 or 95%"},
			formatFlag(report.CompareFormats...),
		},
		OnUsageError: onUsageError,
		Action:       compareAction,
	}
}

// parseFraction reads a flag given as a fraction (0.03) or a percentage (3%).
func parseFraction(flag, s string) (float64, error) {
	v, err := units.ParseFraction(s)
	if err != nil {
		return 0, usageError("--%s %s: %v", flag, s, err)
	}
	return v, nil
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
	gate := report.DefaultGate
	var err error
	if gate.Threshold, err = parseFraction("threshold", c.String("threshold")); err != nil {
		return err
	}
	if !(gate.Threshold > 0 && gate.Threshold < 1) {
		return usageError("--threshold %s: must be more than 0 and less than 100%%, such as 3%% or 0.03", c.String("threshold"))
	}
	if gate.Confidence, err = parseFraction("confidence", c.String("confidence")); err != nil {
		return err
	}
	if !(gate.Confidence >= 0.5 && gate.Confidence < 1) {
		return usageError("--confidence %s: must be at least 50%% and less than 100%%, such as 95%% or 0.95", c.String("confidence"))
	}
	format, err := parseFormat(c)
	if err != nil {
		return err
	}
	a, b := c.Args().Get(0), c.Args().Get(1)
	for _, dir := range []string{a, b} {
		if !isRunDir(dir) {
			return usageError("%s is not a run directory of decodebench sweep (no run.json)", dir)
		}
	}
	out := c.String("out")
	if err := checkOutDir(out); out != "" && err != nil {
		return err
	}
	cmp, err := report.CompareWith(a, b, gate)
	if err != nil {
		return usageError("%v", err)
	}
	if out == "" {
		out = filepath.Join(filepath.Dir(filepath.Clean(a)),
			fmt.Sprintf("compare-%s-vs-%s", filepath.Base(filepath.Clean(a)), filepath.Base(filepath.Clean(b))))
	}
	if err := report.WriteCompareText(c.App.Writer, cmp, format); err != nil {
		return cli.Exit(fmt.Sprintf("writing the comparison: %v", err), exitCompareWrite)
	}
	written, err := report.WriteComparison(cmp, out)
	if err != nil {
		return cli.Exit(fmt.Sprintf("writing %s: %v", out, err), exitCompareWrite)
	}
	where := c.App.Writer
	if format == report.FormatJSON {
		where = c.App.ErrWriter // stdout holds the JSON alone
	}
	fmt.Fprintf(where, "comparison: %s\n", written.Files[0])
	if cmp.Regressed() {
		cv, kv := cmp.ConfigVerdicts(), cmp.KernelVerdicts()
		return failure("SLOWER: B is slower than A by more than %s in %d configuration(s) and %d kernel measurement(s)",
			c.String("threshold"), cv[report.VerdictSlower], kv[report.VerdictSlower])
	}
	return nil
}

// isRunDir reports whether dir has the run.json of a sweep.
func isRunDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, sweep.InfoFile))
	return err == nil && !fi.IsDir()
}
