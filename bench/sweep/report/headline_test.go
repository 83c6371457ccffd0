package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
)

// The headline's numbers are read off the records by hand here: batch 1 at the shortest
// context, the highest per-server rate (which the synthetic H200 reaches at the largest batch
// that fits at 1k), the medians of both fractions, and each warning counted.
func TestHeadlineNumbers(t *testing.T) {
	dir := t.TempDir()
	h200Run(t).write(t, dir)
	hs, err := Headlines(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 {
		t.Fatalf("%d headlines for one model", len(hs))
	}
	h := hs[0]
	p, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var best sweep.Record
	var failed, skipped, ok int
	for _, r := range p.Records {
		switch r.Status {
		case measure.StatusOK:
			ok++
			if r.PerServerTokensPerSec > best.PerServerTokensPerSec {
				best = r
			}
		case measure.StatusFailed:
			failed++
		default:
			skipped++
		}
	}
	if h.Single == nil || h.Single.Batch != 1 || h.Single.Context != 1024 {
		t.Fatalf("single stream: %+v, want batch 1 at 1k", h.Single)
	}
	if h.Peak == nil || h.Peak.Key != best.Key || h.Peak.PerServerTokensPerSec != best.PerServerTokensPerSec {
		t.Fatalf("peak: %s, want %s at %g tokens/s", keyOf(h.Peak), best.Key, best.PerServerTokensPerSec)
	}
	if h.Peak.Batch != 256 || h.Peak.Context != 1024 {
		t.Errorf("peak at batch %d context %d; the synthetic card's best is batch 256 at 1k", h.Peak.Batch, h.Peak.Context)
	}
	if h.Peak.PerServerTokensPerSec <= h.Single.PerServerTokensPerSec*10 {
		t.Errorf("peak %g tokens/s is not well above batch 1's %g: taken from the wrong level?", h.Peak.PerServerTokensPerSec, h.Single.PerServerTokensPerSec)
	}
	// The synthetic kernels run at 80% of the measured roofline, less a 3 µs launch each and
	// the small ops: the median lies a little under 0.8.
	if h.MedianMeasured < 0.6 || h.MedianMeasured > 0.8 {
		t.Errorf("median fraction of the measured roofline %g, want just under 0.8", h.MedianMeasured)
	}
	if !(h.MedianDatasheet > 0 && h.MedianDatasheet < h.MedianMeasured) {
		t.Errorf("median fraction of the datasheet %g: want above 0 and below the measured one (%g), the datasheet ceiling being higher", h.MedianDatasheet, h.MedianMeasured)
	}
	if h.OK != ok || h.Total != len(p.Records) {
		t.Errorf("ok %d of %d, want %d of %d", h.OK, h.Total, ok, len(p.Records))
	}
	warnings := strings.Join(h.Warnings, "\n")
	for _, want := range []string{
		fmt.Sprintf("%d of %d configurations failed", failed, len(p.Records)),
		fmt.Sprintf("%d of %d configurations skipped", skipped, len(p.Records)),
		fmt.Sprintf("1 of %d configurations taken while the card throttled", len(p.Records)),
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings %q do not say %q", warnings, want)
		}
	}
	if strings.Contains(warnings, "converge") || h.EndToEndSteps != 0 {
		t.Errorf("a warning of unconverged kernels or an end-to-end line where there are none: %q, %d steps", warnings, h.EndToEndSteps)
	}
	if !strings.Contains(h.Verdict, "near the roofline") || !strings.Contains(h.Verdict, "warnings above") {
		t.Errorf("verdict %q", h.Verdict)
	}
	text := strings.Join(h.Lines(), "\n")
	for _, want := range []string{"Card: NVIDIA H200", "Model: Llama-3-8B", "Per request at batch 1, context 1k: " + fmtNum(h.Single.PerRequestTokensPerSec),
		"Peak per server: " + fmtNum(best.PerServerTokensPerSec) + " tokens/s at batch 256, context 1k", "WARNING: 1 of"} {
		if !strings.Contains(text, want) {
			t.Errorf("headline text lacks %q:\n%s", want, text)
		}
	}
}

// With whole-step records the headline sets them against the composed steps; a run without
// them leaves the line out (above).
func TestHeadlineEndToEnd(t *testing.T) {
	dir := t.TempDir()
	h200Run(t).write(t, dir)
	p, _ := sweep.Load(dir)
	var lines []string
	for _, r := range p.Records {
		if r.Status == measure.StatusOK && r.Context == 1024 && r.Batch <= 4 {
			// Whole steps a quarter slower than composed: the ratio is 0.8.
			// The graph's time where it has one, else the eager one's.
			graph := fmt.Sprintf(`{"status":"ok","step_seconds":%g}`, r.StepSeconds*1.25)
			eager := fmt.Sprintf(`{"status":"ok","step_seconds":%g}`, r.StepSeconds*2)
			if r.Batch == 4 {
				graph, eager = `{"status":"skipped","step_seconds":0}`, graph
			}
			lines = append(lines, fmt.Sprintf(`{"model_key":%q,"model":%q,"batch":%d,"context":%d,"status":"ok","graph":%s,"eager":%s}`,
				r.ModelKey, r.Model, r.Batch, r.Context, graph, eager))
		}
	}
	lines = append(lines, `{"model":"other","batch":1,"context":1024,"status":"ok","graph":{"status":"ok","step_seconds":1}}`, `not json`,
		`{"batch":2,"context":1024,"status":"failed","graph":{"status":"failed","step_seconds":0}}`)
	os.WriteFile(filepath.Join(dir, StepsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	hs, err := Headlines(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := hs[0]
	if h.EndToEndSteps != 3 || math.Abs(h.EndToEnd-0.8) > 1e-9 {
		t.Fatalf("end to end %g over %d steps, want 0.8 over 3", h.EndToEnd, h.EndToEndSteps)
	}
	if !strings.Contains(strings.Join(h.Lines(), "\n"), "End to end: whole steps timed end to end reach 80.0% of the composed rate") {
		t.Errorf("no end-to-end line:\n%s", strings.Join(h.Lines(), "\n"))
	}
}

func TestHeadlineNothingMeasured(t *testing.T) {
	recs := []sweep.Record{{Status: measure.StatusSkipped, Batch: 1, Context: 1024}, {Status: measure.StatusSkipped, Batch: 2, Context: 1024}}
	h := HeadlineOf("emu", "Llama-3-8B", true, recs, nil)
	if h.Single != nil || h.Peak != nil || !strings.Contains(h.Verdict, "every configuration was skipped") {
		t.Fatalf("%+v", h)
	}
	if w := strings.Join(h.Warnings, "; "); !strings.Contains(w, "EMULATED") || !strings.Contains(w, "2 of 2 configurations skipped") {
		t.Errorf("warnings %q", w)
	}
	// An unconverged ok record is counted.
	recs = append(recs, sweep.Record{Status: measure.StatusOK, Batch: 1, Context: 1024, StepSeconds: 0.01, PerRequestTokensPerSec: 100, PerServerTokensPerSec: 100})
	h = HeadlineOf("card", "m", false, recs, nil)
	if !strings.Contains(strings.Join(h.Warnings, "; "), "1 of 3 configurations have a kernel whose spread did not converge") {
		t.Errorf("warnings %q", h.Warnings)
	}
	if !strings.Contains(h.Verdict, "No ceiling is known") {
		t.Errorf("verdict %q", h.Verdict)
	}
}

// The headline opens report.html and report.md: before the card and the method.
func TestHeadlineFirstInReport(t *testing.T) {
	dir := t.TempDir()
	h200Run(t).write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, headline, card string }{
		{HTMLFile, `<h2>Headline</h2>`, `<h2>Card</h2>`},
		{MarkdownFile, "## Headline", "## Card"},
	} {
		data, _ := os.ReadFile(filepath.Join(dir, c.file))
		s := string(data)
		h, card := strings.Index(s, c.headline), strings.Index(s, c.card)
		if h < 0 || card < 0 || h > card {
			t.Errorf("%s: headline at %d, card at %d: want the headline first", c.file, h, card)
		}
		if !strings.Contains(s[h:card], "Peak per server") || !strings.Contains(s[h:card], "configurations failed") {
			t.Errorf("%s: the headline lacks the peak or the warnings:\n%s", c.file, s[h:card])
		}
	}
}

func keyOf(r *sweep.Record) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s at %g tokens/s per server", r.Key, r.PerServerTokensPerSec)
}
