package plan

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/format"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/decodebench/decodebench/plots"
)

// Output formats of a plan.
const (
	FormatTable    = format.Table // the names every command's --format shares
	FormatMarkdown = format.MD
	FormatJSON     = format.JSON
)

// Formats are the formats Write takes.
var Formats = []string{FormatTable, FormatMarkdown, FormatJSON}

var markdownTable = format.Markdown // Write's parameter format hides the package

// Files a plan writes into a directory.
const (
	JSONFile     = "plan.json"
	MarkdownFile = "plan.md"
	ChartBase    = "plan_frontier" // .png and .svg
)

// Rows are the chosen batch and its neighbours, by batch.
func (p Plan) Rows() []Option {
	rows := append([]Option{p.Chosen}, p.Neighbours...)
	slices.SortFunc(rows, func(a, b Option) int { return a.Batch - b.Batch })
	return rows
}

// Header is what the plan is of and asked for, in two lines.
func (p Plan) Header() []string {
	f, r := p.Frontier, p.Request
	lines := []string{fmt.Sprintf("capacity plan: %s at context %s on %s (%s; tp %d: %d GPU(s) per server)",
		f.Model, contextText(f.Context), f.Card, f.RangeText(), max(f.TP, 1), max(f.TP, 1))}
	ask := fmt.Sprintf("target: at least %s tokens/s per request", num(r.MinRequestRate))
	switch {
	case r.TokensPerSec > 0:
		ask += fmt.Sprintf("; traffic %s output tokens/s", num(r.TokensPerSec))
	case r.RequestsPerSec > 0:
		ask += fmt.Sprintf("; traffic %s requests/s x %s output tokens = %s tokens/s", num(r.RequestsPerSec), num(r.OutputTokens), num(p.DemandTokensPerSec))
	default:
		ask += "; no traffic given (--requests-per-s with --output-tokens, or --tokens-per-s): no GPU count"
	}
	ask += fmt.Sprintf("; headroom %s%%", strconv.FormatFloat(r.Headroom*100, 'g', 4, 64))
	if r.PricePerGPUHour > 0 {
		ask += "; price " + money(r.PricePerGPUHour) + " per GPU-hour"
	}
	return append(lines, ask)
}

// Verdict is the answer in one sentence.
func (p Plan) Verdict() string {
	c := p.Chosen
	s := fmt.Sprintf("largest batch meeting %s tokens/s per request: %d (%s), %s tokens/s per request, %s per server",
		num(p.Request.MinRequestRate), c.Batch, c.Source, num(c.PerRequestTokensPerSec), num(c.PerServerTokensPerSec))
	if c.GPUs > 0 {
		s += fmt.Sprintf("; %d server(s) = %d GPU(s) for the traffic", c.Servers, c.GPUs)
	}
	if c.CostPerMillionTokens > 0 {
		s += fmt.Sprintf("; %s per million output tokens (%s at full load)", money(c.CostPerMillionTokens), money(c.FullLoadCostPerMillionTokens))
	} else if c.FullLoadCostPerMillionTokens > 0 {
		s += fmt.Sprintf("; %s per million output tokens at full load", money(c.FullLoadCostPerMillionTokens))
	}
	_, hi := p.Frontier.Range()
	switch {
	case p.AtRangeEnd && p.Frontier.Source == SourcePredicted:
		s += fmt.Sprintf(". The target is met even at batch %d, the largest whose KV cache fits in memory: memory, not speed, sets the batch", hi)
	case p.AtRangeEnd:
		s += fmt.Sprintf(". The target is met even at batch %d, the largest measured: a larger batch may meet it too but is not extrapolated, so the GPU count is an upper bound (measure larger batches to know)", hi)
	}
	return s
}

func (p Plan) table() (header []string, rows [][]string) {
	header = []string{"batch", "source", "per-request tok/s", "per-server tok/s", "meets target"}
	traffic := p.DemandTokensPerSec > 0
	price := p.Request.PricePerGPUHour > 0
	if traffic {
		header = append(header, "servers", "GPUs")
	}
	if price && traffic {
		header = append(header, "cost / 1M tokens")
	}
	if price {
		header = append(header, "full-load cost / 1M tokens")
	}
	header = append(header, "")
	for _, o := range p.Rows() {
		row := []string{strconv.Itoa(o.Batch), o.Source, num(o.PerRequestTokensPerSec), num(o.PerServerTokensPerSec), yesNo(o.MeetsTarget)}
		if traffic {
			row = append(row, strconv.Itoa(o.Servers), strconv.Itoa(o.GPUs))
		}
		if price && traffic {
			row = append(row, money(o.CostPerMillionTokens))
		}
		if price {
			row = append(row, money(o.FullLoadCostPerMillionTokens))
		}
		mark := ""
		if o.Batch == p.Chosen.Batch {
			mark = "<- chosen"
		}
		rows = append(rows, append(row, mark))
	}
	return header, rows
}

// Write writes the plan to w as an aligned table, Markdown or JSON.
func Write(w io.Writer, p Plan, name string) error {
	var b strings.Builder
	switch name {
	case FormatJSON:
		return format.WriteJSON(w, p)
	case FormatTable:
		for _, l := range p.Header() {
			b.WriteString(l + "\n")
		}
		b.WriteString("\n")
		header, rows := p.table()
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
		b.WriteString("\n" + p.Verdict() + ".\n")
		b.WriteString("method: " + p.Method + "; servers = ceil(traffic / (per-server x (1 - headroom))), GPUs = servers x tp (tensor-parallel traffic between GPUs not counted)\n")
		for _, n := range p.Notes {
			b.WriteString("note: " + n + "\n")
		}
	case FormatMarkdown:
		b.WriteString("# decodebench plan\n\n")
		for _, l := range p.Header() {
			b.WriteString("- " + l + "\n")
		}
		header, rows := p.table()
		b.WriteString("\n")
		markdownTable(&b, header, rows, nil)
		b.WriteString("\n**" + p.Verdict() + ".**\n\nMethod: " + p.Method + "; servers = ceil(traffic / (per-server x (1 - headroom))), GPUs = servers x tp.\n")
		for _, n := range p.Notes {
			b.WriteString("\n- " + n)
		}
		b.WriteString("\n")
	default:
		return fmt.Errorf("format %q: accepted are %s", name, strings.Join(Formats, ", "))
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

// Chart draws the plan's frontier into dir (ChartBase.png and .svg) and returns the paths.
func Chart(p Plan, dir string) ([]string, error) {
	f := p.Frontier
	label := fmt.Sprintf("%s, context %s", f.Source, contextText(f.Context))
	points := plots.Series{Label: label, Style: plots.Measured}
	for _, k := range f.Knots {
		points.X, points.Y = append(points.X, k.PerRequestTokensPerSec), append(points.Y, k.PerServerTokensPerSec)
		points.PointLabels = append(points.PointLabels, "B="+strconv.Itoa(k.Batch))
	}
	between := plots.Series{Label: "between measured batches: interpolated in log batch"}
	if f.Source == SourcePredicted {
		between.Label = "roofline bound at every batch"
	}
	for i := 0; i+1 < len(f.Knots); i++ {
		a, b := f.Knots[i].Batch, f.Knots[i+1].Batch
		steps := min(b-a, 24)
		for s := 0; s < steps; s++ {
			batch := int(math.Round(float64(a) * math.Pow(float64(b)/float64(a), float64(s)/float64(steps))))
			if pt, err := f.At(batch); err == nil {
				between.X, between.Y = append(between.X, pt.PerRequestTokensPerSec), append(between.Y, pt.PerServerTokensPerSec)
			}
		}
	}
	if n := len(f.Knots); n > 0 {
		between.X, between.Y = append(between.X, f.Knots[n-1].PerRequestTokensPerSec), append(between.Y, f.Knots[n-1].PerServerTokensPerSec)
	}
	c := p.Chosen
	chart := plots.Chart{Title: fmt.Sprintf("%s on %s at context %s: capacity plan", f.Model, f.Card, contextText(f.Context)),
		Subtitle: fmt.Sprintf("%s · at least %s tokens/s per request · chosen batch %d: %s tokens/s per server", f.RangeText(),
			num(p.Request.MinRequestRate), c.Batch, num(c.PerServerTokensPerSec))}
	if f.Source == SourcePredicted {
		chart.Subtitle += " · a roofline prediction, not a measurement"
	}
	for _, n := range p.Notes {
		if strings.HasPrefix(n, "EMULATED") {
			chart.Subtitle += " · EMULATED: not a speed"
		}
	}
	return plots.Frontier(chart, plots.FrontierData{Points: points, Between: between, Target: p.Request.MinRequestRate,
		ChosenPerRequest: c.PerRequestTokensPerSec, ChosenPerServer: c.PerServerTokensPerSec,
		ChosenLabel: fmt.Sprintf("chosen: batch %d (%s)", c.Batch, c.Source)}, filepath.Join(dir, ChartBase))
}

func contextText(ctx int) string {
	if ctx >= 1024 && ctx%1024 == 0 {
		return strconv.Itoa(ctx/1024) + "k"
	}
	return strconv.Itoa(ctx)
}

// money writes an amount with four significant digits, no currency: the price's own.
func money(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
