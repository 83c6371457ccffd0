package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/validate"
)

// One card off the bus before the run (NVML says GPU_IS_LOST), one NVML cannot open at all:
// each is a FAIL named by index, UUID where NVML still gives it and bus id, and the other
// cards are validated.
func TestValidateLostCards(t *testing.T) {
	useEmu(t)
	validateEnv(t)
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1), fakenvml.H100(2)}
	gpus[1].Set(func(s *fakenvml.State) { s.Lost = true })
	gpus[2].Set(func(s *fakenvml.State) { s.HandleError = nvml.ERROR_GPU_IS_LOST })
	nvmlHook = func() nvml.Interface { return fakenvml.Library(gpus...) }
	stdout, _, code, msg := runFleetCLI(t, "validate", "--backend", "emu", "--suite", "tiny", "--json", "r.json")
	if code != 1 || msg != "" {
		t.Fatalf("exit %d %q, want 1 with the lost cards in the table\n%s", code, msg, stdout)
	}
	for _, want := range []string{"GPU 1 (GPU-00000000-0000-4000-8000-000000000001, PCI bus id 00000000:28:00.0) fell off the bus",
		"GPU 2 (UUID unreadable, PCI bus id unreadable) fell off the bus", "verdict: FAIL"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	r := readValidateReport(t, "r.json")
	if len(r.Cards) != 3 || r.Error != "" {
		t.Fatalf("%d cards, error %q: want all three, no box error", len(r.Cards), r.Error)
	}
	if c := r.Cards[0]; c.Verdict == validate.Fail || len(c.Outcomes) == 0 {
		t.Errorf("GPU 0 was not validated: %s, %d outcomes", c.Verdict, len(c.Outcomes))
	}
	for _, i := range []int{1, 2} {
		c := r.Cards[i]
		if c.Verdict != validate.Fail || c.Index != i || len(c.Checks) != 1 || c.Checks[0].ID != "health.nvml" ||
			!saysLost(c.Checks[0].Message) {
			t.Errorf("GPU %d: %s %+v", i, c.Verdict, c.Checks)
		}
	}
	if r.Cards[1].UUID != gpus[1].UUID || r.Cards[1].PCIBusID != gpus[1].BusID {
		t.Errorf("GPU 1 not named: %q %q", r.Cards[1].UUID, r.Cards[1].PCIBusID)
	}
}

// --json into a directory or a place that cannot be written is refused before the suite runs.
func TestValidateJSONPathCheckedFirst(t *testing.T) {
	useEmu(t)
	validateEnv(t)
	os.Mkdir("reports", 0o755)
	for _, tc := range []struct {
		path, want string
	}{
		{"reports", "reports is a directory: give a file name, such as reports/report.json"},
		{"/proc/self/r.json", "cannot write beside /proc/self/r.json"},
	} {
		stdout, stderr, code, msg := runFleetCLI(t, "validate", "--simulate-gpus", "1", "--backend", "emu", "--suite", "tiny", "--json", tc.path)
		if code != exitUsage || !strings.Contains(msg, "--out: "+tc.want) {
			t.Errorf("--json %s: exit %d %q, want 2 and %q", tc.path, code, msg, tc.want)
		}
		if strings.Contains(stderr, "read_probe") || strings.Contains(stdout, "verdict") {
			t.Errorf("--json %s: the suite ran before the path was refused:\n%s%s", tc.path, stdout, stderr)
		}
	}
	entries, _ := os.ReadDir("reports")
	if len(entries) != 0 {
		t.Errorf("left in reports/: %v", entries)
	}
	if _, err := os.Stat(filepath.Join("reports", "report.json")); err == nil {
		t.Errorf("a report was written")
	}
}

// saysLost reports whether msg carries NVML's GPU_IS_LOST, which go-nvml spells "GPU is lost"
// once the library has been asked for its strings and "ERROR_GPU_IS_LOST" before.
func saysLost(msg string) bool {
	return strings.Contains(strings.ReplaceAll(strings.ToLower(msg), "_", " "), "gpu is lost")
}
