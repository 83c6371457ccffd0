package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/plots"
)

func predictCommand() *cli.Command {
	return &cli.Command{
		Name:  "predict",
		Usage: "the roofline bound on decode tokens/s for a model on a GPU, over batch and context (no GPU needed)",
		UsageText: "decodebench predict (--model NAME | --model-config FILE) [--gpu NAME|auto] [--batch LIST] [--context LIST] [--tp N] " +
			"[--weight-dtype LIST [--group-size G]] [--kv-dtype bf16|fp16|fp8] [--out DIR] [--json]\n\n" +
			"   LIST syntax: " + axes.Syntax,
		Description: "For each batch B and context S the step time is bounded below by\n" +
			"  max( (weight bytes read at B + B * KV bytes per sequence(S)) / memory bandwidth,\n" +
			"       FLOPs of the step / dense bf16 tensor rate )\n" +
			"from the GPU's datasheet row. per-request tokens/s = 1 / step time; per-server = B / step time.\n" +
			"--weight-dtype takes a list (bf16,fp8,int4): every row says its format, and the charts draw one\n" +
			"curve per format, so that the bytes per weight read off one picture.",
		Flags: append(modelFormatsFlags(),
			gpuFlag("auto", "a GPU spec row (h200, h100-sxm, a100-80gb, ...), or auto: the first GPU NVML sees, else h200"),
			batchFlag(defaultBatches, "batch sizes, e.g. 1,2,4 or 1-256*2 (see LIST syntax)"),
			contextFlag(defaultContexts, "context lengths in tokens (k = 1024), e.g. 1k,8k,32k or 1k-128k*2 (the default is sweep's)"),
			reserveFlag(),
			outFlag("write predict.csv, predict.json and the plots (PNG and SVG) into this directory"),
			formatFlag(format.All...),
			jsonAlias(format.JSON)),
		Action: predictAction,
	}
}

// predictRow is one (batch, context) bound; its JSON names are the documented output.
type predictRow struct {
	Model                  string  `json:"model"`
	GPU                    string  `json:"gpu"`
	TP                     int     `json:"tp"`
	WeightFormat           string  `json:"weight_format"` // --weight-dtype's name: "bf16", "int4 g128"
	Batch                  int     `json:"batch"`
	Context                int     `json:"context"`
	WeightBytes            float64 `json:"weight_bytes"`
	KVBytes                float64 `json:"kv_bytes"`
	FLOPs                  float64 `json:"flops"`
	MemorySeconds          float64 `json:"memory_seconds"`
	ComputeSeconds         float64 `json:"compute_seconds"`
	StepSeconds            float64 `json:"step_seconds"`
	PerRequestTokensPerSec float64 `json:"per_request_tokens_per_s"`
	PerServerTokensPerSec  float64 `json:"per_server_tokens_per_s"`
	Bound                  string  `json:"bound"`
	FitsInMemory           bool    `json:"fits_in_memory"`
}

func predictAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("predict takes no arguments (got %q)", c.Args().First())
	}
	shapes, err := resolveModels(c)
	if err != nil {
		return err
	}
	batches, contexts, err := parseBatchContextLists(c)
	if err != nil {
		return err
	}
	if err := checkPoints(axes.MaxPoints, "rows", axes.Axis{Name: "models (--weight-dtype)", Values: len(shapes)}, axes.Axis{Name: "--batch", Values: len(batches)}, axes.Axis{Name: "--context", Values: len(contexts)}); err != nil {
		return err
	}
	reserve, err := parseReserve(c)
	if err != nil {
		return err
	}
	if dir := c.String("out"); dir != "" {
		if err := checkOutDir(dir); err != nil {
			return err
		}
	}
	name, err := parseFormat(c)
	if err != nil {
		return err
	}
	gpu, note, err := resolveGPU(c.String("gpu"))
	if err != nil {
		return err
	}
	ceiling := roofline.DatasheetCeiling(gpu)
	var rows []predictRow
	for _, shape := range shapes {
		rows = append(rows, predictRows(shape, gpu, ceiling, batches, contexts, reserve)...)
	}

	// The table format is for people: everything on stdout. The others put the rows on
	// stdout and the same prose on stderr.
	prose := c.App.ErrWriter
	if name == format.Table {
		prose = c.App.Writer
	} else {
		table, err := format.FromRecords(rows)
		if err != nil {
			return failure("encoding the rows: %v", err)
		}
		if err := format.Write(c.App.Writer, name, table); err != nil {
			return err
		}
	}
	if err := printPredictScreen(c.App.Writer, prose, name == format.Table, shapes, gpu, ceiling, rows, contexts, reserve); err != nil {
		return err
	}
	if dir := c.String("out"); dir != "" {
		paths, err := writePredictOutputs(dir, shapes, gpu, ceiling, rows, batches, contexts)
		if err != nil {
			return failure("writing %s: %v", dir, err)
		}
		fmt.Fprintln(prose)
		printLines(prose, predictFiles(dir, paths)...)
	}
	fmt.Fprintln(prose)
	printLines(prose, predictHeadline(shapes, rows, gpu)...)
	if note != "" {
		// Last, where it stays on screen: why this card's row was chosen.
		printLines(c.App.ErrWriter, "decodebench: "+note)
	}
	return nil
}

// resolveGPU turns --gpu into a spec row. "auto" asks NVML; with no GPU it falls back to the
// H200 row and says so.
func resolveGPU(name string) (roofline.GPU, string, error) {
	if name != "auto" {
		g, err := roofline.LookupGPU(name)
		if err != nil {
			return g, "", usageError("--gpu: %v", err)
		}
		return g, "", nil
	}
	fallback, err := roofline.LookupGPU("h200")
	if err != nil {
		return fallback, "", err
	}
	sys, err := gpuinfo.Open()
	if err != nil {
		return fallback, fmt.Sprintf("no GPU detected (%v); predicting for an %s", err, fallback.Name), nil
	}
	if len(sys.Usable()) == 0 {
		return fallback, "NVML sees no GPU; predicting for an " + fallback.Name, nil
	}
	d := sys.Usable()[0]
	if g, ok := roofline.MatchNVML(d.Name, d.MemoryTotalBytes); ok {
		return g, fmt.Sprintf("GPU 0 is %s: using the %s spec row", d.Name, g.Key), nil
	}
	return fallback, "", usageError("GPU 0 (%s) has no spec row; pass --gpu with one of the rows `decodebench predict --gpu list` would show: %v", d.Name, gpuKeys())
}

func gpuKeys() []string {
	var keys []string
	for _, g := range roofline.GPUs() {
		keys = append(keys, g.Key)
	}
	return keys
}

func predictRows(s model.Shape, gpu roofline.GPU, ceiling roofline.Ceiling, batches, contexts []int, reserve float64) []predictRow {
	var rows []predictRow
	for _, ctx := range contexts {
		maxFit := roofline.MaxBatchThatFits(s, gpu.MemoryBytes, ctx, reserve)
		for _, b := range batches {
			bd := roofline.StepBound(s, ceiling, b, ctx)
			rows = append(rows, predictRow{
				Model: s.Name, GPU: gpu.Key, TP: max(s.TP, 1), WeightFormat: sweep.WeightDTypeLabel(s), Batch: b, Context: ctx,
				WeightBytes: bd.WeightBytes, KVBytes: bd.KVBytes, FLOPs: bd.FLOPs,
				MemorySeconds: bd.MemorySeconds, ComputeSeconds: bd.ComputeSeconds, StepSeconds: bd.StepSeconds,
				PerRequestTokensPerSec: bd.PerRequestTokensPerSec, PerServerTokensPerSec: bd.PerServerTokensPerSec,
				Bound: bd.Limit, FitsInMemory: b <= maxFit,
			})
		}
	}
	return rows
}

// rowsOf are the rows of one weight format of s.
func rowsOf(rows []predictRow, s model.Shape) []predictRow {
	var of []predictRow
	for _, r := range rows {
		if r.WeightFormat == sweep.WeightDTypeLabel(s) {
			of = append(of, r)
		}
	}
	return of
}

func writePredictOutputs(dir string, shapes []model.Shape, gpu roofline.GPU, ceiling roofline.Ceiling, rows []predictRow, batches, contexts []int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	jsonPath := filepath.Join(dir, "predict.json")
	var data bytes.Buffer
	if err := format.WriteJSON(&data, rows); err != nil {
		return nil, err
	}
	if err := os.WriteFile(jsonPath, data.Bytes(), 0o644); err != nil {
		return nil, err
	}
	paths = append(paths, jsonPath)
	csvPath := filepath.Join(dir, "predict.csv")
	if err := writePredictCSV(csvPath, rows); err != nil {
		return nil, err
	}
	paths = append(paths, csvPath)
	plotPaths, err := predictPlots(dir, shapes, gpu, ceiling, rows, batches, contexts)
	if err != nil {
		return nil, err
	}
	return append(paths, plotPaths...), nil
}

// writePredictCSV writes the rows as predict.csv, every number with every digit.
func writePredictCSV(path string, rows []predictRow) (err error) {
	table, err := format.FromRecords(rows)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return format.Write(f, format.CSV, table)
}

// predictPlots draws tokens/s against batch, the per-request vs per-server trade-off and the
// roofline. One weight format: a curve per context, and every kernel of one step on the
// roofline; several: a curve per format (and context), and each format's kernels as one group
// of points on the roofline, so that the bytes per weight read off one picture.
func predictPlots(dir string, shapes []model.Shape, gpu roofline.GPU, ceiling roofline.Ceiling, rows []predictRow, batches, contexts []int) ([]string, error) {
	s := shapes[0]
	formats := len(shapes) > 1
	weights := weightFormatText(s)
	if formats {
		var names []string
		for _, sh := range shapes {
			names = append(names, sweep.WeightDTypeLabel(sh))
		}
		weights = strings.Join(names, " vs ")
	}
	chart := plots.Chart{
		Title: fmt.Sprintf("%s on %s: roofline bound", s.Name, gpu.Name),
		Subtitle: fmt.Sprintf("datasheet %.0f GB/s, %.0f TFLOP/s bf16 · weights %s · tp %d · prediction, not a measurement",
			ceiling.BandwidthBytesPerSec/1e9, ceiling.FLOPsPerSec/1e12, weights, max(s.TP, 1)),
	}
	anyFits := false
	for _, r := range rows {
		anyFits = anyFits || r.FitsInMemory
	}
	if !anyFits {
		chart.Subtitle += " · does NOT fit in one GPU's memory at any point shown: try --tp"
	}
	var perServer, perRequest, tradeoff []plots.Series
	for _, sh := range shapes {
		format := sweep.WeightDTypeLabel(sh)
		for _, ctx := range contexts {
			label := "context " + contextLabel(ctx)
			switch {
			case formats && len(contexts) == 1:
				label = format
			case formats:
				label = format + ", " + label
			}
			srv := plots.Series{Label: label, Style: plots.Bound}
			req := plots.Series{Label: label, Style: plots.Bound}
			noFit := plots.Series{Label: "does not fit in memory", Group: label, Style: plots.NoFit}
			for _, r := range rows {
				if r.WeightFormat != format || r.Context != ctx {
					continue
				}
				if anyFits && !r.FitsInMemory {
					// A batch whose KV cache does not fit has no rate on the chart: a cross says so.
					noFit.X, noFit.Y = append(noFit.X, float64(r.Batch)), append(noFit.Y, 0)
					continue
				}
				srv.X, srv.Y = append(srv.X, float64(r.Batch)), append(srv.Y, r.PerServerTokensPerSec)
				req.X, req.Y = append(req.X, float64(r.Batch)), append(req.Y, r.PerRequestTokensPerSec)
			}
			if len(srv.X) == 0 {
				continue // no batch fits at this context
			}
			perServer, perRequest = append(perServer, srv), append(perRequest, req)
			if len(noFit.X) > 0 {
				perServer, perRequest = append(perServer, noFit), append(perRequest, noFit)
			}
			// Markers (the Measured style) so that each point can carry its batch size; the
			// subtitle says the whole chart is a prediction.
			tr := plots.Series{Label: label, Style: plots.Measured, X: req.Y, Y: srv.Y}
			for _, b := range srv.X {
				tr.PointLabels = append(tr.PointLabels, "B="+strconv.Itoa(int(b)))
			}
			tradeoff = append(tradeoff, tr)
		}
	}
	var paths []string
	p, err := plots.TokensVsBatch(chart, perServer, perRequest, filepath.Join(dir, "tokens_vs_batch"))
	if err != nil {
		return nil, err
	}
	paths = append(paths, p...)
	if p, err = plots.Tradeoff(chart, tradeoff, filepath.Join(dir, "tradeoff")); err != nil {
		return nil, err
	}
	paths = append(paths, p...)

	// The classic roofline: each kernel of one step at the smallest and largest batch, placed
	// at its arithmetic intensity on the datasheet ceiling it is bound by.
	ctx := contexts[len(contexts)/2]
	pointsOf := func(sh model.Shape, prefix string) []plots.RooflinePoint {
		var points []plots.RooflinePoint
		for _, b := range []int{batches[0], batches[len(batches)-1]} {
			for _, k := range sh.Kernels(b, ctx) {
				if k.Bytes <= 0 || k.FLOPs <= 0 {
					continue
				}
				intensity := k.FLOPs / k.Bytes
				points = append(points, plots.RooflinePoint{
					Label:       fmt.Sprintf("%s%s B=%d", prefix, k.Name, b),
					Batch:       b,
					Intensity:   intensity,
					FLOPsPerSec: min(intensity*ceiling.BandwidthBytesPerSec, ceiling.FLOPsPerSec),
				})
			}
		}
		return points
	}
	ceilings := []plots.RooflineCeiling{{Label: "datasheet", BandwidthBytesPerSec: ceiling.BandwidthBytesPerSec, FLOPsPerSec: ceiling.FLOPsPerSec}}
	rchart := chart
	rchart.Title = fmt.Sprintf("%s kernels on the %s roofline (context %s)", s.Name, gpu.Name, contextLabel(ctx))
	if !formats {
		p, err = plots.Roofline(rchart, ceilings, pointsOf(s, ""), filepath.Join(dir, "roofline"))
	} else {
		// One colour per format: each format's kernels at both batches (the marker's size says
		// which), so that fewer bytes per weight move the same kernels right along the slope.
		var groups []plots.RooflineGroup
		for _, sh := range shapes {
			format := sweep.WeightDTypeLabel(sh)
			groups = append(groups, plots.RooflineGroup{Label: format + " weights", Points: pointsOf(sh, format+" ")})
		}
		p, err = plots.RooflineGroups(rchart, ceilings, groups, filepath.Join(dir, "roofline"))
	}
	if err != nil {
		return nil, err
	}
	return append(paths, p...), nil
}

func contextLabel(ctx int) string {
	if ctx >= 1024 && ctx%1024 == 0 {
		return strconv.Itoa(ctx/1024) + "k"
	}
	return strconv.Itoa(ctx)
}
