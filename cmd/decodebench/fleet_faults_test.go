package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/validate"
)

// faultBox writes a passing two-card report for host into dir, changed by change first.
func faultBox(t *testing.T, dir, host string, change func(r *validate.Report)) {
	t.Helper()
	r := validate.Report{Schema: validate.ReportSchema, Hostname: host, Backend: "cuda", Suite: "standard",
		FinishedAt: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
	for i := range 2 {
		r.Cards = append(r.Cards, validate.Card{Index: i, UUID: "GPU-" + host + "-" + string(rune('a'+i)), Serial: "SN-" + host + string(rune('a'+i)),
			PCIBusID: []string{"00000000:18:00.0", "00000000:2A:00.0"}[i], Name: "NVIDIA H100 80GB HBM3", SpecKey: "h100-sxm",
			Gates: []validate.GateValue{{Gate: validate.GateReadBandwidth, Value: 3.1e12, Unit: validate.UnitBytesPerSec, Reference: 3.35e12,
				Fraction: 3.1 / 3.35, Required: 0.85 * 3.35e12, RequiredFraction: 0.85, Verdict: validate.Pass}},
			Checks: []validate.Check{{ID: "health.ecc_errors", Category: validate.CategoryHealth, Verdict: validate.Pass, Message: "No errors."}}})
	}
	if change != nil {
		change(&r)
	}
	r.Finish()
	os.MkdirAll(dir, 0o755)
	if err := validate.WriteReport(filepath.Join(dir, host+".json"), r); err != nil {
		t.Fatal(err)
	}
}

func fleetEnv(t *testing.T) {
	hermetic(t, "")
	for _, name := range []string{"DECODEBENCH_FLEET_OUT", "DECODEBENCH_FLEET_SUMMARY", "DECODEBENCH_FLEET_BASELINE",
		"DECODEBENCH_FLEET_SLOWER_BY", "DECODEBENCH_FLEET_OUTLIER", "DECODEBENCH_EXPECT_NODES", "DECODEBENCH_HOSTFILE", "DECODEBENCH_FLEET_JSON"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

// An interrupted box has no verdict: none of its cards is listed as failing, and the fleet
// cannot pass.
func TestFleetInterruptedBoxIsNoVerdict(t *testing.T) {
	fleetEnv(t)
	faultBox(t, "run", "node01", nil)
	faultBox(t, "run", "node02", func(r *validate.Report) {
		r.Interrupted = "SIGTERM before the verdict"
		r.Cards[0].CutShort = true
		r.Cards[0].Checks = append(r.Cards[0].Checks, validate.Check{ID: "performance.tensor", Category: validate.CategoryPerformance,
			Verdict: validate.Fail, Message: "Tensor-core rate: not measured (validate was interrupted)."})
	})
	stdout, _, code, _ := runFleetCLI(t, "fleet", "--out", "", "--expect-nodes", "2", "run")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"INTERRUPTED BOXES (no verdict: run validate again) (1):", "node02  SIGTERM before the verdict", "fleet: 2 box(es), 2 card(s)", "fleet verdict: INCOMPLETE"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "FAILING CARDS") || strings.Contains(stdout, "GPU-node02-a") {
		t.Errorf("the interrupted box's card is listed:\n%s", stdout)
	}
}

// Reports fleet cannot read are listed with the reason and keep the fleet from passing; with a
// hostfile their nodes are unreadable, not missing.
func TestFleetUnreadableReports(t *testing.T) {
	fleetEnv(t)
	faultBox(t, "run", "node01", nil)
	os.WriteFile(filepath.Join("run", "node02.json"), []byte(`{"schema": "decodebench.validate/v2", "hostname": "node02", "verdict": "PASS", "cards": []}`), 0o644)
	os.WriteFile(filepath.Join("run", "node03.json"), []byte(`{"schema": "decodebench.validate/v1", "decodebench_version": "x", "hostname": "node03", "command_li`), 0o644)
	os.WriteFile(filepath.Join("run", "node04.json"), []byte("\x00\x00\x00corrupt"), 0o644)
	validate.WriteFleetSummary(filepath.Join("run", "fleet-summary.json"), validate.FleetSummary{Schema: validate.FleetSchema})
	os.WriteFile("hosts", []byte("node01\nnode02\nnode03\nnode04\nnode05\n"), 0o644)
	stdout, _, code, _ := runFleetCLI(t, "fleet", "--out", "", "--hostfile", "hosts", "run")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		`run/node02.json: schema "decodebench.validate/v2": this build reads "decodebench.validate/v1"`,
		"run/node03.json: not a whole JSON object (a report cut short",
		"run/node04.json: not a whole JSON object",
		"UNREADABLE NODES (a report is there but cannot be read) (3):\n  node02 node03 node04",
		"MISSING NODES (1):\n  node05",
		"fleet verdict: FAIL",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "fleet-summary.json") {
		t.Errorf("the fleet summary was read as a report:\n%s", stdout)
	}
	// Without the missing node, unreadable reports alone still keep the fleet from passing.
	os.WriteFile("hosts", []byte("node01\nnode02\nnode03\nnode04\n"), 0o644)
	if stdout, _, code, _ = runFleetCLI(t, "fleet", "--out", "", "--hostfile", "hosts", "run"); code != 1 || !strings.Contains(stdout, "fleet verdict: INCOMPLETE") {
		t.Errorf("unreadable reports only: exit %d\n%s", code, stdout)
	}
}

// Duplicate identities fail the fleet with both places named, and cannot hide a card that got
// slower than its baseline.
func TestFleetDuplicateIdentities(t *testing.T) {
	fleetEnv(t)
	faultBox(t, "may", "node01", func(r *validate.Report) { r.Cards[1].UUID = "GPU-node02-b" }) // cloned across boxes
	faultBox(t, "may", "node02", nil)
	if _, _, code, msg := runFleetCLI(t, "fleet", "--out", "", "--summary", "may.json", "may"); code != 1 {
		t.Fatalf("may: exit %d %s", code, msg)
	}
	// June: node01's card with node02's UUID runs at half its speed; node02's, read last, does
	// not.
	faultBox(t, "june", "node01", func(r *validate.Report) {
		r.Cards[1].UUID = "GPU-node02-b"
		r.Cards[1].Gates[0].Value = 1.55e12
	})
	faultBox(t, "june", "node02", nil)
	faultBox(t, "june", "node03", func(r *validate.Report) {
		r.Cards[0].UUID = ""
		r.Cards[1].Serial = r.Cards[0].Serial
		r.Cards[1].PCIBusID = r.Cards[0].PCIBusID
	})
	faultBox(t, "june", "node04", func(r *validate.Report) { r.Cards[1].UUID = r.Cards[0].UUID })
	stdout, _, code, _ := runFleetCLI(t, "fleet", "--out", "", "--baseline", "may.json", "june")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"DUPLICATE OR MISSING IDENTITIES (5):",
		"uuid GPU-node02-b is reported by node01 GPU 1 (00000000:2A:00.0) and node02 GPU 1 (00000000:2A:00.0)",
		"uuid GPU-node04-a is reported by node04 GPU 0 (00000000:18:00.0) and node04 GPU 1 (00000000:2A:00.0)",
		"node03 GPU 0 (00000000:18:00.0) reports an empty UUID",
		"serial SN-node03a is reported by node03 GPU 0 (00000000:18:00.0) and node03 GPU 1 (00000000:18:00.0)",
		"pci_bus_id 00000000:18:00.0 is reported by node03 GPU 0",
		"SLOWER THAN THE BASELINE may.json (1):", "node01  GPU 1  GPU-node02-b  h100-sxm  read_bandwidth  3.10 TB/s -> 1.55 TB/s (-50.0%)",
		"fleet verdict: FAIL",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}
