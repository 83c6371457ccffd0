package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/timing"
)

// TestReportShowsWholeSteps: a run with steps.jsonl gets the end-to-end table, and its
// charts the end-to-end curves (the legend names them) and roofline points.
func TestReportShowsWholeSteps(t *testing.T) {
	dir := t.TempDir()
	run := h200Run(t)
	run.batches, run.contexts = []int{1, 16}, []int{1024, 4096}
	run.write(t, dir)
	p, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := sweep.Resume(dir)
	if err != nil {
		t.Fatal(err)
	}
	gpu, _ := roofline.LookupGPU("h200")
	ceil := step.Ceilings{Datasheet: roofline.DatasheetCeiling(gpu),
		Measured: roofline.Ceiling{Name: roofline.CeilingMeasured, BandwidthBytesPerSec: run.bandwidth, FLOPsPerSec: run.flops}}
	for _, rec := range p.Records {
		cfg := step.Config{Model: run.model, Batch: rec.Batch, Context: rec.Context, Steps: 32}
		res := step.Result{Status: measure.StatusOK, Launches: 291}
		for _, m := range step.Modes {
			sec := rec.StepSeconds * 1.08
			if m == step.Eager {
				sec *= 1.25
			}
			res.Modes = append(res.Modes, step.Timed{Mode: m, Status: measure.StatusOK, Stats: timing.Summarize([]float64{sec, sec * 1.001})})
		}
		if err := d.AppendStep(step.NewRecord(cfg, rec.Key, rec.ModelKey, res, step.ComposedTime(rec.Status, rec.Reason, rec.StepSeconds), ceil)); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	for _, want := range []string{"Whole steps measured end to end", "launch gap = eager - graph", "| 16 | 4k | 32 | ok |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, chart := range []string{"tokens_vs_batch.svg", "tradeoff.svg"} {
		svg, _ := os.ReadFile(filepath.Join(dir, PlotsDir, chart))
		if !strings.Contains(string(svg), "whole step, measured") {
			t.Errorf("%s has no end-to-end curve in its legend", chart)
		}
	}
	f, err := os.Open(filepath.Join(dir, StepsCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 1+4 || len(rows[0]) != len(stepCSVColumns) || rows[0][12] != "graph_step_seconds" {
		t.Errorf("steps.csv: %d rows (%v), header %v", len(rows), err, rows[0])
	}
	for _, row := range rows[1:] {
		if row[9] != measure.StatusOK || row[12] == "" || row[18] == "" || row[24] == "" {
			t.Errorf("steps.csv row %v: a time is missing", row)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, PlotsDir, "roofline.svg"))
	if !strings.Contains(string(svg), "whole step (end to end)") {
		t.Errorf("roofline.svg has no whole-step points")
	}
}
