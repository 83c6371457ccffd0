package report

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"github.com/decodebench/decodebench/bench/measure"
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

// Files a comparison writes into its directory.
const (
	CompareHTMLFile     = "compare.html"
	CompareMarkdownFile = "compare.md"
	CompareCSVFile      = "compare.csv"
)

// maxCompareContexts is how many shared context lengths get their own overlaid chart.
const maxCompareContexts = 4

// Pair is one configuration measured ok in both runs.
type Pair struct {
	Model   string
	Batch   int
	Context int
	A, B    sweep.Record
}

// ServerRatio is B's per-server tokens/s over A's (per-request has the same ratio: both are
// set by the step time at one batch).
func (p Pair) ServerRatio() float64 { return p.B.PerServerTokensPerSec / p.A.PerServerTokensPerSec }

// Comparison is two run directories side by side.
type Comparison struct {
	DirA, DirB     string
	LabelA, LabelB string
	InfoA, InfoB   sweep.RunInfo
	Pairs          []Pair   // sorted by model, context, batch
	OnlyA, OnlyB   int      // configurations ok in one run only
	Notes          []string // how the runs were matched

	// batches lists, per context, every batch either run has a record of: a batch without a
	// pair is a gap in the overlaid curves, never bridged.
	batches map[int][]int
}

// GeoMeanRatio is the geometric mean of B/A over the pairs (0 when there are none).
func (c Comparison) GeoMeanRatio() float64 {
	if len(c.Pairs) == 0 {
		return 0
	}
	var sum float64
	for _, p := range c.Pairs {
		sum += math.Log(p.ServerRatio())
	}
	return math.Exp(sum / float64(len(c.Pairs)))
}

// Compare matches the ok records of two run directories by model, batch and context. Runs of
// one model each but of different model keys (say one bf16, one fp16) are matched by batch and
// context alone, and the notes say so.
func Compare(dirA, dirB string) (Comparison, error) {
	c := Comparison{DirA: dirA, DirB: dirB}
	a, err := sweep.Load(dirA)
	if err != nil {
		return c, err
	}
	b, err := sweep.Load(dirB)
	if err != nil {
		return c, err
	}
	c.InfoA, c.InfoB = a.Info, b.Info
	c.LabelA, c.LabelB = runLabels(dirA, dirB, a.Info, b.Info)

	c.batches = map[int][]int{}
	for _, r := range append(slices.Clone(a.Records), b.Records...) {
		if !slices.Contains(c.batches[r.Context], r.Batch) {
			c.batches[r.Context] = append(c.batches[r.Context], r.Batch)
		}
	}
	for ctx := range c.batches {
		slices.Sort(c.batches[ctx])
	}
	okA, okB := okRecords(a.Records), okRecords(b.Records)
	key := func(r sweep.Record) string { return fmt.Sprintf("%s|%d|%d", r.ModelKey, r.Batch, r.Context) }
	if len(a.Info.Axes.Models) == 1 && len(b.Info.Axes.Models) == 1 &&
		sweep.ModelKey(a.Info.Axes.Models[0]) != sweep.ModelKey(b.Info.Axes.Models[0]) {
		key = func(r sweep.Record) string { return fmt.Sprintf("|%d|%d", r.Batch, r.Context) }
		c.Notes = append(c.Notes, fmt.Sprintf("the runs measured different models (%s and %s): matched by batch and context alone",
			a.Info.Axes.Models[0].Name, b.Info.Axes.Models[0].Name))
	}
	inB := map[string]sweep.Record{}
	for _, r := range okB {
		inB[key(r)] = r
	}
	matched := map[string]bool{}
	for _, r := range okA {
		if rb, ok := inB[key(r)]; ok {
			c.Pairs = append(c.Pairs, Pair{Model: r.Model, Batch: r.Batch, Context: r.Context, A: r, B: rb})
			matched[key(r)] = true
		} else {
			c.OnlyA++
		}
	}
	c.OnlyB = len(okB) - len(matched)
	slices.SortFunc(c.Pairs, func(x, y Pair) int {
		return cmp.Or(cmp.Compare(x.Model, y.Model), cmp.Compare(x.Context, y.Context), cmp.Compare(x.Batch, y.Batch))
	})
	if len(c.Pairs) == 0 {
		return c, fmt.Errorf("%s and %s have no configuration measured ok in both (model, batch and context must match)", dirA, dirB)
	}
	return c, nil
}

func okRecords(records []sweep.Record) []sweep.Record {
	var out []sweep.Record
	for _, r := range records {
		if r.Status == measure.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

// runLabels names the two runs by what differs: the card, else the driver, else the
// directory.
func runLabels(dirA, dirB string, a, b sweep.RunInfo) (string, string) {
	la, lb := a.Card.Name, b.Card.Name
	if la == lb {
		la, lb = la+" (driver "+orDash(a.Card.Driver)+")", lb+" (driver "+orDash(b.Card.Driver)+")"
	}
	if la == lb {
		la, lb = filepath.Base(filepath.Clean(dirA)), filepath.Base(filepath.Clean(dirB))
	}
	if la == lb {
		la, lb = "A: "+la, "B: "+lb
	}
	if a.Backend.Emulated {
		la += " [emulated]"
	}
	if b.Backend.Emulated {
		lb += " [emulated]"
	}
	return la, lb
}

// WriteComparison writes compare.csv, the overlaid charts, compare.md and compare.html into
// out.
func WriteComparison(c Comparison, out string) (Written, error) {
	var w Written
	if err := os.MkdirAll(out, 0o755); err != nil {
		return w, err
	}
	csvPath := filepath.Join(out, CompareCSVFile)
	figs, notes, err := compareCharts(c, out)
	if err != nil {
		return w, err
	}
	w.Notes = append(notes, c.Notes...)
	if err := writeCompareCSV(c, csvPath); err != nil {
		return w, err
	}
	doc := compareDocument(c, figs, w.Notes)
	htmlPath, mdPath := filepath.Join(out, CompareHTMLFile), filepath.Join(out, CompareMarkdownFile)
	if err := plots.WriteHTML(htmlPath, doc); err != nil {
		return w, err
	}
	if err := plots.WriteMarkdown(mdPath, doc); err != nil {
		return w, err
	}
	w.Files = append(w.Files, htmlPath, mdPath, csvPath)
	for _, f := range figs {
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

func compareDocument(c Comparison, figs []plots.Figure, notes []string) plots.Document {
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
	ratios := plots.Table{Caption: "Configurations measured ok in both runs (* = taken while the card throttled)",
		Header: []string{"model", "batch", "context", "A per-server tok/s", "B per-server tok/s", "A per-request tok/s", "B per-request tok/s", "B / A", "A % roofline", "B % roofline"}}
	for _, p := range c.Pairs {
		ratios.Rows = append(ratios.Rows, []string{p.Model, strconv.Itoa(p.Batch), contextLabel(p.Context),
			fmtNum(p.A.PerServerTokensPerSec) + star(p.A.Throttled), fmtNum(p.B.PerServerTokensPerSec) + star(p.B.Throttled),
			fmtNum(p.A.PerRequestTokensPerSec), fmtNum(p.B.PerRequestTokensPerSec),
			fmt.Sprintf("%.3f", p.ServerRatio()), pct(p.A.RooflineFraction), pct(p.B.RooflineFraction)})
		class := ""
		if p.A.Throttled || p.B.Throttled {
			class = plots.RowThrottled
		}
		ratios.RowClass = append(ratios.RowClass, class)
	}
	doc.Sections = []plots.Section{
		{Heading: "Runs", Tables: []plots.Table{runs}},
		{Heading: "Overlaid curves", Figures: figs},
		{Heading: "Ratios", Tables: []plots.Table{ratios}},
	}
	return doc
}

func star(b bool) string {
	if b {
		return "*"
	}
	return ""
}

func writeCompareCSV(c Comparison, path string) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{"model", "batch", "context", "a_per_server_tokens_per_s", "b_per_server_tokens_per_s", "a_per_request_tokens_per_s",
		"b_per_request_tokens_per_s", "ratio_b_over_a", "a_roofline_fraction", "b_roofline_fraction", "a_throttled", "b_throttled"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, p := range c.Pairs {
		w.Write([]string{p.Model, strconv.Itoa(p.Batch), strconv.Itoa(p.Context), g(p.A.PerServerTokensPerSec), g(p.B.PerServerTokensPerSec),
			g(p.A.PerRequestTokensPerSec), g(p.B.PerRequestTokensPerSec), g(p.ServerRatio()), g(p.A.RooflineFraction), g(p.B.RooflineFraction),
			strconv.FormatBool(p.A.Throttled), strconv.FormatBool(p.B.Throttled)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return sweep.WriteFileAtomic(path, buf.Bytes())
}
