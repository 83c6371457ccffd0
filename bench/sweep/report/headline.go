package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/plots"
)

// StepsFile holds whole decode steps timed end to end (one launch sequence per step, as an
// engine runs it), beside the composed steps of results.jsonl. Optional: a run without it has
// no end-to-end line in its headline.
const StepsFile = "steps.jsonl"

// WholeStep is one whole decode step timed end to end, as the headline reads it from
// StepsFile: the configuration it belongs to and its time.
type WholeStep struct {
	ModelKey    string
	Model       string
	Batch       int
	Context     int
	StepSeconds float64
}

// wholeStepLine is what the headline needs of a line of StepsFile (bench/step's record): the
// configuration, the status, and the time of each mode, the graph's taken before the eager
// one's (a graph is how an engine runs a decode step).
type wholeStepLine struct {
	ModelKey string        `json:"model_key"`
	Model    string        `json:"model"`
	Batch    int           `json:"batch"`
	Context  int           `json:"context"`
	Status   string        `json:"status"`
	Graph    wholeStepTime `json:"graph"`
	Eager    wholeStepTime `json:"eager"`
}

type wholeStepTime struct {
	Status      string  `json:"status"`
	StepSeconds float64 `json:"step_seconds"`
}

func (t wholeStepTime) ok() bool { return t.Status == measure.StatusOK && t.StepSeconds > 0 }

// Headline is what a reader should see first about one model of a run: the card, the model,
// the two tokens/s that matter (one stream at batch 1, the card's best total), how close the
// run came to the roofline, and the warnings that change how to read them. Every place that
// shows a headline (the end of a sweep, report.html, report.md) computes it here.
type Headline struct {
	Card     string
	Model    string
	Emulated bool

	// Warnings come before the numbers: each counts the configurations it concerns.
	Warnings []string

	// Single: the ok configuration of the smallest batch (1 when measured) at its shortest
	// context, for its per-request tokens/s. Peak: the ok configuration of the highest
	// per-server tokens/s. Both nil when nothing was measured ok.
	Single, Peak *sweep.Record

	// Medians over the ok configurations of the roofline fraction against each ceiling; 0
	// where that ceiling is unknown (the emulator has no datasheet).
	MedianDatasheet, MedianMeasured float64
	OK, Total                       int

	// EndToEnd: the median over matched configurations of composed step time / whole step
	// time (1: the composition is exact; below 1: the engine loses time between kernels), from
	// EndToEndSteps configurations. 0 when the run has no whole-step records.
	EndToEnd      float64
	EndToEndSteps int

	Verdict string
}

// Headlines reads the run directory dir and returns one headline per model.
func Headlines(dir string) ([]Headline, error) {
	p, err := sweep.Load(dir)
	if err != nil {
		return nil, err
	}
	steps, err := ReadWholeSteps(filepath.Join(dir, StepsFile))
	if err != nil {
		return nil, err
	}
	return headlinesOf(p.Info, p.Records, steps), nil
}

// ReadWholeSteps reads a steps.jsonl: the ok records with a graph or an eager time. A missing
// file is no steps and no error; lines that do not parse are left out: the headline is not the
// place to refuse a run.
func ReadWholeSteps(path string) ([]WholeStep, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []WholeStep
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l wholeStepLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Status != measure.StatusOK {
			continue
		}
		s := WholeStep{ModelKey: l.ModelKey, Model: l.Model, Batch: l.Batch, Context: l.Context}
		switch {
		case l.Graph.ok():
			s.StepSeconds = l.Graph.StepSeconds
		case l.Eager.ok():
			s.StepSeconds = l.Eager.StepSeconds
		default:
			continue
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func headlinesOf(info sweep.RunInfo, records []sweep.Record, steps []WholeStep) []Headline {
	var out []Headline
	for _, m := range byModel(info, records) {
		name := m.shape.Name
		if name == "" {
			name = m.key
		}
		var mine []WholeStep
		for _, s := range steps {
			if s.ModelKey == m.key || (s.ModelKey == "" && s.Model == name) {
				mine = append(mine, s)
			}
		}
		out = append(out, HeadlineOf(cardName(info), name, info.Backend.Emulated, m.records, mine))
	}
	return out
}

// HeadlineOf computes the headline of one model's records (every status) and its whole steps
// (nil when none were timed).
func HeadlineOf(card, modelName string, emulated bool, records []sweep.Record, steps []WholeStep) Headline {
	h := Headline{Card: card, Model: modelName, Emulated: emulated, Total: len(records)}
	var ok []sweep.Record
	var failed, skipped, throttled, unconverged int
	for _, r := range records {
		switch r.Status {
		case measure.StatusOK:
			ok = append(ok, r)
			if r.Throttled {
				throttled++
			}
			if !r.Converged {
				unconverged++
			}
		case measure.StatusFailed:
			failed++
		default:
			skipped++
		}
	}
	h.OK = len(ok)
	of := func(n int, what string) string {
		return fmt.Sprintf("%d of %d configurations %s", n, len(records), what)
	}
	if emulated {
		h.Warnings = append(h.Warnings, "EMULATED on the CPU: every time and tokens/s below is the emulator's, not a speed")
	}
	if failed > 0 {
		h.Warnings = append(h.Warnings, of(failed, "failed (verification or a kernel error): never counted below"))
	}
	if skipped > 0 {
		h.Warnings = append(h.Warnings, of(skipped, "skipped (do not fit or not supported)"))
	}
	if throttled > 0 {
		h.Warnings = append(h.Warnings, of(throttled, "taken while the card throttled: may be slower than it can do"))
	}
	if unconverged > 0 {
		h.Warnings = append(h.Warnings, of(unconverged, "have a kernel whose spread did not converge: noisier than the method asks"))
	}

	if len(ok) == 0 {
		h.Verdict = "Nothing was measured ok, so there is no speed to report: see why under Failed and skipped."
		if skipped == len(records) && len(records) > 0 {
			h.Verdict = "Nothing was measured: every configuration was skipped; a smaller model, batch or context fits."
		}
		return h
	}
	single := slices.MinFunc(ok, func(a, b sweep.Record) int {
		return cmp.Or(cmp.Compare(a.Batch, b.Batch), cmp.Compare(a.Context, b.Context))
	})
	peak := slices.MaxFunc(ok, func(a, b sweep.Record) int {
		// The highest rate; on a tie, the smaller batch (MaxFunc keeps the first maximum).
		return cmp.Or(cmp.Compare(a.PerServerTokensPerSec, b.PerServerTokensPerSec), cmp.Compare(b.Batch, a.Batch), cmp.Compare(b.Context, a.Context))
	})
	h.Single, h.Peak = &single, &peak
	h.MedianDatasheet = medianOf(ok, func(r sweep.Record) float64 { return r.RooflineFractionDatasheet })
	h.MedianMeasured = medianOf(ok, func(r sweep.Record) float64 { return r.RooflineFractionMeasured })

	byKey := map[[2]int]sweep.Record{}
	for _, r := range ok {
		byKey[[2]int{r.Batch, r.Context}] = r
	}
	var ratios []float64
	for _, s := range steps {
		if r, found := byKey[[2]int{s.Batch, s.Context}]; found && r.StepSeconds > 0 {
			ratios = append(ratios, r.StepSeconds/s.StepSeconds)
		}
	}
	if len(ratios) > 0 {
		h.EndToEnd, h.EndToEndSteps = timing.Median(ratios), len(ratios)
	}
	h.Verdict = verdict(h)
	return h
}

func medianOf(records []sweep.Record, f func(sweep.Record) float64) float64 {
	var v []float64
	for _, r := range records {
		if x := f(r); x > 0 {
			v = append(v, x)
		}
	}
	return timing.Median(v)
}

// verdict is one sentence on how to read the numbers.
func verdict(h Headline) string {
	if h.Emulated {
		return "The kernels ran correctly on the CPU emulator; run this on a GPU for a speed."
	}
	frac, ceiling := h.MedianMeasured, "measured"
	if frac <= 0 {
		frac, ceiling = h.MedianDatasheet, "datasheet"
	}
	gain := ""
	if h.Single.PerServerTokensPerSec > 0 && h.Peak.Batch > h.Single.Batch {
		gain = fmt.Sprintf("; batching to %d serves %.3gx the tokens of batch %d", h.Peak.Batch, h.Peak.PerServerTokensPerSec/h.Single.PerServerTokensPerSec, h.Single.Batch)
	}
	var s string
	switch {
	case frac <= 0:
		s = "No ceiling is known for this card, so how close these rates are to what it could do is not said" + gain
	case frac >= 0.85:
		s = fmt.Sprintf("The steps run at the roofline (median %s of the %s bound): the card, not the kernels, sets these rates%s", pct(frac), ceiling, gain)
	case frac >= 0.6:
		s = fmt.Sprintf("The steps run near the roofline (median %s of the %s bound)%s", pct(frac), ceiling, gain)
	default:
		s = fmt.Sprintf("The steps run well below the roofline (median %s of the %s bound): the kernels leave speed on the table%s", pct(frac), ceiling, gain)
	}
	if len(h.Warnings) > 0 {
		s += "; read it with the warnings above"
	}
	return s + "."
}

// facts are the headline's numbers as name and value.
func (h Headline) facts() []plots.Fact {
	f := []plots.Fact{fact("Card", h.Card), fact("Model", h.Model)}
	if h.Single == nil {
		return append(f, fact("Measured", fmt.Sprintf("%d of %d configurations ok", h.OK, h.Total)))
	}
	s, p := h.Single, h.Peak
	f = append(f,
		fact(fmt.Sprintf("Per request at batch %d, context %s", s.Batch, contextLabel(s.Context)), fmt.Sprintf("%s tokens/s (step %s ms)", fmtNum(s.PerRequestTokensPerSec), fmtNum(s.StepSeconds*1e3))),
		fact("Peak per server", fmt.Sprintf("%s tokens/s at batch %d, context %s (%s tokens/s per request)", fmtNum(p.PerServerTokensPerSec), p.Batch, contextLabel(p.Context), fmtNum(p.PerRequestTokensPerSec))),
		fact("Roofline, median", fmt.Sprintf("%s of the datasheet bound, %s of the measured bound (over %d ok configurations)", pct(h.MedianDatasheet), pct(h.MedianMeasured), h.OK)),
	)
	if h.EndToEndSteps > 0 {
		f = append(f, fact("End to end", fmt.Sprintf("whole steps timed end to end reach %s of the composed rate (median of %d configurations)", pct(h.EndToEnd), h.EndToEndSteps)))
	}
	return f
}

// Lines is the headline as the terminal prints it: the warnings, then one line per number and
// the verdict.
func (h Headline) Lines() []string {
	var out []string
	for _, w := range h.Warnings {
		out = append(out, "WARNING: "+w)
	}
	for _, f := range h.facts() {
		out = append(out, f.Name+": "+f.Value)
	}
	return append(out, h.Verdict)
}

// Section is the headline as the report's first section: the warnings, then the numbers and
// the verdict.
func (h Headline) Section(named bool) plots.Section {
	heading := "Headline"
	if named {
		heading += ": " + h.Model
	}
	s := plots.Section{Heading: heading, Facts: append(h.facts(), fact("Verdict", h.Verdict))}
	for _, w := range h.Warnings {
		s.Paragraphs = append(s.Paragraphs, "Warning: "+w+".")
	}
	return s
}
