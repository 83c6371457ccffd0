package report

import (
	"encoding/csv"
	"fmt"
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
		res := step.Result{Status: measure.StatusOK, Launches: 291, Verification: step.Verification{Verified: true, Modes: step.Modes,
			Layers: 1, ModelLayers: run.model.Layers, Batch: rec.Batch, Sequences: min(rec.Batch, 2), Context: rec.Context, Steps: 2}}
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
	for _, want := range []string{"Whole steps measured end to end", "launch gap = eager - graph", "| 16 | 4k | 32 | ok |",
		fmt.Sprintf("yes: 1/%d layers, 2/16 seq, S=4096, 2 steps |", run.model.Layers), "verified: before any sample"} {
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
		if v := row[len(row)-2:]; v[0] != "true" || !strings.HasPrefix(v[1], "verified: 1 of") {
			t.Errorf("steps.csv row %v does not say verified and how", row)
		}
		if row[9] != measure.StatusOK || row[12] == "" || row[18] == "" || row[24] == "" {
			t.Errorf("steps.csv row %v: a time is missing", row)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, PlotsDir, "roofline.svg"))
	if !strings.Contains(string(svg), "whole step (end to end)") {
		t.Errorf("roofline.svg has no whole-step points")
	}
}

// TestStepTableSaysWhyNotVerified: a step that failed its check shows NO with its first bad
// logit, one never checked a dash.
func TestStepTableSaysWhyNotVerified(t *testing.T) {
	bad := step.Record{Batch: 2, Context: 64, Steps: 2, Status: measure.StatusFailed,
		Verification: step.Verification{Modes: []step.Mode{step.Graph}, Layers: 1, ModelLayers: 2, Batch: 2, Sequences: 2, Context: 64, Steps: 2,
			FirstBad: &step.BadLogit{Mode: step.Graph, Step: 0, Sequence: 1, Index: 17, Got: 0.5, Want: 0.625, Bound: 0.03}}}
	skipped := step.Record{Batch: 4, Context: 64, Steps: 2, Status: measure.StatusSkipped, Verification: step.Verification{Reason: "not run: does not fit"}}
	tab := stepTable(modelResults{steps: []step.Record{bad, skipped}})
	last := len(tab.Header) - 1
	if tab.Header[last] != "verified" {
		t.Fatalf("header %v", tab.Header)
	}
	if got, want := tab.Rows[0][last], "NO: graph step 0 sequence 1 logit 17: got 0.5, want 0.625 (bound 0.03)"; got != want {
		t.Errorf("failed row says %q, want %q", got, want)
	}
	if got := tab.Rows[1][last]; got != "-" {
		t.Errorf("skipped row says %q, want -", got)
	}
}
