package report

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/plots"
)

// formatFamily is one model measured in several weight formats (sweep --weight-dtype with a
// list): the models of the run that share sweep.FormatFamily, in the run's order.
type formatFamily struct {
	name   string // the model's name without the format
	models []modelResults
}

// formatFamilies are the run's models measured in more than one weight format.
func formatFamilies(models []modelResults) []formatFamily {
	var families []formatFamily
	index := map[string]int{}
	for _, m := range models {
		if m.shape.Hidden == 0 {
			continue // a model the axes no longer list: its shape (and format) is unknown
		}
		key := sweep.FormatFamily(m.shape)
		i, ok := index[key]
		if !ok {
			i = len(families)
			index[key] = i
			name := strings.TrimSuffix(m.shape.Name, " ("+sweep.WeightDTypeLabel(m.shape)+")")
			families = append(families, formatFamily{name: name})
		}
		families[i].models = append(families[i].models, m)
	}
	var several []formatFamily
	for _, f := range families {
		if len(f.models) > 1 {
			several = append(several, f)
		}
	}
	return several
}

// formatCharts draws, for one model in several weight formats, tokens/s against batch and
// the per-request vs per-server trade-off with one curve per format (and context), and the
// roofline with each format's measured kernels as one group: the bytes per weight in one
// picture. Charts with nothing to draw are named in the notes.
func formatCharts(dir string, info sweep.RunInfo, f formatFamily, prefix string) ([]plots.Figure, []string, error) {
	base := func(name string) string { return filepath.Join(dir, PlotsDir, prefix+name) }
	emu := emulatedTag(info)
	var formats []string
	contexts := map[int]bool{}
	for _, m := range f.models {
		formats = append(formats, sweep.WeightDTypeLabel(m.shape))
		for _, c := range m.contexts {
			contexts[c] = true
		}
	}
	chart := plots.Chart{Subtitle: subtitle(info, f.models[0]) + " · weights " + strings.Join(formats, " vs ")}
	var set figureSet

	var perServer, perRequest, tradeoff []plots.Series
	for i, m := range f.models {
		for _, ctx := range m.contexts {
			label := formats[i]
			if len(contexts) > 1 {
				label += ", context " + contextLabel(ctx)
			}
			srv := plots.Series{Label: label}
			req := plots.Series{Label: label}
			tr := plots.Series{Label: label}
			for _, r := range m.records {
				if r.Context != ctx {
					continue
				}
				srv.X, srv.Y = append(srv.X, float64(r.Batch)), append(srv.Y, valueIfOK(r, r.PerServerTokensPerSec))
				req.X, req.Y = append(req.X, float64(r.Batch)), append(req.Y, valueIfOK(r, r.PerRequestTokensPerSec))
				if r.Status == measure.StatusOK {
					tr.X, tr.Y = append(tr.X, r.PerRequestTokensPerSec), append(tr.Y, r.PerServerTokensPerSec)
					tr.PointLabels = append(tr.PointLabels, "B="+strconv.Itoa(r.Batch))
				}
			}
			perServer, perRequest = append(perServer, srv), append(perRequest, req)
			if len(tr.X) > 0 {
				tradeoff = append(tradeoff, tr)
			}
		}
	}
	c := chart
	c.Title = emu + f.name + ": tokens/s against batch size, one curve per weight format"
	fig := plots.Figure{Title: "Weight formats: tokens/s against batch size", Base: base("formats_tokens_vs_batch"),
		Caption: "One curve per weight format (and context): the same model, its projections stored in each format; fewer bytes per weight, fewer bytes each step reads."}
	p, err := plots.TokensVsBatch(c, perServer, perRequest, fig.Base)
	if err := set.add(fig, p, err); err != nil {
		return nil, nil, err
	}
	c = chart
	c.Title = emu + f.name + ": per-request against per-server tokens/s, one curve per weight format"
	fig = plots.Figure{Title: "Weight formats: per-request vs per-server trade-off", Base: base("formats_tradeoff"),
		Caption: "Each point is one batch size (labelled); each curve one weight format: up and to the right is better on both counts."}
	p, err = plots.Tradeoff(c, tradeoff, fig.Base)
	if err := set.add(fig, p, err); err != nil {
		return nil, nil, err
	}

	measured, datasheet := runCeilings(info)
	var ceilings []plots.RooflineCeiling
	if measured.Validate() == nil {
		ceilings = append(ceilings, plots.RooflineCeiling{Label: "measured: read probe, " + mmaCeilingName + datasheetShare(info), BandwidthBytesPerSec: measured.BandwidthBytesPerSec, FLOPsPerSec: measured.FLOPsPerSec})
	}
	if datasheet.Validate() == nil {
		ceilings = append(ceilings, plots.RooflineCeiling{Label: "datasheet: dense bf16", BandwidthBytesPerSec: datasheet.BandwidthBytesPerSec, FLOPsPerSec: datasheet.FLOPsPerSec, Dashed: true})
	}
	var groups []plots.RooflineGroup
	for i, m := range f.models {
		g := plots.RooflineGroup{Label: formats[i] + " weights"}
		for _, kg := range kernelGroups(m) {
			for _, pt := range kg.Points {
				pt.Label = formats[i] + " " + pt.Label
				g.Points = append(g.Points, pt)
			}
		}
		groups = append(groups, g)
	}
	c = chart
	c.Title = emu + f.name + ": every measured kernel on the roofline, one colour per weight format"
	fig = plots.Figure{Title: "Weight formats: kernels on the roofline", Base: base("formats_roofline"),
		Caption: "Each marker is one kernel shape as measured, coloured by the weight format of the run it belongs to; a format with fewer bytes per weight moves the same linear right along the bandwidth slope (more FLOPs per byte)."}
	p, err = plots.RooflineGroups(c, ceilings, groups, fig.Base)
	if err := set.add(fig, p, err); err != nil {
		return nil, nil, err
	}
	return set.figs, set.notes, nil
}

// formatSection is the report's section of one model in several weight formats: the charts
// and one line per format.
func formatSection(f formatFamily, figs []plots.Figure) plots.Section {
	s := plots.Section{Heading: "Weight formats: " + f.name, Figures: figs}
	for _, m := range f.models {
		s.Paragraphs = append(s.Paragraphs, modelLine(m))
	}
	return s
}

// drawFormats draws the per-format charts of every model the run measured in several weight
// formats, and returns their sections.
func drawFormats(dir string, info sweep.RunInfo, models []modelResults) ([]plots.Section, []plots.Figure, []string, error) {
	var sections []plots.Section
	var all []plots.Figure
	var notes []string
	for _, f := range formatFamilies(models) {
		figs, n, err := formatCharts(dir, info, f, slug(f.name)+"-")
		if err != nil {
			return nil, nil, nil, err
		}
		sections, all, notes = append(sections, formatSection(f, figs)), append(all, figs...), append(notes, n...)
	}
	return sections, all, notes, nil
}
