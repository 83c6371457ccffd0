package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// synthBox is one box's report: eight H100 SXM cards, every check passing, the read bandwidth
// of card i at reads[i] x datasheet (0.93 when reads is short).
func synthBox(t *testing.T, host string, cards int, reads map[int]float64, finished time.Time) Report {
	t.Helper()
	s := standard(t)
	r := Report{Schema: ReportSchema, Hostname: host, Backend: "cuda", Suite: s.Name, FinishedAt: finished}
	for i := range cards {
		run := goodH100()
		run.readBW = 0.93 * 3.35e12
		if f, ok := reads[i]; ok {
			run.readBW = f * 3.35e12
		}
		plan, out := runSuite(t, s, run)
		checks, gates := PerformanceChecks(CardKind{Spec: gpuRow(t, "h100-sxm")}, s, plan, out, DefaultThresholds())
		checks = append(checks, Check{ID: "health.ecc_errors", Category: CategoryHealth, Verdict: Pass, Message: "No uncorrectable ECC errors."})
		r.Cards = append(r.Cards, Card{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", host, i), Serial: fmt.Sprintf("SN-%s-%d", host, i),
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i), Name: "NVIDIA H100 80GB HBM3", SpecKey: "h100-sxm",
			Checks: checks, Gates: gates})
	}
	AddBoxOutliers(r.Cards, BuiltinThresholds())
	r.Finish()
	return r
}

func writeReports(t *testing.T, dir string, reports ...Report) {
	t.Helper()
	for i, r := range reports {
		sub := filepath.Join(dir, fmt.Sprintf("job%d", i%2)) // nested: fleet walks the tree
		os.MkdirAll(sub, 0o755)
		if err := WriteReport(filepath.Join(sub, r.Hostname+".json"), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFleetFindsThePlantedCards(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	slow := synthBox(t, "node02", 8, map[int]float64{5: 0.87}, t0) // passes its gate; 6.5% below the fleet
	failed := synthBox(t, "node03", 8, nil, t0)
	failed.Cards[1].Checks = append(failed.Cards[1].Checks, Check{ID: "health.row_remapping", Category: CategoryHealth, Verdict: Fail,
		Message: "A row remap is pending: reset the GPU."})
	failed.Finish()
	noDriver := Report{Schema: ReportSchema, Hostname: "node06", Error: "no NVIDIA driver found", FinishedAt: t0}
	noDriver.Finish()
	stale := synthBox(t, "node01", 8, map[int]float64{0: 0.5}, t0.Add(-time.Hour)) // an older run of node01
	writeReports(t, dir, synthBox(t, "node01", 8, nil, t0), slow, failed, synthBox(t, "node04", 8, nil, t0), noDriver)
	os.WriteFile(filepath.Join(dir, "old-node01.json"), mustJSON(t, stale), 0o644)
	os.WriteFile(filepath.Join(dir, "truncated.json"), []byte(`{"schema": "decodebench.validate/v1", "hostname": "no`), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a report"), 0o644)
	WriteFleetSummary(filepath.Join(dir, "earlier-summary.json"), FleetSummary{Schema: FleetSchema}) // passed over

	loaded, unreadable, err := LoadReports([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	hostfile := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hostfile, []byte("# the allocation\nnode01\nnode02.cluster.example\nnode03\nnode04\nnode05   # down?\nnode06\n"), 0o644)
	hosts, err := ReadHostfile(hostfile)
	if err != nil {
		t.Fatal(err)
	}
	s := AnalyzeFleet(loaded, unreadable, FleetOptions{Hosts: hosts})

	if s.Verdict != Fail || s.Boxes != 5 || s.CardCount != 32 {
		t.Errorf("verdict %s, %d boxes, %d cards; want FAIL, 5, 32", s.Verdict, s.Boxes, s.CardCount)
	}
	if !slices.Equal(s.MissingNodes, []string{"node05"}) || s.MissingCount != 1 || s.ExpectedNodes != 6 {
		t.Errorf("missing %v (%d of %d), want node05", s.MissingNodes, s.MissingCount, s.ExpectedNodes)
	}
	if len(s.FailingCards) != 1 || s.FailingCards[0].Host != "node03" || s.FailingCards[0].UUID != "GPU-node03-1" ||
		s.FailingCards[0].Findings[0].ID != "health.row_remapping" {
		t.Errorf("failing cards %+v, want node03's GPU-node03-1 with its row remap", s.FailingCards)
	}
	if len(s.BoxErrors) != 1 || s.BoxErrors[0].Host != "node06" || !strings.Contains(s.BoxErrors[0].Error, "no NVIDIA driver") {
		t.Errorf("box errors %+v", s.BoxErrors)
	}
	var readOutliers []string
	for _, o := range s.Outliers {
		if o.Gate == GateReadBandwidth {
			readOutliers = append(readOutliers, fmt.Sprintf("%s/%s %.3f of %d", o.Host, o.UUID, o.Below, o.Peers))
		}
	}
	if len(readOutliers) != 1 || !strings.HasPrefix(readOutliers[0], "node02/GPU-node02-5 0.06") || !strings.HasSuffix(readOutliers[0], "of 32") {
		t.Errorf("read outliers %v, want node02's GPU 5 about 6.5%% below 32 peers", readOutliers)
	}
	if len(s.Duplicates) != 1 || !strings.Contains(s.Duplicates[0], "old-node01.json") {
		t.Errorf("duplicates %v: the older node01 report should be passed over", s.Duplicates)
	}
	if len(s.Unreadable) != 1 || !strings.Contains(s.Unreadable[0], "truncated.json") {
		t.Errorf("unreadable %v", s.Unreadable)
	}
	if len(s.Files) != 5 {
		t.Errorf("files %v", s.Files)
	}
	d := s.Distributions[0]
	if d.Gate != GateReadBandwidth || d.Kind != "h100-sxm" || d.Count != 32 || d.RequiredFraction != 0.85 || d.Min != 0.87*3.35e12 {
		t.Errorf("distribution %+v", d)
	}

	paths, err := PlotGateDistributions(s, filepath.Join(t.TempDir(), "plots"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2*len(Gates) {
		t.Errorf("plots %v, want a PNG and an SVG per gate", paths)
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestFleetAgainstABaseline(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	before := AnalyzeFleet([]LoadedReport{
		{Path: "a", Report: synthBox(t, "node01", 4, nil, t0)},
		{Path: "b", Report: synthBox(t, "node02", 4, nil, t0)},
	}, nil, FleetOptions{})
	if before.Verdict != Pass {
		t.Fatalf("baseline verdict %s", before.Verdict)
	}
	path := filepath.Join(t.TempDir(), "baseline.json")
	if err := WriteFleetSummary(path, before); err != nil {
		t.Fatal(err)
	}
	base, err := ReadFleetSummary(path)
	if err != nil {
		t.Fatal(err)
	}
	// A month later node01's GPU 2 reads 10% slower (83.7% of datasheet: it now fails its gate
	// too, but the baseline names it either way), and node02 has lost GPU 3.
	after := synthBox(t, "node01", 4, map[int]float64{2: 0.93 * 0.90}, t0.AddDate(0, 1, 0))
	shrunk := synthBox(t, "node02", 3, nil, t0.AddDate(0, 1, 0))
	s := AnalyzeFleet([]LoadedReport{{Path: "a", Report: after}, {Path: "b", Report: shrunk}}, nil,
		FleetOptions{Baseline: &base, BaselineName: path, SlowerBy: 0.05})
	var slower []string
	for _, r := range s.Slower {
		slower = append(slower, fmt.Sprintf("%s %s %.2f", r.UUID, r.Gate, r.Change))
	}
	if len(slower) == 0 || slower[0] != "GPU-node01-2 read_bandwidth -0.10" {
		t.Errorf("slower %v, want GPU-node01-2 10%% slower on read bandwidth first", slower)
	}
	for _, r := range s.Slower {
		if r.UUID != "GPU-node01-2" {
			t.Errorf("%s named slower", r.UUID)
		}
	}
	if len(s.GoneCards) != 1 || s.GoneCards[0].UUID != "GPU-node02-3" || s.Verdict != Fail {
		t.Errorf("gone %v, verdict %s: want GPU-node02-3 gone and a FAIL", s.GoneCards, s.Verdict)
	}
	if _, err := ReadFleetSummary(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing baseline read without error")
	}
	report := filepath.Join(t.TempDir(), "r.json")
	WriteReport(report, after)
	if _, err := ReadFleetSummary(report); err == nil || !strings.Contains(err.Error(), "not a fleet summary") {
		t.Errorf("a validate report as baseline: %v", err)
	}
}

func TestFleetExpectNodesAndEmpty(t *testing.T) {
	t0 := time.Now()
	s := AnalyzeFleet([]LoadedReport{{Path: "a", Report: synthBox(t, "n1", 2, nil, t0)}}, nil, FleetOptions{ExpectNodes: 3})
	if s.MissingCount != 2 || s.Verdict != Fail {
		t.Errorf("missing %d verdict %s, want 2 FAIL", s.MissingCount, s.Verdict)
	}
	if s := AnalyzeFleet(nil, nil, FleetOptions{}); s.Verdict != Fail {
		t.Errorf("no reports: verdict %s", s.Verdict)
	}
}

func mustJSON(t *testing.T, r Report) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteReport(path, r); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	return data
}

// Emulated runs are plotted (a recipe tried without GPUs still draws its charts) but never
// compared: no outliers, no regressions.
func TestFleetEmulatedValuesAreNotCompared(t *testing.T) {
	box := synthBox(t, "emu1", 3, map[int]float64{0: 0.86}, time.Now()) // 7.5% below its peers
	box.Emulated = true
	for i := range box.Cards {
		for j := range box.Cards[i].Gates {
			box.Cards[i].Gates[j].Emulated = true
		}
	}
	s := AnalyzeFleet([]LoadedReport{{Path: "a", Report: box}}, nil, FleetOptions{Baseline: &FleetSummary{Cards: []FleetCard{{
		UUID: "GPU-emu1-0", Host: "emu1", Gates: map[string]FleetGate{GateReadBandwidth: {Value: 3e12}}}}}})
	if len(s.Outliers) != 0 || len(s.Slower) != 0 {
		t.Errorf("emulated values compared: outliers %+v, slower %+v", s.Outliers, s.Slower)
	}
	if len(s.Distributions) == 0 || len(s.EmulatedBoxes) != 1 || s.Verdict != Warn {
		t.Errorf("distributions %d, emulated boxes %v, verdict %s", len(s.Distributions), s.EmulatedBoxes, s.Verdict)
	}
	paths, err := PlotGateDistributions(s, t.TempDir())
	if err != nil || len(paths) == 0 {
		t.Errorf("plots %v, %v", paths, err)
	}
}
