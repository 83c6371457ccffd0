package report

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/format"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/decodebench/decodebench/bench/sweep"
)

// Output formats of a comparison on stdout.
const (
	FormatTable    = format.Table // the names every command's --format shares
	FormatMarkdown = format.MD
	FormatJSON     = format.JSON
)

// CompareFormats are the formats WriteCompareText takes.
var CompareFormats = []string{FormatTable, FormatMarkdown, FormatJSON}

var markdownTable = format.Markdown // WriteCompareText's parameter format hides the package

// verdictOrder is the order verdicts are counted in.
var verdictOrder = []string{VerdictSlower, VerdictUnsure, VerdictSame, VerdictFaster}

// Method says how the intervals and verdicts are made, in one paragraph.
func (g Gate) Method() string {
	return fmt.Sprintf("B / A is B's tokens/s over A's (A's median time over B's; above 1, B is faster). Its %s interval is a "+
		"percentile bootstrap of the kept samples (%d resamples of every kernel measurement, fixed seed; a step resamples "+
		"each of its kernels and adds calls x median, plus its bounded small ops). Verdicts against ±%s: SLOWER when the "+
		"whole interval is below %s, FASTER when it is all above %s, SAME when it is all within [%s, %s], UNSURE when it "+
		"holds either edge (the samples cannot tell) or there are no samples.",
		percentText(g.Confidence), g.Resamples, percentText(g.Threshold), ratioText(1-g.Threshold), ratioText(1+g.Threshold),
		ratioText(1-g.Threshold), ratioText(1+g.Threshold))
}

func percentText(f float64) string { return strconv.FormatFloat(f*100, 'g', 4, 64) + "%" }

func ratioText(r float64) string { return strconv.FormatFloat(r, 'f', 3, 64) }

// intervalText writes an interval, or a dash where there is none.
func intervalText(iv Interval, ok bool) string {
	if !ok {
		return "–"
	}
	return "[" + ratioText(iv.Lo) + ", " + ratioText(iv.Hi) + "]"
}

// countsText writes verdict counts: "2 SLOWER, 10 SAME".
func countsText(n map[string]int) string {
	var parts []string
	for _, v := range verdictOrder {
		if n[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[v], v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// unpairedText says where a configuration is ok and what the other run has.
func unpairedText(u Unpaired) string {
	other := "B"
	if u.In == "B" {
		other = "A"
	}
	return fmt.Sprintf("%s batch %d context %s: ok in %s only (%s: %s)", u.Model, u.Batch, contextLabel(u.Context), u.In, other, u.Other)
}

// configRows and kernelRows are the comparison's tables as text cells, shared by the table and
// Markdown outputs.
func (c Comparison) configRows() (header []string, rows [][]string) {
	header = []string{"model", "batch", "context", "A per-server tok/s", "B per-server tok/s", "B / A", percentText(c.Gate.Confidence) + " interval", "verdict"}
	for _, p := range c.Pairs {
		rows = append(rows, []string{p.Model, strconv.Itoa(p.Batch), contextLabel(p.Context),
			fmtNum(p.A.PerServerTokensPerSec) + star(p.A.Throttled), fmtNum(p.B.PerServerTokensPerSec) + star(p.B.Throttled),
			ratioText(p.ServerRatio()), intervalText(p.Interval, p.HasInterval), p.Verdict})
	}
	return header, rows
}

func (c Comparison) kernelRows() (header []string, rows [][]string) {
	header = []string{"kernel", "shape", "configs", "A median µs", "B median µs", "B / A", percentText(c.Gate.Confidence) + " interval", "verdict"}
	for _, k := range c.Kernels {
		rows = append(rows, []string{strings.Join(k.Names, ","), k.Label, strconv.Itoa(k.Configurations),
			fmtNum(k.MedianA * 1e6), fmtNum(k.MedianB * 1e6), ratioText(k.Ratio()), intervalText(k.Interval, k.HasInterval), k.Verdict})
	}
	return header, rows
}

// summaryLines are the closing lines of the table and Markdown outputs.
func (c Comparison) summaryLines() []string {
	lines := []string{
		fmt.Sprintf("%d configuration(s) in both; geometric mean of B / A: %.3f", len(c.Pairs), c.GeoMeanRatio()),
		fmt.Sprintf("configurations: %s; kernels: %s", countsText(c.ConfigVerdicts()), countsText(c.KernelVerdicts())),
	}
	if c.Regressed() {
		lines = append(lines, fmt.Sprintf("SLOWER: B is slower than A by more than %s somewhere (exit status 1)", percentText(c.Gate.Threshold)))
	}
	if c.InfoA.Backend.Emulated || c.InfoB.Backend.Emulated {
		lines = append(lines, "EMULATED: a run in this comparison ran on the CPU emulator; its times are not a speed.")
	}
	return lines
}

// noIntervalLines say, once each, why some ratios have no interval.
func (c Comparison) noIntervalLines() []string {
	var why []string
	for _, p := range c.Pairs {
		if p.NoInterval != "" && !slices.Contains(why, p.NoInterval) {
			why = append(why, p.NoInterval)
		}
	}
	if len(why) > 3 {
		why = append(why[:3], fmt.Sprintf("and %d more", len(why)-3))
	}
	return why
}

// WriteCompareText writes the comparison to w as an aligned table, Markdown or JSON.
func WriteCompareText(w io.Writer, c Comparison, name string) error {
	switch name {
	case FormatJSON:
		return format.WriteJSON(w, c.JSON())
	case FormatTable, FormatMarkdown:
	default:
		return fmt.Errorf("format %q: accepted are %s", name, strings.Join(CompareFormats, ", "))
	}
	md := name == FormatMarkdown
	var b strings.Builder
	if md {
		fmt.Fprintf(&b, "# decodebench compare\n\n- **A**: %s (`%s`)\n- **B**: %s (`%s`)\n\n%s\n\n", c.LabelA, c.DirA, c.LabelB, c.DirB, c.Gate.Method())
	} else {
		fmt.Fprintf(&b, "A: %s (%s)\nB: %s (%s)\n%s\n\n", c.LabelA, c.DirA, c.LabelB, c.DirB, c.Gate.Method())
	}
	writeRows := func(header []string, rows [][]string) {
		if md {
			markdownTable(&b, header, rows, nil)
			b.WriteString("\n")
			return
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
		b.WriteString("\n")
	}
	heading := func(s string) {
		if md {
			b.WriteString("## " + s + "\n\n")
		} else {
			b.WriteString(s + ":\n")
		}
	}
	heading("Configurations in both runs (* = taken while the card throttled)")
	writeRows(c.configRows())
	if len(c.Kernels) > 0 {
		heading("Kernel measurements")
		writeRows(c.kernelRows())
	}
	if len(c.Unpaired) > 0 {
		heading("Configurations ok in one run only (not compared)")
		for _, u := range c.Unpaired {
			if md {
				b.WriteString("- ")
			} else {
				b.WriteString("  ")
			}
			b.WriteString(unpairedText(u) + "\n")
		}
		b.WriteString("\n")
	}
	if why := c.noIntervalLines(); len(why) > 0 {
		b.WriteString("No interval (UNSURE): " + strings.Join(why, "; ") + "\n\n")
	}
	for _, n := range c.Notes {
		b.WriteString("Note: " + n + "\n")
	}
	for _, l := range c.summaryLines() {
		if md {
			b.WriteString("**" + l + "**\n\n")
		} else {
			b.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// CompareJSON is compare --format json; its names are the documented output.
type CompareJSON struct {
	A              CompareRunJSON      `json:"a"`
	B              CompareRunJSON      `json:"b"`
	Threshold      float64             `json:"threshold"`
	Confidence     float64             `json:"confidence"`
	Resamples      int                 `json:"resamples"`
	Method         string              `json:"method"`
	Regressed      bool                `json:"regressed"` // some configuration or kernel is SLOWER: exit status 1
	GeoMeanRatio   float64             `json:"geomean_ratio"`
	Verdicts       map[string]int      `json:"verdicts"`
	KernelVerdicts map[string]int      `json:"kernel_verdicts"`
	Configurations []CompareConfigJSON `json:"configurations"`
	Kernels        []CompareKernelJSON `json:"kernels"`
	OnlyInOneRun   []CompareOnlyJSON   `json:"only_in_one_run"`
	Notes          []string            `json:"notes,omitempty"`
}

// CompareRunJSON is one side of a comparison.
type CompareRunJSON struct {
	Label    string    `json:"label"`
	Dir      string    `json:"dir"`
	Card     string    `json:"card"`
	UUID     string    `json:"uuid,omitempty"`
	Model    string    `json:"model"`
	Started  time.Time `json:"started"`
	Emulated bool      `json:"emulated"`
}

// CompareConfigJSON is one configuration in both runs.
type CompareConfigJSON struct {
	Model        string    `json:"model"`
	Batch        int       `json:"batch"`
	Context      int       `json:"context"`
	APerServer   float64   `json:"a_per_server_tokens_per_s"`
	BPerServer   float64   `json:"b_per_server_tokens_per_s"`
	Ratio        float64   `json:"ratio"`
	Interval     *Interval `json:"interval,omitempty"`
	NoInterval   string    `json:"no_interval,omitempty"`
	Verdict      string    `json:"verdict"`
	AThrottled   bool      `json:"a_throttled"`
	BThrottled   bool      `json:"b_throttled"`
	AStepSeconds float64   `json:"a_step_seconds"`
	BStepSeconds float64   `json:"b_step_seconds"`
}

// CompareKernelJSON is one kernel measurement of A beside B's.
type CompareKernelJSON struct {
	Names          []string  `json:"kernels"`
	Shape          string    `json:"shape"`
	KeyA           string    `json:"a_key"`
	KeyB           string    `json:"b_key"`
	Configurations int       `json:"configurations"`
	AMedianSeconds float64   `json:"a_median_seconds"`
	BMedianSeconds float64   `json:"b_median_seconds"`
	ASamples       int       `json:"a_samples"`
	BSamples       int       `json:"b_samples"`
	Ratio          float64   `json:"ratio"`
	Interval       *Interval `json:"interval,omitempty"`
	NoInterval     string    `json:"no_interval,omitempty"`
	Verdict        string    `json:"verdict"`
}

// CompareOnlyJSON is a configuration ok in one run only.
type CompareOnlyJSON struct {
	Model   string `json:"model"`
	Batch   int    `json:"batch"`
	Context int    `json:"context"`
	OkIn    string `json:"ok_in"` // "A" or "B"
	Other   string `json:"other"` // the other run's status: absent, failed: ..., skipped: ...
}

// JSON is the comparison as compare --format json writes it.
func (c Comparison) JSON() CompareJSON {
	run := func(label, dir string, info sweep.RunInfo) CompareRunJSON {
		return CompareRunJSON{Label: label, Dir: dir, Card: info.Card.Name, UUID: info.Card.UUID, Model: runModels(info),
			Started: info.Started, Emulated: info.Backend.Emulated}
	}
	j := CompareJSON{A: run(c.LabelA, c.DirA, c.InfoA), B: run(c.LabelB, c.DirB, c.InfoB),
		Threshold: c.Gate.Threshold, Confidence: c.Gate.Confidence, Resamples: c.Gate.Resamples, Method: c.Gate.Method(),
		Regressed: c.Regressed(), GeoMeanRatio: c.GeoMeanRatio(), Verdicts: c.ConfigVerdicts(), KernelVerdicts: c.KernelVerdicts(),
		Configurations: []CompareConfigJSON{}, Kernels: []CompareKernelJSON{}, OnlyInOneRun: []CompareOnlyJSON{}, Notes: c.Notes}
	for _, p := range c.Pairs {
		row := CompareConfigJSON{Model: p.Model, Batch: p.Batch, Context: p.Context, APerServer: p.A.PerServerTokensPerSec,
			BPerServer: p.B.PerServerTokensPerSec, Ratio: p.ServerRatio(), NoInterval: p.NoInterval, Verdict: p.Verdict,
			AThrottled: p.A.Throttled, BThrottled: p.B.Throttled, AStepSeconds: p.A.StepSeconds, BStepSeconds: p.B.StepSeconds}
		if p.HasInterval {
			iv := p.Interval
			row.Interval = &iv
		}
		j.Configurations = append(j.Configurations, row)
	}
	for _, k := range c.Kernels {
		row := CompareKernelJSON{Names: k.Names, Shape: k.Label, KeyA: k.KeyA, KeyB: k.KeyB, Configurations: k.Configurations,
			AMedianSeconds: k.MedianA, BMedianSeconds: k.MedianB, ASamples: k.SamplesA, BSamples: k.SamplesB,
			Ratio: k.Ratio(), NoInterval: k.NoInterval, Verdict: k.Verdict}
		if k.HasInterval {
			iv := k.Interval
			row.Interval = &iv
		}
		j.Kernels = append(j.Kernels, row)
	}
	for _, u := range c.Unpaired {
		j.OnlyInOneRun = append(j.OnlyInOneRun, CompareOnlyJSON{Model: u.Model, Batch: u.Batch, Context: u.Context, OkIn: u.In, Other: u.Other})
	}
	return j
}
