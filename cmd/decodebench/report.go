package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/sweep/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "(re)write results.csv, the charts, report.md and the self-contained report.html of a sweep's run directory",
		UsageText: "decodebench report DIR",
		Description: "report.html is one file with the card's identity, the method, the tables and the charts inlined:\n" +
			"it opens offline in any browser. An emulated run says so at the top in red: its times are not a speed.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			dir, err := runDirArg(c, "report")
			if err != nil {
				return err
			}
			w, err := report.Write(dir)
			for _, n := range w.Notes {
				fmt.Fprintln(c.App.ErrWriter, "decodebench: note: "+n)
			}
			if err != nil {
				return failure("%v", err)
			}
			for _, f := range w.Files {
				fmt.Fprintln(c.App.Writer, f)
			}
			return nil
		},
	}
}
