package report

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/plots"
)

// WriteComparison writes compare.csv, the overlaid charts, compare.md and compare.html into
// out.
func WriteComparison(c Comparison, out string) (Written, error) {
	var w Written
	if err := os.MkdirAll(out, 0o755); err != nil {
		return w, err
	}
	csvPath := filepath.Join(out, CompareCSVFile)
	ratioFig, ratioNote, err := ratioChart(c, out)
	if err != nil {
		return w, err
	}
	figs, notes, err := compareCharts(c, out)
	if err != nil {
		return w, err
	}
	var ratioFigs []plots.Figure
	if ratioNote == "" {
		ratioFigs = append(ratioFigs, ratioFig)
	} else {
		notes = append(notes, ratioNote)
	}
	w.Notes = append(notes, c.Notes...)
	if err := writeCompareCSV(c, csvPath); err != nil {
		return w, err
	}
	doc := compareDocument(c, ratioFigs, figs, w.Notes)
	htmlPath, mdPath := filepath.Join(out, CompareHTMLFile), filepath.Join(out, CompareMarkdownFile)
	if err := plots.WriteHTML(htmlPath, doc); err != nil {
		return w, err
	}
	if err := plots.WriteMarkdown(mdPath, doc); err != nil {
		return w, err
	}
	w.Files = append(w.Files, htmlPath, mdPath, csvPath)
	for _, f := range append(ratioFigs, figs...) {
		w.Files = append(w.Files, f.Base+".png", f.Base+".svg")
	}
	return w, nil
}

// sharedContexts are the context lengths of the pairs, at most maxCompareContexts of them,
// spread over the range.
func (c Comparison) sharedContexts() []int {
	var all []int
	for _, p := range c.Pairs {
		if !slices.Contains(all, p.Context) {
			all = append(all, p.Context)
		}
	}
	slices.Sort(all)
	if len(all) <= maxCompareContexts {
		return all
	}
	var pick []int
	for i := range maxCompareContexts {
		v := all[i*(len(all)-1)/(maxCompareContexts-1)]
		if !slices.Contains(pick, v) {
			pick = append(pick, v)
		}
	}
	return pick
}

// ratioChart draws every pair's ratio with its interval, one series per model and context.
func ratioChart(c Comparison, out string) (plots.Figure, string, error) {
	fig := plots.Figure{Title: "B / A per configuration, with its interval",
		Base: filepath.Join(out, PlotsDir, "compare_ratios"),
		Caption: fmt.Sprintf("Each marker is B's per-server tokens/s over A's at one batch; its whisker the %s bootstrap interval; "+
			"the grey band ±%s, within which a configuration is the SAME speed.", percentText(c.Gate.Confidence), percentText(c.Gate.Threshold))}
	var series []plots.RatioSeries
	index := map[string]int{}
	models := map[string]bool{}
	for _, p := range c.Pairs {
		models[p.Model] = true
	}
	for _, p := range c.Pairs {
		label := "context " + contextLabel(p.Context)
		if len(models) > 1 {
			label = p.Model + ", " + label
		}
		i, ok := index[label]
		if !ok {
			i = len(series)
			index[label] = i
			series = append(series, plots.RatioSeries{Label: label})
		}
		s := &series[i]
		lo, hi := math.NaN(), math.NaN()
		if p.HasInterval {
			lo, hi = p.Interval.Lo, p.Interval.Hi
		}
		s.X, s.Ratio = append(s.X, float64(p.Batch)), append(s.Ratio, p.ServerRatio())
		s.Lo, s.Hi = append(s.Lo, lo), append(s.Hi, hi)
	}
	chart := plots.Chart{Title: fmt.Sprintf("%s vs %s", c.LabelA, c.LabelB),
		Subtitle: fmt.Sprintf("configurations: %s · %s", countsText(c.ConfigVerdicts()), compareSubtitle(c))}
	if _, err := plots.RatioVsBatch(chart, series, c.Gate.Threshold, fig.Base); err != nil {
		if errors.Is(err, plots.ErrNothingToDraw) {
			return fig, fig.Title + ": nothing to draw", nil
		}
		return fig, "", err
	}
	return fig, "", nil
}

func compareCharts(c Comparison, out string) ([]plots.Figure, []string, error) {
	var figs []plots.Figure
	var notes []string
	runs := []struct {
		label string
		info  sweep.RunInfo
		pick  func(Pair) sweep.Record
	}{
		{c.LabelA, c.InfoA, func(p Pair) sweep.Record { return p.A }},
		{c.LabelB, c.InfoB, func(p Pair) sweep.Record { return p.B }},
	}
	for _, ctx := range c.sharedContexts() {
		var server, request []plots.Series
		for _, run := range runs {
			srv := plots.Series{Label: run.label, Group: run.label}
			req := plots.Series{Label: run.label, Group: run.label}
			bs := plots.Series{Label: "roofline bound of each (measured ceiling)", Group: run.label, Style: plots.Bound}
			br := bs
			ceiling, hasBound := boundCeiling(run.info)
			paired := map[int]Pair{}
			for _, p := range c.Pairs {
				if p.Context == ctx {
					paired[p.Batch] = p
				}
			}
			for _, batch := range c.batches[ctx] {
				p, ok := paired[batch]
				if !ok {
					srv.X, srv.Y = append(srv.X, float64(batch)), append(srv.Y, math.NaN())
					req.X, req.Y = append(req.X, float64(batch)), append(req.Y, math.NaN())
					continue
				}
				r := run.pick(p)
				srv.X, srv.Y = append(srv.X, float64(p.Batch)), append(srv.Y, r.PerServerTokensPerSec)
				req.X, req.Y = append(req.X, float64(p.Batch)), append(req.Y, r.PerRequestTokensPerSec)
				if shape, ok := shapeOf(run.info, r.ModelKey); ok && hasBound {
					bd := roofline.StepBound(shape, ceiling, p.Batch, ctx)
					bs.X, bs.Y = append(bs.X, float64(p.Batch)), append(bs.Y, bd.PerServerTokensPerSec)
					br.X, br.Y = append(br.X, float64(p.Batch)), append(br.Y, bd.PerRequestTokensPerSec)
				}
			}
			server, request = append(server, srv), append(request, req)
			if len(bs.X) > 0 {
				server, request = append(server, bs), append(request, br)
			}
		}
		fig := plots.Figure{Title: "Tokens/s against batch size at context " + contextLabel(ctx),
			Base:    filepath.Join(out, PlotsDir, "compare_tokens_vs_batch_ctx"+contextLabel(ctx)),
			Caption: "Both runs overlaid: per-server (left) and per-request (right) tokens/s; dashed, each run's roofline bound on its own measured ceiling."}
		chart := plots.Chart{Title: fmt.Sprintf("%s vs %s at context %s", c.LabelA, c.LabelB, contextLabel(ctx)), Subtitle: compareSubtitle(c)}
		if _, err := plots.TokensVsBatch(chart, server, request, fig.Base); err != nil {
			if errors.Is(err, plots.ErrNothingToDraw) {
				notes = append(notes, fig.Title+": nothing to draw")
				continue
			}
			return nil, nil, err
		}
		figs = append(figs, fig)
	}
	return figs, notes, nil
}

func shapeOf(info sweep.RunInfo, modelKey string) (m model.Shape, ok bool) {
	for _, s := range info.Axes.Models {
		if sweep.ModelKey(s) == modelKey {
			return s, true
		}
	}
	return m, false
}

func compareSubtitle(c Comparison) string {
	s := fmt.Sprintf("%d configurations in both runs · B/A per-server tokens/s: geometric mean ×%.3f", len(c.Pairs), c.GeoMeanRatio())
	if c.InfoA.Backend.Emulated || c.InfoB.Backend.Emulated {
		s += " · EMULATED: times are not a speed"
	}
	return s
}

func compareDocument(c Comparison, ratioFigs, figs []plots.Figure, notes []string) plots.Document {
	doc := plots.Document{
		Title:    fmt.Sprintf("decodebench: %s vs %s", c.LabelA, c.LabelB),
		Subtitle: compareSubtitle(c),
		Footer:   "Written by decodebench compare. Ratios are B / A: above 1, B is faster. Units are decimal (1 GB/s = 1e9 B/s); tokens/s 1k = 1000; context 1k = 1024 tokens.",
	}
	if c.InfoA.Backend.Emulated || c.InfoB.Backend.Emulated {
		doc.Alerts = append(doc.Alerts, plots.Alert{Level: plots.AlertDanger, Title: "AN EMULATED RUN IS IN THIS COMPARISON",
			Text: "Its times come from the CPU emulator and say nothing about a GPU's speed; the ratios below are not a performance comparison."})
	}
	throttled := 0
	for _, p := range c.Pairs {
		if p.A.Throttled || p.B.Throttled {
			throttled++
		}
	}
	if throttled > 0 {
		doc.Alerts = append(doc.Alerts, plots.Alert{Level: plots.AlertWarning, Title: fmt.Sprintf("%d pair(s) include a result taken while a card throttled", throttled),
			Text: "They are marked * in the table."})
	}
	if len(notes) > 0 {
		doc.Alerts = append(doc.Alerts, plots.Alert{Level: plots.AlertInfo, Title: "Notes", Text: strings.Join(notes, "; ") + "."})
	}
	runs := plots.Table{Header: []string{"", "A", "B"}, Rows: [][]string{
		{"run directory", c.DirA, c.DirB},
		{"card", c.InfoA.Card.Identity(), c.InfoB.Card.Identity()},
		{"driver, CUDA", c.InfoA.Card.Driver + ", " + c.InfoA.Card.CUDAVersion, c.InfoB.Card.Driver + ", " + c.InfoB.Card.CUDAVersion},
		{"backend", c.InfoA.Backend.Name, c.InfoB.Backend.Name},
		{"measured GB/s", fmtNumOrDash(c.InfoA.Measured.BandwidthBytesPerSec / 1e9), fmtNumOrDash(c.InfoB.Measured.BandwidthBytesPerSec / 1e9)},
		{"measured TFLOP/s (" + mmaCeilingName + ")", fmtNumOrDash(c.InfoA.Measured.FLOPsPerSec / 1e12), fmtNumOrDash(c.InfoB.Measured.FLOPsPerSec / 1e12)},
		{"decodebench", c.InfoA.Version, c.InfoB.Version},
		{"started", c.InfoA.Started.Format("2006-01-02 15:04 MST"), c.InfoB.Started.Format("2006-01-02 15:04 MST")},
		{"configurations ok in this run only", strconv.Itoa(c.OnlyA), strconv.Itoa(c.OnlyB)},
	}}
	header, rows := c.configRows()
	ratios := plots.Table{Caption: "Configurations measured ok in both runs (* = taken while the card throttled)",
		Header: append(header, "A % roofline", "B % roofline"), Note: strings.Join(c.noIntervalLines(), "; ")}
	for i, p := range c.Pairs {
		ratios.Rows = append(ratios.Rows, append(rows[i], pct(p.A.RooflineFraction), pct(p.B.RooflineFraction)))
		class := ""
		switch {
		case p.Verdict == VerdictSlower:
			class = plots.RowFailed
		case p.A.Throttled || p.B.Throttled:
			class = plots.RowThrottled
		}
		ratios.RowClass = append(ratios.RowClass, class)
	}
	kh, kr := c.kernelRows()
	kernels := plots.Table{Caption: "Kernel measurements of A beside those of B that the same kernel of the same configuration used", Header: kh, Rows: kr}
	for _, k := range c.Kernels {
		class := ""
		if k.Verdict == VerdictSlower {
			class = plots.RowFailed
		}
		kernels.RowClass = append(kernels.RowClass, class)
	}
	verdicts := plots.Section{Heading: "Verdicts",
		Paragraphs: []string{c.Gate.Method()},
		Facts: []plots.Fact{{Name: "configurations", Value: countsText(c.ConfigVerdicts())}, {Name: "kernels", Value: countsText(c.KernelVerdicts())},
			{Name: "geometric mean of B / A", Value: fmt.Sprintf("%.3f", c.GeoMeanRatio())}},
		Figures: ratioFigs, Tables: []plots.Table{ratios}}
	if c.Regressed() {
		doc.Alerts = append(doc.Alerts, plots.Alert{Level: plots.AlertDanger, Title: "B IS SLOWER",
			Text: fmt.Sprintf("Configurations: %s; kernels: %s. compare exits with status 1.", countsText(c.ConfigVerdicts()), countsText(c.KernelVerdicts()))})
	}
	doc.Sections = []plots.Section{
		{Heading: "Runs", Tables: []plots.Table{runs}},
		verdicts,
		{Heading: "Overlaid curves", Figures: figs},
		{Heading: "Kernels", Tables: []plots.Table{kernels}, Collapsed: len(c.Kernels) > 20},
	}
	if len(c.Unpaired) > 0 {
		var lines []string
		for _, u := range c.Unpaired {
			lines = append(lines, unpairedText(u))
		}
		doc.Sections = append(doc.Sections, plots.Section{Heading: "Configurations ok in one run only", Paragraphs: lines})
	}
	return doc
}
