package main

import (
	"fmt"
	"io"

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
