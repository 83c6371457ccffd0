// Package report turns a sweep's run directory into what a person reads: results.csv, the
// charts (PNG and SVG under plots/), report.md and a self-contained report.html, and sets two
// run directories side by side (Compare).
package report

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/units"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/plots"
)

// Files a report writes into the run directory.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
)

// Written lists what Write produced.
type Written struct {
	Files []string // every file, the HTML report first
	Notes []string // charts that had nothing to draw, lines that could not be read
}

// Plots (re)draws the charts of the run directory dir into dir/plots.
func Plots(dir string) ([]plots.Figure, []string, error) {
	p, err := sweep.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	return drawAll(dir, p)
}

func drawAll(dir string, p sweep.Prior) ([]plots.Figure, []string, error) {
	models := withSteps(byModel(p.Info, p.Records), p.Steps)
	var figs []plots.Figure
	var notes []string
	for _, m := range models {
		prefix := ""
		if len(models) > 1 {
			prefix = slug(m.shape.Name) + "-"
		}
		f, n, err := chartSet(dir, p.Info, m, prefix)
		if err != nil {
			return nil, nil, err
		}
		figs, notes = append(figs, f...), append(notes, n...)
	}
	_, f, n, err := drawFormats(dir, p.Info, models)
	if err != nil {
		return nil, nil, err
	}
	return append(figs, f...), append(notes, n...), nil
}

// Write (re)writes results.csv, the charts, report.md and report.html of the run directory.
func Write(dir string) (Written, error) {
	var w Written
	p, err := sweep.Load(dir)
	if err != nil {
		return w, err
	}
	if p.BadLines > 0 {
		w.Notes = append(w.Notes, fmt.Sprintf("%d line(s) of the results could not be read and were left out", p.BadLines))
	}
	if len(p.Repaired) > 0 {
		w.Notes = append(w.Notes, fmt.Sprintf("the last line of %s was torn (a crash mid-write) and was left out", strings.Join(p.Repaired, " and ")))
	}
	for _, why := range p.Implausible {
		w.Notes = append(w.Notes, "held as failed, not a speed: "+why)
	}
	csvPath := filepath.Join(dir, sweep.CSVFile)
	if err := atomicfile.Write(csvPath, CSV(p.Info, p.Records)); err != nil {
		return w, err
	}
	var stepsCSV string
	if len(p.Steps) > 0 {
		stepsCSV = filepath.Join(dir, StepsCSVFile)
		if err := atomicfile.Write(stepsCSV, StepsCSV(p.Steps)); err != nil {
			return w, err
		}
	}
	var peerCSV string
	if peer := peerVariant(p.Info); peer != cgo.LinearAuto {
		peerCSV = filepath.Join(dir, PeerCSVFile)
		if err := atomicfile.Write(peerCSV, PeerCSV(peerRows(p), peer)); err != nil {
			return w, err
		}
	}
	models := withSteps(byModel(p.Info, p.Records), p.Steps)
	figsByModel := make([][]plots.Figure, len(models))
	for i, m := range models {
		prefix := ""
		if len(models) > 1 {
			prefix = slug(m.shape.Name) + "-"
		}
		figs, notes, err := chartSet(dir, p.Info, m, prefix)
		if err != nil {
			return w, err
		}
		figsByModel[i] = figs
		w.Notes = append(w.Notes, notes...)
	}
	formats, formatFigs, notes, err := drawFormats(dir, p.Info, models)
	if err != nil {
		return w, err
	}
	w.Notes = append(w.Notes, notes...)
	figsByModel = append(figsByModel, formatFigs)
	doc := document(dir, p, models, figsByModel, w.Notes)
	doc.Sections = withFormatSections(doc.Sections, formats)
	htmlPath, mdPath := filepath.Join(dir, HTMLFile), filepath.Join(dir, MarkdownFile)
	if err := plots.WriteHTML(htmlPath, doc); err != nil {
		return w, err
	}
	if err := plots.WriteMarkdown(mdPath, doc); err != nil {
		return w, err
	}
	w.Files = append(w.Files, htmlPath, mdPath, csvPath)
	if peerCSV != "" {
		w.Files = append(w.Files, peerCSV)
	}
	if stepsCSV != "" {
		w.Files = append(w.Files, stepsCSV)
	}
	for _, figs := range figsByModel {
		for _, f := range figs {
			w.Files = append(w.Files, f.Base+".png", f.Base+".svg")
		}
	}
	return w, nil
}

// withFormatSections puts the per-format sections before the first model's results: the
// comparison a run with several weight formats was made for.
func withFormatSections(sections, formats []plots.Section) []plots.Section {
	if len(formats) == 0 {
		return sections
	}
	at := len(sections)
	for i, s := range sections {
		if strings.HasPrefix(s.Heading, "Results") {
			at = i
			break
		}
	}
	return append(append(slices.Clip(sections[:at]), formats...), sections[at:]...)
}

// document assembles the report.
func document(dir string, p sweep.Prior, models []modelResults, figs [][]plots.Figure, notes []string) plots.Document {
	info := p.Info
	var names []string
	for _, m := range models {
		names = append(names, m.shape.Name)
	}
	doc := plots.Document{
		Title:    fmt.Sprintf("decodebench: %s on %s", strings.Join(names, ", "), cardName(info)),
		Subtitle: fmt.Sprintf("Decode tokens/s per request and per server against the roofline · run %s · %s", info.Started.Format("2006-01-02 15:04 MST"), stateText(info)),
		Footer: fmt.Sprintf("Written by decodebench %s from run.json and results.jsonl. Units are decimal: 1 GB/s = 1e9 B/s, 1 TFLOP/s = 1e12 FLOP/s, "+
			"tokens/s 1k = 1000; context lengths count tokens, 1k = 1024.", info.Version),
	}
	doc.Alerts = alerts(dir, p, models)
	if len(notes) > 0 {
		doc.Alerts = append(doc.Alerts, plots.Alert{Level: plots.AlertInfo, Title: "Notes", Text: strings.Join(notes, "; ") + "."})
	}
	// The headline comes first: what a reader should take away, before the card and the method.
	steps, err := ReadWholeSteps(filepath.Join(dir, StepsFile))
	if err != nil {
		doc.Alerts = append(doc.Alerts, plots.Alert{Level: plots.AlertInfo, Title: "Whole steps", Text: fmt.Sprintf("%s could not be read (%v); the headline leaves end to end out.", StepsFile, err)})
	}
	for _, h := range headlinesOf(info, p.Records, steps) {
		doc.Sections = append(doc.Sections, h.Section(len(models) > 1))
	}
	doc.Sections = append(doc.Sections, cardSection(info), methodSection(info))
	for i, m := range models {
		doc.Sections = append(doc.Sections, resultsSection(info, m, figs[i], len(models) > 1)...)
	}
	if peerVariant(info) != cgo.LinearAuto {
		doc.Sections = append(doc.Sections, peerSection(p, peerRows(p)))
	}
	if s, ok := problemsSection(models); ok {
		doc.Sections = append(doc.Sections, s)
	}
	if info.Budget != nil && len(info.Budget.Dropped) > 0 {
		doc.Sections = append(doc.Sections, budgetSection(info))
	}
	doc.Sections = append(doc.Sections, columnsSection())
	return doc
}

func alerts(dir string, p sweep.Prior, models []modelResults) []plots.Alert {
	info := p.Info
	var out []plots.Alert
	if info.Backend.Emulated {
		out = append(out, plots.Alert{Level: plots.AlertDanger, Title: "EMULATED RUN: THESE TIMES ARE NOT A SPEED",
			Text: "The kernels ran in the CPU emulator (libdecodebench_emu.so), which checks that they are correct and says nothing about how fast any GPU is. " +
				"Every time, tokens/s, bandwidth and roofline fraction below is the emulator's and must not be quoted, compared or plotted as performance."})
	}
	var failed, skipped, throttled, total int
	for _, m := range models {
		for _, r := range m.records {
			total++
			switch {
			case r.Status == measure.StatusFailed:
				failed++
			case r.Status == measure.StatusSkipped:
				skipped++
			case r.Throttled:
				throttled++
			}
		}
	}
	switch info.State {
	case sweep.StateInterrupted:
		out = append(out, plots.Alert{Level: plots.AlertWarning, Title: "Interrupted",
			Text: "The sweep was stopped before it finished; this report covers what was measured. Continue it with `decodebench sweep --resume " + dir + "`."})
	case sweep.StateDeviceLost:
		out = append(out, plots.Alert{Level: plots.AlertWarning, Title: "The device stopped working", Text: info.StateDetail + ". The run directory is resumable on a healthy card."})
	case sweep.StateRunning:
		out = append(out, plots.Alert{Level: plots.AlertWarning, Title: "Still running, or killed", Text: "run.json says the sweep had not finished when this report was written."})
	case sweep.StateFailed:
		out = append(out, plots.Alert{Level: plots.AlertWarning, Title: "The sweep stopped on an error", Text: info.StateDetail})
	}
	if failed > 0 {
		out = append(out, plots.Alert{Level: plots.AlertWarning, Title: fmt.Sprintf("%d of %d configurations failed", failed, total),
			Text: "A kernel failed verification or returned an error; those configurations are listed under Failed and skipped with the reason and are never plotted as a speed."})
	}
	if throttled > 0 {
		out = append(out, plots.Alert{Level: plots.AlertWarning, Title: fmt.Sprintf("%d result(s) taken while the card throttled", throttled),
			Text: "NVML reported a power or thermal slowdown during a measurement these results are composed of; they are marked in the tables and charts and may be slower than the card can do."})
	}
	if skipped > 0 && failed == 0 {
		out = append(out, plots.Alert{Level: plots.AlertInfo, Title: fmt.Sprintf("%d configuration(s) skipped", skipped),
			Text: "They do not fit in the card's memory or use a shape the kernels do not take; see Failed and skipped."})
	}
	return out
}

func cardName(info sweep.RunInfo) string {
	if info.Backend.Emulated {
		return "the CPU emulator (" + info.Card.Name + ")"
	}
	return info.Card.Name
}

func stateText(info sweep.RunInfo) string {
	switch info.State {
	case sweep.StateComplete:
		return "complete"
	case sweep.StateInterrupted:
		return "interrupted"
	case sweep.StateDeviceLost:
		return "stopped: device lost"
	}
	return info.State
}

func cardSection(info sweep.RunInfo) plots.Section {
	c := info.Card
	facts := []plots.Fact{
		fact("Card", c.Name), fact("UUID", orDash(c.UUID)), fact("PCI bus", orDash(c.PCIBusID)),
		fact("Memory", fmt.Sprintf("%s (%d bytes)", units.Bytes(float64(c.MemoryTotalBytes)), c.MemoryTotalBytes)),
		fact("Compute capability", orDash(c.ComputeCapability)),
		fact("SMs, L2", fmt.Sprintf("%d SMs, %s L2", c.SMCount, units.Bytes(float64(c.L2Bytes)))),
		fact("Driver, CUDA", fmt.Sprintf("driver %s, CUDA %s", orDash(c.Driver), orDash(c.CUDAVersion))),
		fact("Clocks at start", clocks(c)),
		fact("ECC", onOff(c.ECCEnabled, c.NVML == "ok")),
		fact("Power limit", watts(c.PowerLimitWatts)),
		fact("Temperature at start", celsius(c.TemperatureC)),
		fact("NVML", c.NVML),
		fact("Backend", fmt.Sprintf("%s (%s)", info.Backend.Name, filepath.Base(info.Backend.Library))), // a run.json of before it held the file name alone
		fact("decodebench", info.Version),
		fact("Command", strings.Join(info.CommandLine, " ")),
		fact("Started, updated", fmt.Sprintf("%s, %s", info.Started.Format(time.RFC3339), info.Updated.Format(time.RFC3339))),
	}
	if len(info.Sessions) > 1 {
		facts = append(facts, fact("Sessions", fmt.Sprintf("%d (resumed %d times)", len(info.Sessions), len(info.Sessions)-1)))
	}
	if len(c.Unavailable) > 0 {
		facts = append(facts, fact("Not available", strings.Join(c.Unavailable, "; ")))
	}
	facts = append(facts, fact("Launch baseline", launchText(info)))
	measuredRate := fmtNumOrDash(info.Measured.FLOPsPerSec / 1e12)
	if r := datasheetRatio(info); r != "" && info.Measured.FLOPsPerSec > 0 {
		measuredRate += fmt.Sprintf(" (%s of datasheet)", pct(info.Measured.FLOPsPerSec/info.Datasheet.FLOPsPerSec))
	}
	ceilings := plots.Table{Caption: "Ceilings (decimal units). The measured compute ceiling is the " + mmaCeilingName +
		" (the mma.sync m16n8k16 probe, not wgmma: below the card's tensor peak on Hopper), beside its ratio to the datasheet's dense bf16 rate.",
		Header: []string{"ceiling", "memory GB/s", "bf16 TFLOP/s", "source"},
		Rows: [][]string{
			{"measured: read probe, " + mmaCeilingName, fmtNumOrDash(info.Measured.BandwidthBytesPerSec / 1e9), measuredRate, orDash(info.Measured.Source)},
			{"datasheet: memory, dense bf16 tensor", fmtNumOrDash(info.Datasheet.BandwidthBytesPerSec / 1e9), fmtNumOrDash(info.Datasheet.FLOPsPerSec / 1e12), orDash(info.Datasheet.Source)},
		}}
	return plots.Section{Heading: "Card", Facts: facts, Tables: []plots.Table{ceilings}}
}

func methodSection(info sweep.RunInfo) plots.Section {
	t := info.Method.Timing
	return plots.Section{Heading: "Method", Paragraphs: []string{
		"Each configuration (model, batch B, context S) is one decode step. Its distinct kernels (fused QKV projection, attention over the KV cache, output projection, " +
			"fused gate/up, down projection, LM head) are measured on the card, each shape once however many configurations share it, and the step time is " +
			"Σ repeat × median time of each kernel plus the small per-token operations.",
		"The small operations (RMSNorms, residual adds, rotary embedding, KV append, MLP activation, embedding gather, sampling) are " + info.Method.SmallOps + ".",
		fmt.Sprintf("Every kernel's output is verified against a float64 reference before it is timed; a wrong or NaN result is recorded as failed and never plotted. "+
			"Timing uses device events on a non-default stream after %d warm-up calls: at least %d samples and %.2g s, then until the spread (IQR / median) falls under %.2g%% or %.3g s pass. "+
			"Every sample is kept (kernels.jsonl); the tables give medians.", t.Warmup, t.MinSamples, t.MinSeconds, t.TargetSpread*100, t.MaxSeconds),
		fmt.Sprintf("Operands come from HBM, not L2: weights and KV caches rotate through copies whose working set is at least %gx the L2 size (each kernel's rotation is in kernels.jsonl).", info.Method.RotateFactor),
		fmt.Sprintf("NVML is sampled every %.3g s during each measurement (clocks, temperature, power, throttle reasons); a result is flagged throttled when a reading during any of its kernels had a power or thermal slowdown.", info.Method.TelemetryIntervalSeconds),
		"per-request tokens/s = 1 / step time; per-server tokens/s = B / step time. The roofline bound is max((weight bytes + B × KV bytes(S)) / bandwidth, step FLOPs / tensor rate); " +
			"roofline fraction = bound / measured step time, against the measured ceiling (the card's own probes) and the datasheet ceiling.",
		fmt.Sprintf("A configuration is skipped, before anything is allocated, when its weights and B KV caches of S tokens do not fit in %s with %.0f%% kept free.",
			units.Bytes(info.Method.MemoryBytes), info.Method.ReserveFraction*100),
	}}
}

func resultsSection(info sweep.RunInfo, m modelResults, figs []plots.Figure, named bool) []plots.Section {
	heading := "Results"
	if named {
		heading = "Results: " + m.shape.Name
	}
	s := plots.Section{Heading: heading, Figures: figs}
	s.Paragraphs = append(s.Paragraphs, modelLine(m))
	header := []string{"batch", "context", "status", "step ms", "per-request tok/s", "per-server tok/s", "GB/s", "TFLOP/s", "% roofline (measured)", "% roofline (datasheet)", "bound", "throttled"}
	table := plots.Table{Caption: "Every configuration (decimal units; * = taken while the card throttled)", Header: header}
	for _, r := range m.records {
		row := []string{fmt.Sprint(r.Batch), contextLabel(r.Context), r.Status}
		class := ""
		if r.Status == measure.StatusOK {
			mark := ""
			if r.Throttled {
				mark, class = "*", plots.RowThrottled
			}
			row = append(row, fmtNum(r.StepSeconds*1e3)+mark, fmtNum(r.PerRequestTokensPerSec), fmtNum(r.PerServerTokensPerSec),
				fmtNum(r.AchievedGBps), fmtNum(r.AchievedTFLOPs), pct(r.RooflineFractionMeasured), pct(r.RooflineFractionDatasheet), r.BoundLimit, yesNo(r.Throttled))
		} else {
			class = plots.RowSkipped
			if r.Status == measure.StatusFailed {
				class = plots.RowFailed
			}
			row = append(row, "–", "–", "–", "–", "–", "–", "–", "–", "–")
		}
		table.Rows = append(table.Rows, row)
		table.RowClass = append(table.RowClass, class)
	}
	s.Tables = []plots.Table{table}
	if len(m.steps) > 0 {
		s.Tables = append(s.Tables, stepTable(m))
	}

	breakdown := plots.Section{Heading: "Kernel breakdown" + strings.TrimPrefix(heading, "Results"), Collapsed: true,
		Paragraphs: []string{"Each ok configuration's kernels: calls per step, median time per call, time per step (calls × median) and share of the step; GB/s and TFLOP/s from each kernel's minimum bytes and FLOPs over its median."}}
	kt := plots.Table{Header: []string{"batch", "context", "kernel", "calls", "median µs", "spread %", "step ms", "share %", "GB/s", "TFLOP/s", "throttled"}}
	for _, r := range m.records {
		if r.Status != measure.StatusOK {
			continue
		}
		for _, k := range r.Kernels {
			kt.Rows = append(kt.Rows, []string{fmt.Sprint(r.Batch), contextLabel(r.Context), k.Name, fmtNum(k.Repeat), fmtNum(k.MedianSeconds * 1e6),
				fmtNum(k.Spread * 100), fmtNum(k.StepSeconds * 1e3), fmtNum(k.Share * 100), fmtNum(k.AchievedGBps), fmtNum(k.AchievedTFLOPs), yesNo(k.Throttled)})
			kt.RowClass = append(kt.RowClass, throttledClass(k.Throttled))
		}
		kt.Rows = append(kt.Rows, []string{fmt.Sprint(r.Batch), contextLabel(r.Context), "small ops (bounded)", "", "", "", fmtNum(r.SmallOpsSeconds * 1e3), fmtNum(r.SmallOpsSeconds / r.StepSeconds * 100), "", "", ""})
		kt.RowClass = append(kt.RowClass, "")
	}
	breakdown.Tables = []plots.Table{kt}
	return []plots.Section{s, breakdown}
}

// stepTable lists the whole steps measured end to end beside the composed ones: the three
// step times, the rates of the best, its roofline fraction and the two gaps.
func stepTable(m modelResults) plots.Table {
	t := plots.Table{Caption: "Whole steps measured end to end (steps.jsonl): graph, eager and composed step times (decimal units; * = throttled)",
		Header: []string{"batch", "context", "steps a sample", "status", "graph ms", "eager ms", "composed ms", "per-request tok/s", "per-server tok/s",
			"% roofline (measured)", "launch gap ms (% of eager)", "run-together gap ms (% of graph)", "verified"},
		Note: "launch gap = eager - graph: what launching each op in turn costs; run-together gap = graph - composed: what running the ops together costs over their isolated times. Rates and % roofline of the graph step, else the eager one. " +
			"verified: before any sample each mode's steps ran untimed and every logit and greedy token was checked against the float64 forward pass, at the model's shapes with the first layer of each kind (layers checked / the model's), the batch on the device of which seq sequences were recomputed, context S and the steps shown; NO: the step disagreed (its first bad logit) and was never timed."}
	ms := func(st step.StepTime) string {
		if !st.OK() {
			return "–"
		}
		return fmtNum(st.StepSeconds * 1e3)
	}
	for _, r := range m.steps {
		row := []string{fmt.Sprint(r.Batch), contextLabel(r.Context), fmt.Sprint(r.Steps), r.Status, ms(r.Graph), ms(r.Eager), ms(r.Composed)}
		best, _, ok := r.Best()
		class := ""
		switch {
		case r.Status == measure.StatusFailed:
			class = plots.RowFailed
		case r.Status != measure.StatusOK:
			class = plots.RowSkipped
		case r.Throttled:
			class = plots.RowThrottled
		}
		if r.Status == measure.StatusOK && ok {
			mark := ""
			if r.Throttled {
				mark = "*"
			}
			row = append(row, fmtNum(best.PerRequestTokensPerSec)+mark, fmtNum(best.PerServerTokensPerSec)+mark, pct(best.RooflineFractionMeasured))
		} else {
			row = append(row, "–", "–", "–")
		}
		gap := func(sec, share float64, have bool) string {
			if !have {
				return "–"
			}
			return fmtNum(sec*1e3) + " (" + pct(share) + ")"
		}
		verified := r.Verification.Short()
		if b := r.Verification.FirstBad; b != nil {
			verified += ": " + b.String()
		}
		row = append(row, gap(r.LaunchGapSeconds, r.LaunchGapShare, r.Graph.OK() && r.Eager.OK()),
			gap(r.RunTogetherSeconds, r.RunTogetherShare, r.Graph.OK() && r.Composed.OK()), verified)
		t.Rows = append(t.Rows, row)
		t.RowClass = append(t.RowClass, class)
	}
	return t
}

func modelLine(m modelResults) string {
	s := m.shape
	if s.Hidden == 0 {
		return "Model " + m.key + "."
	}
	dtypes := fmt.Sprintf("%s weights and KV cache", s.WeightDType)
	if s.Quant != nil {
		dtypes = fmt.Sprintf("%s projections (%s elsewhere), %s KV cache", sweep.WeightDTypeLabel(s), s.WeightDType, s.KVDType)
	} else if s.KVDType != s.WeightDType {
		dtypes = fmt.Sprintf("%s weights, %s KV cache", s.WeightDType, s.KVDType)
	}
	return fmt.Sprintf("%s: hidden %d, MLP %d, %d layers, %d query and %d KV heads of %d, vocabulary %d, %s, tp %d; weights %s, KV cache %s per token.",
		s.Name, s.Hidden, s.FFN, s.Layers, s.QHeads, s.KVHeads, s.HeadDim, s.Vocab, dtypes, max(s.TP, 1),
		units.Bytes(s.WeightBytesTotal()), units.Bytes(s.KVBytesPerToken()))
}

func problemsSection(models []modelResults) (plots.Section, bool) {
	t := plots.Table{Header: []string{"model", "batch", "context", "status", "reason"}}
	for _, m := range models {
		for _, r := range m.records {
			if r.Status == measure.StatusOK {
				continue
			}
			class := plots.RowSkipped
			if r.Status == measure.StatusFailed {
				class = plots.RowFailed
			}
			t.Rows = append(t.Rows, []string{r.Model, fmt.Sprint(r.Batch), contextLabel(r.Context), r.Status, r.Reason})
			t.RowClass = append(t.RowClass, class)
		}
	}
	if len(t.Rows) == 0 {
		return plots.Section{}, false
	}
	return plots.Section{Heading: "Failed and skipped", Tables: []plots.Table{t}}, true
}

func budgetSection(info sweep.RunInfo) plots.Section {
	b := info.Budget
	text := fmt.Sprintf("--budget %s: %d configuration(s) were dropped to fit, the finest points of the grid first so that the charts still span every axis.",
		time.Duration(b.Seconds*1e9), len(b.Dropped))
	if b.Note != "" {
		text += " " + b.Note + "."
	}
	t := plots.Table{Header: []string{"dropped configuration"}}
	for _, k := range b.Dropped {
		t.Rows = append(t.Rows, []string{k})
	}
	return plots.Section{Heading: "Budget", Paragraphs: []string{text}, Tables: []plots.Table{t}, Collapsed: len(b.Dropped) > 10}
}

func columnsSection() plots.Section {
	return plots.Section{Heading: "Columns", Collapsed: true, Facts: []plots.Fact{
		fact("step ms", "time of one decode step of the whole batch: Σ kernel calls × median + the small ops' bound"),
		fact("per-request tok/s", "1 / step time: how fast one response streams"),
		fact("per-server tok/s", "batch / step time: the card's total rate"),
		fact("GB/s, TFLOP/s", "the step's minimum bytes and FLOPs over its time (1 GB/s = 1e9 B/s)"),
		fact("% roofline", "roofline bound / measured step time, against the measured or the datasheet ceiling; 100% is the roof"),
		fact("bound", "whether the bound is set by memory or by compute (measured ceiling)"),
		fact("throttled", "NVML saw a power or thermal slowdown during a measurement of the step"),
	}}
}

func throttledClass(t bool) string {
	if t {
		return plots.RowThrottled
	}
	return ""
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// launchText is the launch baseline as the card section shows it: what one launch costs.
func launchText(info sweep.RunInfo) string {
	if info.Launch == nil {
		return "not recorded (run.json from a decodebench that did not measure it)"
	}
	l := *info.Launch
	switch {
	case l.Status != measure.StatusOK:
		return l.Text()
	case l.Emulated:
		return l.Text() + ". " + l.Method + "."
	}
	return l.Text() + ": what one kernel launch costs on this card, the floor under every kernel time above. " + l.Method + "."
}

// exists reports whether path is there (for tests and the command line).
func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func fact(name, value string) plots.Fact { return plots.Fact{Name: name, Value: value} }

func clocks(c sweep.Card) string {
	if c.SMClockMHz == 0 && c.MaxSMClockMHz == 0 && c.MemClockMHz == 0 {
		return "–"
	}
	return fmt.Sprintf("SM %s of %s MHz, memory %s of %s MHz", mhz(c.SMClockMHz), mhz(c.MaxSMClockMHz), mhz(c.MemClockMHz), mhz(c.MaxMemClockMHz))
}
