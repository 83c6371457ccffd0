package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/validate"
)

// fleetBox writes a synthetic report of eight H100 SXM cards, every check passing and every
// gate at the same values, but card i's read bandwidth at reads[i] of the datasheet.
func fleetBox(t *testing.T, dir, host string, reads map[int]float64, fail map[int]string) {
	t.Helper()
	r := validate.Report{Schema: validate.ReportSchema, Hostname: host, Backend: "cuda", Suite: "standard",
		FinishedAt: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
	for i := range 8 {
		read := 0.93
		if f, ok := reads[i]; ok {
			read = f
		}
		card := validate.Card{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", host, i), Serial: fmt.Sprintf("SN%s%d", host, i),
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i), Name: "NVIDIA H100 80GB HBM3", SpecKey: "h100-sxm",
			Gates: []validate.GateValue{
				{Gate: validate.GateReadBandwidth, Value: read * 3.35e12, Unit: validate.UnitBytesPerSec, Reference: 3.35e12,
					Fraction: read, Required: 0.85 * 3.35e12, RequiredFraction: 0.85, Verdict: validate.Pass},
				{Gate: validate.GateModelStep, Value: 170, Unit: validate.UnitTokensPerSec, Reference: 210,
					Fraction: 170.0 / 210, Required: 0.6 * 210, RequiredFraction: 0.6, Verdict: validate.Pass},
			},
			Checks: []validate.Check{{ID: "health.ecc_errors", Category: validate.CategoryHealth, Verdict: validate.Pass, Message: "No errors."}},
		}
		if msg, ok := fail[i]; ok {
			card.Checks = append(card.Checks, validate.Check{ID: "health.ecc_errors", Category: validate.CategoryHealth, Verdict: validate.Fail, Message: msg})
		}
		r.Cards = append(r.Cards, card)
	}
	r.Finish()
	os.MkdirAll(dir, 0o755)
	if err := validate.WriteReport(filepath.Join(dir, host+".json"), r); err != nil {
		t.Fatal(err)
	}
}

// Without --out the plots go under out/, where every other command writes, not into a fleet/
// folder of the working directory.
func TestFleetPlotsGoUnderOut(t *testing.T) {
	hermetic(t, "")
	fleetBox(t, "june", "node01", nil, nil)
	if _, _, code, msg := runFleetCLI(t, "fleet", "june"); code != 0 {
		t.Fatalf("exit %d %q", code, msg)
	}
	if _, err := os.Stat(filepath.Join("out", "fleet", "fleet-read_bandwidth.svg")); err != nil {
		t.Errorf("no plot under out/fleet: %v", err)
	}
	if _, err := os.Stat("fleet"); err == nil {
		t.Errorf("fleet wrote a fleet/ folder into the working directory")
	}
}

func TestFleetCommand(t *testing.T) {
	hermetic(t, "")
	fleetBox(t, "may/a", "node01", nil, nil)
	fleetBox(t, "may/a", "node02", map[int]float64{3: 0.86}, nil) // slow, though above 85%
	fleetBox(t, "may/b", "node03", nil, map[int]string{6: "2 uncorrectable ECC error(s) since the driver loaded."})
	fleetBox(t, "may/b", "node04", nil, nil)
	os.WriteFile("hosts", []byte("node01\nnode02\nnode03\nnode04\nnode05\n"), 0o644)

	stdout, _, code, msg := runFleetCLI(t, "fleet", "--hostfile", "hosts", "--out", "plots", "--summary", "may-summary.json", "may")
	if code != 1 || msg != "" {
		t.Errorf("exit %d %q, want 1 (a failing card and a missing node)", code, msg)
	}
	for _, want := range []string{
		"fleet: 4 box(es), 32 card(s) (h100-sxm): 31 pass, 0 warn, 1 fail",
		"MISSING NODES (1):\n  node05",
		"FAILING CARDS (1):", "node03  GPU 6  GPU-node03-6  serial SNnode036", "      health.ecc_errors: 2 uncorrectable ECC error(s)",
		"FLEET OUTLIERS", "node02  GPU 3  GPU-node02-3  h100-sxm  read_bandwidth  2.88 TB/s, 7.5% below the median 3.12 TB/s of 32",
		"read_bandwidth  h100-sxm  32", "85% of reference",
		"fleet verdict: FAIL",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, gate := range []string{"read_bandwidth", "model_step"} {
		for _, ext := range []string{".png", ".svg"} {
			if _, err := os.Stat(filepath.Join("plots", "fleet-"+gate+ext)); err != nil {
				t.Errorf("plot: %v", err)
			}
		}
	}

	// A month on: node03's card is replaced and passes, node05 is back, node01's GPU 0 is 10%
	// slower than in May.
	fleetBox(t, "june", "node01", map[int]float64{0: 0.93 * 0.9}, nil)
	for _, h := range []string{"node02", "node03", "node04", "node05"} {
		fleetBox(t, "june", h, nil, nil)
	}
	stdout, _, code, _ = runFleetCLI(t, "fleet", "--baseline", "may-summary.json", "--expect-nodes", "5", "--out", "", "june")
	if code != 0 {
		t.Errorf("june: exit %d, want 0 (warnings only)\n%s", code, stdout)
	}
	for _, want := range []string{"SLOWER THAN THE BASELINE may-summary.json (1)", "node01  GPU 0  GPU-node01-0  h100-sxm  read_bandwidth  3.12 TB/s -> 2.80 TB/s (-10.0%)", "fleet verdict: WARN"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("june output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, _, _ = runFleetCLI(t, "fleet", "--json", "--out", "", "june")
	var s validate.FleetSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || s.Schema != validate.FleetSchema || s.Boxes != 5 {
		t.Errorf("--json: %v, %+v", err, s.Schema)
	}
}

func TestFleetUsageErrors(t *testing.T) {
	hermetic(t, "")
	os.WriteFile("report.json", []byte(`{"schema": "decodebench.validate/v1"}`), 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet"}, "needs the directories"},
		{[]string{"fleet", "nowhere"}, "not a directory"},
		{[]string{"fleet", "--outlier", "5", "."}, "--outlier 5"},
		{[]string{"fleet", "--slower-by", "0", "."}, "--slower-by 0"},
		{[]string{"fleet", "--baseline", "report.json", "."}, "not a fleet summary"},
		{[]string{"fleet", "--hostfile", "none", "."}, "--hostfile"},
		{[]string{"fleet", "--expect-nodes", "-2", "."}, "--expect-nodes"},
	} {
		_, _, code, msg := runFleetCLI(t, tt.args...)
		if code != exitUsage || !strings.Contains(msg, tt.want) {
			t.Errorf("%q: exit %d %q, want 2 and %q", tt.args, code, msg, tt.want)
		}
	}
	// No reports at all is a failing fleet, not a usage error.
	os.Mkdir("empty", 0o755)
	if _, _, code, _ := runFleetCLI(t, "fleet", "--out", "", "empty"); code != 1 {
		t.Errorf("an empty directory: exit %d, want 1", code)
	}
}

// A folder with no validate report, or only garbage, fails with a sentence saying what fleet
// reads; an array or a string in a .json file is named as such, not as a Go type.
func TestFleetNoReports(t *testing.T) {
	empty, garbage := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(garbage, "a.json"), []byte("{garbage"), 0o644)
	os.WriteFile(filepath.Join(garbage, "b.json"), []byte("[1, 2]"), 0o644)
	for _, dir := range []string{empty, garbage} {
		stdout, _, code, msg := runFleetCLI(t, "fleet", "--out", filepath.Join(t.TempDir(), "plots"), dir)
		if code != exitFailure || !strings.Contains(msg, "no validate report in "+dir) || !strings.Contains(msg, "validate --out") {
			t.Errorf("%s: exit %d, message %q", dir, code, msg)
		}
		if strings.Contains(stdout, "()") {
			t.Errorf("%s: empty kinds printed as (): %q", dir, stdout)
		}
		if dir == garbage && (!strings.Contains(stdout, "b.json: not a validate report: a JSON array") || strings.Contains(stdout, "Go value")) {
			t.Errorf("garbage: %q", stdout)
		}
	}
}
