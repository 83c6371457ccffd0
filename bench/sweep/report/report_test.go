package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/telemetry"
)

func telemetryThrottled() telemetry.Summary {
	return telemetry.Summary{Readings: 5, SMClockMHzMin: 1500, SMClockMHzMax: 1980, Throttled: true, ThrottledReadings: 2,
		ThrottleReasons: nvml.ClocksEventReasonSwPowerCap, ThrottleText: []string{"SW Power Cap"}}
}

func h200Run(t *testing.T) synthRun {
	return synthRun{card: "NVIDIA H200", uuid: "GPU-h200", model: llama8b(t),
		batches: []int{1, 2, 4, 8, 16, 32, 64, 128, 256}, contexts: []int{1024, 4096, 16384, 32768},
		bandwidth: 4.3e12, flops: 700e12, efficiency: 0.8, failAt: [2]int{8, 4096}, throttleAt: [2]int{64, 1024}}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	h200Run(t).write(t, dir)
	w, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{HTMLFile, MarkdownFile, sweep.CSVFile, "plots/tokens_vs_batch.png", "plots/tokens_vs_batch.svg",
		"plots/tradeoff.svg", "plots/tokens_vs_context_server.png", "plots/tokens_vs_context_request.png",
		"plots/efficiency_measured.png", "plots/efficiency_datasheet.png", "plots/roofline.png", "plots/roofline.svg"} {
		if !exists(filepath.Join(dir, name)) {
			t.Errorf("%s not written (wrote %v, notes %v)", name, w.Files, w.Notes)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, HTMLFile))
	for _, want := range []string{"NVIDIA H200", "GPU-h200", "580.159.03", `<svg role="img" aria-label="Tokens/s against batch size"`, "@font-face { font-family: 'Liberation Sans'; font-weight: bold;", "verification failed: 12 NaN outputs",
		"1 of 36 configurations failed", "taken while the card throttled", `class="throttled"`, `class="failed"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html does not say %q", want)
		}
	}
	for _, unwanted := range []string{"http://", "https://", "EMULATED"} {
		if strings.Contains(string(html), unwanted) {
			t.Errorf("report.html contains %q", unwanted)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if !strings.Contains(string(md), "![Tokens/s against batch size](plots/tokens_vs_batch.png)") || !strings.Contains(string(md), "| batch | context |") {
		t.Errorf("report.md lacks its figures or tables:\n%.2000s", md)
	}

	f, _ := os.Open(filepath.Join(dir, sweep.CSVFile))
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+36 || rows[0][0] != "card" || rows[0][5] != "key" || !strings.HasSuffix(rows[0][len(rows[0])-1], "_step_seconds") {
		t.Errorf("results.csv: %d rows, header %v", len(rows), rows[0])
	}
}

func TestEmulatedReportSaysSoLoudly(t *testing.T) {
	dir := t.TempDir()
	run := h200Run(t)
	run.emulated, run.batches, run.contexts = true, []int{1, 2}, []int{1024}
	run.write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, HTMLFile))
	if !strings.Contains(string(html), "EMULATED RUN: THESE TIMES ARE NOT A SPEED") || !strings.Contains(string(html), `class="alert danger"`) {
		t.Errorf("an emulated report does not warn at the top")
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "plots", "tokens_vs_batch.svg"))
	if !strings.Contains(string(svg), "EMULATED") {
		t.Errorf("an emulated chart does not say so")
	}
}

func TestCompare(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "h100"), filepath.Join(t.TempDir(), "h200")
	h100 := h200Run(t)
	h100.card, h100.uuid, h100.bandwidth, h100.flops = "NVIDIA H100 80GB HBM3", "GPU-h100", 3.0e12, 700e12
	h100.contexts = []int{1024, 4096, 8192, 16384, 32768}
	h100.write(t, a)
	h200Run(t).write(t, b)
	c, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	// The failed H200 configuration and the 8k contexts only A has are not paired.
	if !strings.HasPrefix(c.LabelA, "NVIDIA H100 80GB HBM3 · ") || !strings.HasPrefix(c.LabelB, "NVIDIA H200 · ") || c.OnlyA == 0 || len(c.Pairs) == 0 {
		t.Fatalf("labels %q %q, %d pairs, only A %d", c.LabelA, c.LabelB, len(c.Pairs), c.OnlyA)
	}
	for _, p := range c.Pairs {
		if p.ServerRatio() <= 1 {
			t.Errorf("%d/%d: the faster card's ratio is %g", p.Batch, p.Context, p.ServerRatio())
		}
	}
	out := filepath.Join(t.TempDir(), "cmp")
	w, err := WriteComparison(c, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CompareHTMLFile, CompareMarkdownFile, CompareCSVFile, "plots/compare_tokens_vs_batch_ctx1k.png", "plots/compare_tokens_vs_batch_ctx32k.svg"} {
		if !exists(filepath.Join(out, name)) {
			t.Errorf("%s not written (%v)", name, w.Files)
		}
	}
	html, _ := os.ReadFile(filepath.Join(out, CompareHTMLFile))
	if !strings.Contains(string(html), "B / A") || !strings.Contains(string(html), "GPU-h100") {
		t.Errorf("compare.html lacks the ratio table or the cards")
	}
	if _, err := Compare(a, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a decodebench run directory") {
		t.Errorf("Compare with an empty directory: %v", err)
	}
}
