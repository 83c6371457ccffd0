package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/sweep/report"
)

func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "(re)draw the charts of a sweep's run directory into DIR/plots (PNG and SVG)",
		UsageText: "decodebench plot DIR",
		Description: "Draws, from run.json and results.jsonl: per-server and per-request tokens/s against batch with\n" +
			"the roofline bound beside them, the per-request against per-server trade-off (one curve per\n" +
			"context), tokens/s against context, the efficiency map of batch by context (measured and datasheet\n" +
			"ceilings) and the roofline with every measured kernel. Failed configurations are never drawn.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			dir, err := runDirArg(c, "plot")
			if err != nil {
				return err
			}
			figs, notes, err := report.Plots(dir)
			if err != nil {
				return failure("%v", err)
			}
			for _, n := range notes {
				fmt.Fprintln(c.App.ErrWriter, "decodebench: note: "+n)
			}
			for _, f := range figs {
				fmt.Fprintf(c.App.Writer, "%s.png\n%s.svg\n", f.Base, f.Base)
			}
			return nil
		},
	}
}

// runDirArg is the one run directory a command takes.
func runDirArg(c *cli.Context, command string) (string, error) {
	if c.NArg() != 1 {
		return "", usageError("%s takes one run directory (got %d arguments): decodebench %s DIR", command, c.NArg(), command)
	}
	dir := c.Args().First()
	if !isRunDir(dir) {
		return "", usageError("%s is not a run directory of decodebench sweep (no run.json)", dir)
	}
	return dir, nil
}
