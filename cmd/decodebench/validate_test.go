package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/validate"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// validateEnv puts the NVML hook back when t ends; the environment is testEnv's (hermetic or
// useEmu come first).
func validateEnv(t *testing.T) {
	old := nvmlHook
	t.Cleanup(func() { nvmlHook = old })
}

func readValidateReport(t *testing.T, path string) validate.Report {
	t.Helper()
	r, err := validate.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// On a machine without the driver, validate says why and exits 1, and still writes a report
// (so a fleet sees the node failed rather than missing).
func TestValidateWithoutDriver(t *testing.T) {
	hermetic(t, "")
	validateEnv(t)
	nvmlHook = func() nvml.Interface {
		return fakenvml.Driver{Init: nvml.ERROR_LIBRARY_NOT_FOUND}.Library()
	}
	_, _, code, msg := runFleetCLI(t, "validate", "--json", "r.json")
	if code != 1 || !strings.Contains(msg, "cannot validate: no NVIDIA driver found") || !strings.Contains(msg, "--backend emu") {
		t.Errorf("exit %d, %q: want 1 and a sentence saying there is no driver and what to do instead", code, msg)
	}
	r := readValidateReport(t, "r.json")
	if r.Verdict != validate.Fail || !strings.Contains(r.Error, "no NVIDIA driver") || r.Hostname == "" {
		t.Errorf("report: verdict %s, error %q, host %q", r.Verdict, r.Error, r.Hostname)
	}

	// And the real thing, where this machine has no driver (CI's does not).
	nvmlHook = nil
	if _, err := gpuinfo.Open(); !errors.Is(err, gpuinfo.ErrNoDriver) {
		t.Skipf("NVML opens here (%v): the no-driver path is covered by the mock above", err)
	}
	_, _, code, msg = runFleetCLI(t, "validate")
	if code != 1 || !strings.Contains(msg, "cannot validate: no NVIDIA driver found") {
		t.Errorf("real NVML: exit %d, %q", code, msg)
	}
}

// --backend emu runs the suite sized for the emulator unless --suite says otherwise: the
// standard suite's sizes took 369 s on a 2-core machine's emulator, past its budget.
func TestValidateEmuBackendPicksTheEmuSuite(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "emu"}, validate.SuiteEmu},
		{[]string{"--backend", "emu", "--suite", "tiny"}, validate.SuiteTiny},
		{[]string{"--backend", "emu", "--suite", "standard"}, validate.SuiteStandard},
		{[]string{"--backend", "cuda"}, validate.SuiteStandard},
	} {
		var got string
		app := newApp()
		for _, c := range app.Commands {
			if c.Name == "validate" {
				// readOwnLine made the command's line its own: parse it, then look.
				c.Action = func(c *cli.Context) error {
					return parseLine(c, func(c *cli.Context) error {
						req, err := parseValidateRequest(c)
						got = req.suite.Name
						return err
					})
				}
			}
		}
		hermetic(t, "")
		if err := app.Run(append([]string{"decodebench", "validate"}, tc.args...)); err != nil || got != tc.want {
			t.Errorf("%v: suite %q (%v), want %q", tc.args, got, err, tc.want)
		}
	}
}

// The emulated smoke test of the README: two simulated cards on the emulator's own suite pass
// (exit 0, speed gates SKIP, nothing FAILs for the budget) well within the 2 minutes the help
// promises: 10 to 16 s on a loaded 2-core machine (2026-12).
func TestValidateEmulatedSmokeTest(t *testing.T) {
	useEmu(t)
	validateEnv(t)
	stdout, stderr, code, msg := runFleetCLI(t, "validate", "--simulate-gpus", "2", "--backend", "emu", "--idle-wait", "0s", "--json", "r.json")
	r := readValidateReport(t, "r.json")
	if code != 0 || r.Verdict != validate.Pass || r.Suite != validate.SuiteEmu || r.Counts.Fail != 0 {
		t.Fatalf("exit %d (%s), verdict %s, suite %s, counts %+v\n%s\n%s", code, msg, r.Verdict, r.Suite, r.Counts, stdout, stderr)
	}
	if r.Seconds > 120 {
		t.Errorf("the emulated smoke test took %.0f s, more than the 2 minutes its help promises", r.Seconds)
	}
	t.Logf("validate --simulate-gpus 2 --backend emu: %.1f s", r.Seconds)
}

// A healthy simulated box on the emulator with the tiny suite: the whole command end to end.
func TestValidateEmulatedTinySuite(t *testing.T) {
	useEmu(t)
	validateEnv(t)
	stdout, stderr, code, msg := runFleetCLI(t, "validate", "--simulate-gpus", "2", "--backend", "emu", "--suite", "tiny",
		"--expect", "h100-sxm", "--expect-count", "2", "--json", "out/report.json", "--all-checks", "--hostname", "gpu-node-7")
	if code != 0 {
		t.Fatalf("exit %d (%s)\n%s\n%s", code, msg, stdout, stderr)
	}
	for _, want := range []string{"EMULATED", "GPU 0", "GPU 1", "PASS  health.ecc_mode", "SKIP  performance.read_bandwidth",
		"verdict: PASS (53 checks: 43 pass, 0 warn, 0 fail, 10 skip)", "10 check(s) could not run"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "GPU 1 model.down_proj") {
		t.Errorf("no progress lines on standard error:\n%s", stderr)
	}
	r := readValidateReport(t, "out/report.json")
	if r.Verdict != validate.Pass || r.Counts.Skip != 10 || !r.Emulated || r.Backend != "emu" || len(r.Cards) != 2 || r.Suite != "tiny" || r.Hostname != "gpu-node-7" {
		t.Fatalf("report: verdict %s emulated %v backend %q cards %d suite %q", r.Verdict, r.Emulated, r.Backend, len(r.Cards), r.Suite)
	}
	for i, c := range r.Cards {
		g := fakenvml.H100(i)
		if c.UUID != g.UUID || c.Serial != g.Serial || c.PCIBusID != g.BusID || c.SpecKey != "h100-sxm" || len(c.Gates) != 5 {
			t.Errorf("card %d: %s %s %s %s, %d gates", i, c.UUID, c.Serial, c.PCIBusID, c.SpecKey, len(c.Gates))
		}
	}
	if len(r.Checks) != 1 || r.Checks[0].ID != "box.gpu_count" || r.Checks[0].Verdict != validate.Pass {
		t.Errorf("box checks %+v", r.Checks)
	}

	// --json - puts the report on standard output and the table on standard error.
	stdout, stderr, code, _ = runFleetCLI(t, "validate", "--simulate-gpus", "1", "--backend", "emu", "--suite", "tiny", "--json", "-")
	var fromStdout validate.Report
	if err := json.Unmarshal([]byte(stdout), &fromStdout); err != nil || code != 0 || fromStdout.Schema != validate.ReportSchema {
		t.Errorf("--json -: exit %d, %v, schema %q", code, err, fromStdout.Schema)
	}
	if !strings.Contains(stderr, "verdict: PASS") {
		t.Errorf("--json -: the table is not on standard error:\n%s", stderr)
	}
}

// Faults on the cards fail the box: exit 1, each named with what to do.
func TestValidateFaultyBox(t *testing.T) {
	useEmu(t)
	validateEnv(t)
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1), fakenvml.H100(2)}
	gpus[1].Set(func(s *fakenvml.State) { s.VolatileUncorrected, s.AggregateUncorrected = 2, 2 })
	gpus[2].Set(func(s *fakenvml.State) { s.Processes = []nvml.ProcessInfo{{Pid: 31337}} })
	nvmlHook = func() nvml.Interface { return fakenvml.Library(gpus...) }
	stdout, _, code, msg := runFleetCLI(t, "validate", "--backend", "emu", "--suite", "tiny", "--idle-wait", "50ms", "--gpus", "1,GPU-00000000-0000-4000-8000-000000000002")
	if code != 1 || msg != "" {
		t.Errorf("exit %d %q, want 1 with the reasons in the table", code, msg)
	}
	for _, want := range []string{"FAIL  health.ecc_errors", "2 uncorrectable ECC error(s)", "FAIL  health.idle", "pid 31337", "verdict: FAIL"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "GPU 0 ") {
		t.Errorf("--gpus 1,<uuid of 2> validated GPU 0:\n%s", stdout)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	hermetic(t, "")
	validateEnv(t)
	bad := filepath.Join(t.TempDir(), "th.json")
	os.WriteFile(bad, []byte(`{"default": {"read_bandwith": {}}}`), 0o644)
	empty, array, twice := filepath.Join(filepath.Dir(bad), "empty.json"), filepath.Join(filepath.Dir(bad), "array.json"), filepath.Join(filepath.Dir(bad), "twice.json")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(array, []byte(`[{"default": {}}]`), 0o644)
	os.WriteFile(twice, []byte(`{"default": {"tensor": {"min_fraction": 0.7}, "tensor": {"min_fraction": 0.1}}}`), 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "now"}, "takes no arguments"},
		{[]string{"validate", "--expect", "h900"}, `unknown GPU "h900"`},
		{[]string{"validate", "--thresholds", bad}, "read_bandwith"},
		{[]string{"validate", "--thresholds", "missing.json"}, "missing.json"},
		{[]string{"validate", "--thresholds", empty}, "empty.json is empty: a thresholds file is a JSON object"},
		{[]string{"validate", "--thresholds", array}, "array.json holds a JSON array: a thresholds file is a JSON object"},
		{[]string{"validate", "--thresholds", twice}, "twice.json: default.tensor is given twice"},
		{[]string{"validate", "--backend", "rocm"}, "--backend"},
		{[]string{"validate", "--suite", "huge"}, "unknown suite"},
		{[]string{"validate", "--expect-count", "-1"}, "--expect-count"},
		{[]string{"validate", "--simulate-gpus", "2", "--gpus", "5"}, "--device: GPU 5: NVML sees 2 GPU(s)"},
		{[]string{"validate", "--idle-wait", "soon"}, "idle-wait"},
		// The form of --gpus is checked before NVML: this machine's driver is never asked.
		{[]string{"validate", "--device", "foo"}, `--device "foo": "foo" is neither an index nor a UUID`},
		{[]string{"validate", "--gpus", "foo"}, `--device "foo": "foo" is neither an index nor a UUID`},
		{[]string{"validate", "--gpus", "0,-1"}, "-1 is not an index"},
		{[]string{"validate", "--gpus", "0,,1"}, `"" is neither`},
	} {
		_, _, code, msg := runFleetCLI(t, tt.args...)
		if code != exitUsage || !strings.Contains(msg, tt.want) {
			t.Errorf("%q: exit %d %q, want 2 and %q", tt.args, code, msg, tt.want)
		}
	}
}

// The CUDA path with a fake CUDA library (a host implementation of decodebench.h that calls
// itself cuda): NVML's cards are matched to the runtime's devices in PCI order, through
// CUDA_VISIBLE_DEVICES, and a mismatch stops the run rather than blaming the wrong card.
func TestValidateMapsCardsToCUDADevices(t *testing.T) {
	named := func(n int) []*fakenvml.GPU {
		var gpus []*fakenvml.GPU
		for i := range n {
			g := fakenvml.H100(i)
			g.Set(func(s *fakenvml.State) { s.Name = fmt.Sprintf("fake device %d", i) })
			gpus = append(gpus, g)
		}
		return gpus
	}
	run := func(devices, gpus int, visible string, args ...string) (string, validate.Report, int, string) {
		t.Helper()
		hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_cuda.so", `FAKE_BACKEND="cuda"`, fmt.Sprintf("FAKE_DEVICES=%d", devices)))
		validateEnv(t)
		if visible != "-" {
			t.Setenv("CUDA_VISIBLE_DEVICES", visible)
		}
		g := named(gpus)
		nvmlHook = func() nvml.Interface { return fakenvml.Library(g...) }
		stdout, _, code, msg := runFleetCLI(t, append([]string{"validate", "--backend", "cuda", "--suite", "tiny",
			"--expect", "h100-sxm", "--json", "r.json"}, args...)...)
		r, _ := validate.ReadReport("r.json")
		return stdout, r, code, msg
	}

	_, r, code, msg := run(2, 2, "-")
	if code != 1 || msg != "" || len(r.Cards) != 2 || r.Cards[1].BackendDevice != 1 || r.Emulated {
		t.Fatalf("two cards: exit %d %q, %d cards", code, msg, len(r.Cards))
	}
	if os.Getenv("CUDA_DEVICE_ORDER") != gpuinfo.CUDADeviceOrder {
		t.Errorf("CUDA_DEVICE_ORDER = %q, want %s set before the CUDA library starts", os.Getenv("CUDA_DEVICE_ORDER"), gpuinfo.CUDADeviceOrder)
	}
	// The fake's times are the host's and it gets attention and the mma probe wrong: its gates
	// are evaluated as a GPU's (not emulated), and fail.
	for _, g := range r.Cards[0].Gates {
		if g.Emulated {
			t.Errorf("gate %s: emulated", g.Gate)
		}
	}
	for _, id := range []string{"performance.tensor", "performance.model_step", "correctness.attention_long"} {
		for _, ch := range r.Cards[0].Checks {
			if ch.ID == id && ch.Verdict != validate.Fail {
				t.Errorf("%s: %s (%s)", id, ch.Verdict, ch.Message)
			}
		}
	}

	stdout, r, code, _ := run(1, 2, "1", "--gpus", "1")
	if code != 1 || len(r.Cards) != 1 || !strings.Contains(stdout, `NVML calls GPU 1 "fake device 1" but CUDA device 0 is "fake device 0"`) {
		t.Errorf("CUDA_VISIBLE_DEVICES=1 on a runtime whose device 0 is another card: exit %d, %d cards\n%s", code, len(r.Cards), stdout)
	}
	if _, _, code, msg = run(1, 2, "1", "--gpus", "0"); code != exitUsage || !strings.Contains(msg, "not visible to CUDA") {
		t.Errorf("--gpus 0 with CUDA_VISIBLE_DEVICES=1: exit %d %q", code, msg)
	}
	if _, r, code, _ = run(2, 3, "-"); code != 1 || !strings.Contains(r.Error, "NVML sees 3 GPU(s) but the CUDA runtime sees 2") {
		t.Errorf("3 NVML GPUs, 2 CUDA devices: exit %d, error %q", code, r.Error)
	}
}
