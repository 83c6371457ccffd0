package report

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/decodebench/decodebench/bench/measure"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/plots"
)

// PlotsDir is where a run directory keeps its charts.
const PlotsDir = "plots"

// modelResults are the records of one model of a run.
type modelResults struct {
	shape    model.Shape
	key      string
	records  []sweep.Record // every status, sorted by context then batch
	steps    []step.Record  // the end-to-end records (steps.jsonl), every status
	batches  []int          // of every record
	contexts []int
}

// withSteps files each end-to-end record under its model, and its batch and context on the
// model's axes.
func withSteps(models []modelResults, steps []step.Record) []modelResults {
	index := map[string]int{}
	for i, m := range models {
		index[m.key] = i
	}
	for _, r := range steps {
		i, ok := index[r.ModelKey]
		if !ok {
			i = len(models)
			index[r.ModelKey] = i
			models = append(models, modelResults{shape: model.Shape{Name: r.Model}, key: r.ModelKey})
		}
		m := &models[i]
		m.steps = append(m.steps, r)
		if !slices.Contains(m.batches, r.Batch) {
			m.batches = append(m.batches, r.Batch)
		}
		if !slices.Contains(m.contexts, r.Context) {
			m.contexts = append(m.contexts, r.Context)
		}
	}
	for i := range models {
		slices.Sort(models[i].batches)
		slices.Sort(models[i].contexts)
		slices.SortFunc(models[i].steps, func(a, b step.Record) int {
			return cmp.Or(cmp.Compare(a.Context, b.Context), cmp.Compare(a.Batch, b.Batch))
		})
	}
	return models
}

// stepAt is the end-to-end step at batch and context with a time (graph, else eager).
func (m modelResults) stepAt(batch, context int) (step.StepTime, bool) {
	for _, r := range m.steps {
		if r.Batch == batch && r.Context == context && r.Status == measure.StatusOK {
			t, _, ok := r.Best()
			return t, ok
		}
	}
	return step.StepTime{}, false
}

// endToEndLabel names the measured whole steps in the legends.
const endToEndLabel = "whole step, measured (graph, else eager)"

// byModel groups records by model, in the order of the run's model axis.
func byModel(info sweep.RunInfo, records []sweep.Record) []modelResults {
	var out []modelResults
	index := map[string]int{}
	for _, s := range info.Axes.Models {
		key := sweep.ModelKey(s)
		index[key] = len(out)
		out = append(out, modelResults{shape: s, key: key})
	}
	for _, r := range records {
		i, ok := index[r.ModelKey]
		if !ok { // a record of a model the axes no longer list: keep it under its own name
			i = len(out)
			index[r.ModelKey] = i
			out = append(out, modelResults{shape: model.Shape{Name: r.Model}, key: r.ModelKey})
		}
		out[i].records = append(out[i].records, r)
	}
	for i := range out {
		m := &out[i]
		slices.SortFunc(m.records, func(a, b sweep.Record) int {
			return cmp.Or(cmp.Compare(a.Context, b.Context), cmp.Compare(a.Batch, b.Batch))
		})
		for _, r := range m.records {
			if !slices.Contains(m.batches, r.Batch) {
				m.batches = append(m.batches, r.Batch)
			}
			if !slices.Contains(m.contexts, r.Context) {
				m.contexts = append(m.contexts, r.Context)
			}
		}
		slices.Sort(m.batches)
		slices.Sort(m.contexts)
	}
	return out
}

func (m modelResults) ok() []sweep.Record {
	var out []sweep.Record
	for _, r := range m.records {
		if r.Status == measure.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

func (m modelResults) at(batch, context int) (sweep.Record, bool) {
	for _, r := range m.records {
		if r.Batch == batch && r.Context == context {
			return r, true
		}
	}
	return sweep.Record{}, false
}

// ceilings of a run for the charts and the bound curves.
func runCeilings(info sweep.RunInfo) (measured, datasheet roofline.Ceiling) {
	measured = roofline.Ceiling{Name: roofline.CeilingMeasured, BandwidthBytesPerSec: info.Measured.BandwidthBytesPerSec, FLOPsPerSec: info.Measured.FLOPsPerSec}
	datasheet = roofline.Ceiling{Name: roofline.CeilingDatasheet, BandwidthBytesPerSec: info.Datasheet.BandwidthBytesPerSec, FLOPsPerSec: info.Datasheet.FLOPsPerSec}
	return measured, datasheet
}

// boundCeiling is the ceiling the bound curves are drawn for: the measured one, else the
// datasheet's.
func boundCeiling(info sweep.RunInfo) (roofline.Ceiling, bool) {
	measured, datasheet := runCeilings(info)
	if measured.Validate() == nil {
		return measured, true
	}
	if datasheet.Validate() == nil {
		return datasheet, true
	}
	return roofline.Ceiling{}, false
}

// chartSet draws every chart of one model into dir/plots and returns them as figures, with
// a note for each chart that had nothing to draw.
func chartSet(dir string, info sweep.RunInfo, m modelResults, prefix string) ([]plots.Figure, []string, error) {
	ok := m.ok()
	hasSteps := false
	for _, r := range m.steps {
		hasSteps = hasSteps || r.Status == measure.StatusOK
	}
	if len(ok) == 0 && !hasSteps {
		return nil, []string{fmt.Sprintf("%s: no configuration measured ok, so there is nothing to plot", m.shape.Name)}, nil
	}
	base := func(name string) string { return filepath.Join(dir, PlotsDir, prefix+name) }
	chart := plots.Chart{Subtitle: subtitle(info, m)}
	emu := emulatedTag(info)
	var set figureSet

	bound, hasBound := boundCeiling(info)
	boundLabel := "roofline bound (" + bound.Name + " ceiling)"
	throttled := "throttled (power or thermal)"

	// Tokens/s against the batch, one colour per context, the bound dashed beside each.
	var perServer, perRequest, throttledServer, throttledRequest []plots.Series
	for _, ctx := range m.contexts {
		group := "context " + contextLabel(ctx)
		srv := plots.Series{Label: group, Group: group}
		req := plots.Series{Label: group, Group: group}
		bs := plots.Series{Label: boundLabel, Group: group, Style: plots.Bound}
		br := bs
		nf := plots.Series{Label: noFitLabel, Group: group, Style: plots.NoFit}
		for _, b := range m.batches {
			r, has := m.at(b, ctx)
			if !has {
				continue
			}
			x := float64(b)
			if r.Status == measure.StatusSkipped && strings.HasPrefix(r.Reason, "does not fit") {
				nf.X, nf.Y = append(nf.X, x), append(nf.Y, 0)
			}
			srv.X, srv.Y = append(srv.X, x), append(srv.Y, valueIfOK(r, r.PerServerTokensPerSec))
			req.X, req.Y = append(req.X, x), append(req.Y, valueIfOK(r, r.PerRequestTokensPerSec))
			if r.Status == measure.StatusOK && r.Throttled {
				// One-point series drawn last, over the curve: a marker of their own colour.
				throttledServer = append(throttledServer, plots.Series{Label: throttled, Group: throttled, X: []float64{x}, Y: []float64{r.PerServerTokensPerSec}})
				throttledRequest = append(throttledRequest, plots.Series{Label: throttled, Group: throttled, X: []float64{x}, Y: []float64{r.PerRequestTokensPerSec}})
			}
			// The bound where the step fits: a skipped configuration has none to show.
			if hasBound && m.shape.Hidden > 0 && r.Status != measure.StatusSkipped {
				bd := roofline.StepBound(m.shape, bound, b, ctx)
				bs.X, bs.Y = append(bs.X, x), append(bs.Y, bd.PerServerTokensPerSec)
				br.X, br.Y = append(br.X, x), append(br.Y, bd.PerRequestTokensPerSec)
			}
		}
		perServer, perRequest = append(perServer, srv), append(perRequest, req)
		if len(bs.X) > 0 {
			perServer, perRequest = append(perServer, bs), append(perRequest, br)
		}
		es := plots.Series{Label: endToEndLabel, Group: group, Style: plots.EndToEnd}
		er := es
		for _, b := range m.batches {
			if t, has := m.stepAt(b, ctx); has {
				es.X, es.Y = append(es.X, float64(b)), append(es.Y, t.PerServerTokensPerSec)
				er.X, er.Y = append(er.X, float64(b)), append(er.Y, t.PerRequestTokensPerSec)
			}
		}
		if len(es.X) > 0 {
			perServer, perRequest = append(perServer, es), append(perRequest, er)
		}
		if len(nf.X) > 0 {
			perServer, perRequest = append(perServer, nf), append(perRequest, nf)
		}
	}
	perServer, perRequest = append(perServer, throttledServer...), append(perRequest, throttledRequest...)
	c := chart
	c.Title = emu + m.shape.Name + ": decode tokens/s against batch size"
	fig := plots.Figure{Title: "Tokens/s against batch size", Base: base("tokens_vs_batch"),
		Caption: "Left: per-server tokens/s (batch / step time, the card's total rate). Right: per-request tokens/s (1 / step time, " +
			"what one user sees stream). Solid: composed from the kernels measured alone; dotted with rings: the whole step measured end to end, where the run has it; dashed: the roofline bound on the " + bound.Name + " ceiling; a cross on the floor: a batch whose weights and KV cache do not fit in memory at that context. A gap is a configuration that failed or did not fit."}
	p, err := plots.TokensVsBatch(c, perServer, perRequest, fig.Base)
	if err := set.add(fig, p, err); err != nil {
		return nil, nil, err
	}

	// The trade between the two levels, one curve per context, batch written at the points.
	var trade []plots.Series
	for _, ctx := range m.contexts {
		s := plots.Series{Label: "context " + contextLabel(ctx)}
		for _, b := range m.batches {
			if r, has := m.at(b, ctx); has && r.Status == measure.StatusOK {
				s.X, s.Y = append(s.X, r.PerRequestTokensPerSec), append(s.Y, r.PerServerTokensPerSec)
				s.PointLabels = append(s.PointLabels, "B="+strconv.Itoa(b))
			}
		}
		if len(s.X) > 0 {
			trade = append(trade, s)
		}
		e := plots.Series{Label: endToEndLabel, Group: s.Label, Style: plots.EndToEnd}
		for _, b := range m.batches {
			if t, has := m.stepAt(b, ctx); has {
				e.X, e.Y = append(e.X, t.PerRequestTokensPerSec), append(e.Y, t.PerServerTokensPerSec)
			}
		}
		if len(e.X) > 0 {
			trade = append(trade, e)
		}
	}
	c = chart
	c.Title = emu + m.shape.Name + ": per-request against per-server tokens/s"
	fig = plots.Figure{Title: "Per-request against per-server tokens/s", Base: base("tradeoff"),
		Caption: "Each curve is one context length, its points rising batch sizes: batching buys total throughput (up) at the cost of each stream's speed (left). Dotted with rings: the whole step measured end to end."}
	p, err = plots.Tradeoff(c, trade, fig.Base)
	if err := set.add(fig, p, err); err != nil {
		return nil, nil, err
	}

	if len(m.contexts) > 1 {
		for _, level := range []struct{ name, label, file string }{
			{"per-server", "per-server tokens/s (1k = 1000)", "tokens_vs_context_server"},
			{"per-request", "per-request tokens/s (1k = 1000)", "tokens_vs_context_request"},
		} {
			var series []plots.Series
			for _, b := range m.batches {
				s := plots.Series{Label: "batch " + strconv.Itoa(b)}
				for _, ctx := range m.contexts {
					if r, has := m.at(b, ctx); has {
						v := r.PerServerTokensPerSec
						if level.name == "per-request" {
							v = r.PerRequestTokensPerSec
						}
						s.X, s.Y = append(s.X, float64(ctx)), append(s.Y, valueIfOK(r, v))
					}
				}
				series = append(series, s)
			}
			c = chart
			c.Title = emu + m.shape.Name + ": " + level.name + " tokens/s against context length"
			c.ValueLabel = level.label
			fig = plots.Figure{Title: strings.ToUpper(level.name[:1]) + level.name[1:] + " tokens/s against context length", Base: base(level.file),
				Caption: "One curve per batch size: the longer the context, the more KV cache each step reads."}
			p, err = plots.TokensVsContext(c, series, fig.Base)
			if err := set.add(fig, p, err); err != nil {
				return nil, nil, err
			}
		}
	}

	// Efficiency maps: the fraction of the roofline bound reached.
	measured, datasheet := runCeilings(info)
	for _, em := range []struct {
		ceiling roofline.Ceiling
		file    string
		value   func(sweep.Record) float64
	}{
		{measured, "efficiency_measured", func(r sweep.Record) float64 { return r.RooflineFractionMeasured }},
		{datasheet, "efficiency_datasheet", func(r sweep.Record) float64 { return r.RooflineFractionDatasheet }},
	} {
		if em.ceiling.Validate() != nil {
			continue
		}
		grid := make([][]float64, len(m.contexts))
		for i, ctx := range m.contexts {
			grid[i] = make([]float64, len(m.batches))
			for j, b := range m.batches {
				grid[i][j] = math.NaN()
				if r, has := m.at(b, ctx); has && r.Status == measure.StatusOK {
					grid[i][j] = em.value(r)
				}
			}
		}
		c = chart
		c.Title = fmt.Sprintf("%s%s: fraction of the roofline (%s ceiling) reached", emu, m.shape.Name, em.ceiling.Name)
		fig = plots.Figure{Title: "Fraction of the roofline, " + em.ceiling.Name + " ceiling", Base: base(em.file),
			Caption: fmt.Sprintf("Bound step time / measured step time against the %s ceiling (%s GB/s, %s); grey: failed, skipped or not measured.",
				em.ceiling.Name, fmtNum(em.ceiling.BandwidthBytesPerSec/1e9), ceilingRateText(info, em.ceiling))}
		p, err = plots.EfficiencyMap(c, m.batches, m.contexts, grid, fig.Base)
		if err := set.add(fig, p, err); err != nil {
			return nil, nil, err
		}
	}

	// The roofline with every measured kernel, one marker style per kernel.
	var ceilings []plots.RooflineCeiling
	if measured.Validate() == nil {
		ceilings = append(ceilings, plots.RooflineCeiling{Label: "measured: read probe, " + mmaCeilingName + datasheetShare(info), BandwidthBytesPerSec: measured.BandwidthBytesPerSec, FLOPsPerSec: measured.FLOPsPerSec})
	}
	if datasheet.Validate() == nil {
		ceilings = append(ceilings, plots.RooflineCeiling{Label: "datasheet: dense bf16", BandwidthBytesPerSec: datasheet.BandwidthBytesPerSec, FLOPsPerSec: datasheet.FLOPsPerSec, Dashed: true})
	}
	c = chart
	c.Title = emu + m.shape.Name + ": every measured kernel on the roofline"
	fig = plots.Figure{Title: "Kernels on the roofline", Base: base("roofline"),
		Caption: "Each marker is one kernel shape as measured (its minimum bytes and FLOPs over its median time), at every batch and context of the sweep, and where the run has them each whole step measured end to end (the step's weight and KV bytes and FLOPs over its time); the lines are the measured (solid) and datasheet (dashed) ceilings."}
	p, err = plots.RooflineGroups(c, ceilings, append(kernelGroups(m), stepGroup(m)...), fig.Base)
	if err := set.add(fig, p, err); err != nil {
		return nil, nil, err
	}
	return set.figs, set.notes, nil
}

// noFitLabel names the crosses of configurations that do not fit in memory.
const noFitLabel = "does not fit in memory"

// kernelGroups collects each distinct kernel measurement of the model's records, grouped by
// kernel name. A kernel that failed is marked so (never drawn as a speed).
func kernelGroups(m modelResults) []plots.RooflineGroup {
	var groups []plots.RooflineGroup
	index := map[string]int{}
	seen := map[string]bool{}
	for _, r := range m.records {
		for _, k := range r.Kernels {
			if seen[k.Name+"|"+k.Key] || k.Status == measure.StatusNotMeasured || k.Status == measure.StatusSkipped {
				continue
			}
			seen[k.Name+"|"+k.Key] = true
			i, has := index[k.Name]
			if !has {
				i = len(groups)
				index[k.Name] = i
				groups = append(groups, plots.RooflineGroup{Label: k.Name})
			}
			p := plots.RooflinePoint{Label: fmt.Sprintf("%s B=%d S=%d", k.Name, r.Batch, r.Context), Batch: r.Batch}
			if k.Status == measure.StatusOK && k.Bytes > 0 {
				p.Intensity = k.FLOPs / k.Bytes
				p.FLOPsPerSec = k.AchievedTFLOPs * 1e12
			} else {
				p.Failed = true
			}
			groups[i].Points = append(groups[i].Points, p)
		}
	}
	return groups
}

// stepGroup is the whole steps measured end to end as roofline points: the step's minimum
// bytes (the weights it reads and its KV cache) and FLOPs over its time.
func stepGroup(m modelResults) []plots.RooflineGroup {
	if m.shape.Hidden == 0 {
		return nil
	}
	g := plots.RooflineGroup{Label: "whole step (end to end)"}
	for _, r := range m.steps {
		t, mode, ok := r.Best()
		if r.Status != measure.StatusOK || !ok {
			continue
		}
		bytes := m.shape.WeightBytesPerStep(r.Batch) + float64(r.Batch)*m.shape.KVBytesPerSequence(r.Context)
		flops := m.shape.FLOPsPerStep(r.Batch, r.Context)
		if bytes <= 0 || flops <= 0 {
			continue
		}
		g.Points = append(g.Points, plots.RooflinePoint{Label: fmt.Sprintf("whole step (%s) B=%d S=%d", mode, r.Batch, r.Context),
			Intensity: flops / bytes, FLOPsPerSec: flops / t.StepSeconds})
	}
	if len(g.Points) == 0 {
		return nil
	}
	return []plots.RooflineGroup{g}
}

// valueIfOK is v for an ok record and NaN (a gap in the curve) otherwise.
func valueIfOK(r sweep.Record, v float64) float64 {
	if r.Status != measure.StatusOK {
		return math.NaN()
	}
	return v
}

// datasheetShare is ", 62% of datasheet dense bf16" for a legend, "" without a datasheet rate.
func datasheetShare(info sweep.RunInfo) string {
	if info.Datasheet.FLOPsPerSec <= 0 || info.Measured.FLOPsPerSec <= 0 {
		return ""
	}
	return ", " + pct(info.Measured.FLOPsPerSec/info.Datasheet.FLOPsPerSec) + " of datasheet dense bf16"
}

// ceilingRateText is a ceiling's compute rate by its name: the measured one is the mma.sync bf16
// ceiling with its datasheet ratio, the datasheet's the dense bf16 tensor rate.
func ceilingRateText(info sweep.RunInfo, c roofline.Ceiling) string {
	if c.Name == roofline.CeilingMeasured {
		return mmaCeilingText(info)
	}
	return "dense bf16 " + fmtNum(c.FLOPsPerSec/1e12) + " TFLOP/s"
}

func subtitle(info sweep.RunInfo, m modelResults) string {
	parts := []string{info.Card.Name}
	if m.shape.WeightDType != "" {
		parts = append(parts, string(m.shape.WeightDType))
	}
	if m.shape.TP > 1 {
		parts = append(parts, fmt.Sprintf("tp %d: one GPU's shard, all-reduce left out", m.shape.TP))
	}
	if info.Measured.Known() {
		parts = append(parts, fmt.Sprintf("measured ceiling %s GB/s, %s", fmtNum(info.Measured.BandwidthBytesPerSec/1e9), mmaCeilingText(info)))
	}
	if info.Backend.Emulated {
		parts = append(parts, "EMULATED ON THE CPU: times are not a speed")
	}
	throttled := 0
	for _, r := range m.records {
		if r.Status == measure.StatusOK && r.Throttled {
			throttled++
		}
	}
	if throttled > 0 {
		parts = append(parts, fmt.Sprintf("%d result(s) taken while the card throttled", throttled))
	}
	parts = append(parts, "decodebench "+info.Version)
	return strings.Join(parts, " · ")
}

// contextLabel writes a context length as the axes do: 32k for 32768.
func contextLabel(ctx int) string {
	if ctx >= 1024 && ctx%1024 == 0 {
		return strconv.Itoa(ctx/1024) + "k"
	}
	return strconv.Itoa(ctx)
}

// emulatedTag leads every chart title of an emulated run, so that no one reads its times as
// a speed.
func emulatedTag(info sweep.RunInfo) string {
	if info.Backend.Emulated {
		return "[EMULATED, not a speed] "
	}
	return ""
}

// figureSet gathers a report's figures as they are drawn; a chart with nothing to draw
// becomes a note naming it rather than an error.
type figureSet struct {
	figs  []plots.Figure
	notes []string
}

func (s *figureSet) add(fig plots.Figure, _ []string, err error) error {
	if errors.Is(err, plots.ErrNothingToDraw) {
		s.notes = append(s.notes, fig.Title+": nothing to draw")
		return nil
	}
	if err != nil {
		return err
	}
	s.figs = append(s.figs, fig)
	return nil
}
