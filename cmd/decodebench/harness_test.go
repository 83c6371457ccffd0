package main

// The one harness of the command tests: how a test runs a command line (in-process, or as a
// subprocess of this test binary) and the environment it runs in. Every flag reads a
// DECODEBENCH_* variable and the device mapping reads CUDA_VISIBLE_DEVICES, so a test that
// leaves one of them set from the caller's shell tests the shell, not the code: testEnv clears
// them all, whatever flags are added later.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cgotest.RemoveFakes()
	os.Exit(code)
}

// runApp runs the command line in-process through the app main runs, and gives its standard
// output and error, the exit code main would return and the error message main would print on
// standard error.
func runApp(t *testing.T, args ...string) (stdout, stderr string, code int, msg string) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"decodebench"}, args...))
	if err == nil {
		return out.String(), errOut.String(), 0, ""
	}
	return out.String(), errOut.String(), exitCode(err), err.Error()
}

// exitCode is the code main returns for err.
func exitCode(err error) int {
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return exitFailure
}

// scrubbedVariables are cleared for every command test besides every DECODEBENCH_* variable:
// they choose the CUDA device, which the command maps to an NVML device.
var scrubbedVariables = []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}

// isTestSwitch reports whether a DECODEBENCH_* variable configures the test run itself
// (DECODEBENCH_REQUIRE_EMU, DECODEBENCH_REQUIRE_GPU turn skips into failures) rather than a
// command, and so survives scrubEnv.
func isTestSwitch(name string) bool { return strings.HasPrefix(name, "DECODEBENCH_REQUIRE_") }

// scrubEnv unsets every DECODEBENCH_* variable but the test switches, and the CUDA device
// variables, until t ends.
func scrubEnv(t *testing.T) {
	t.Helper()
	names := append([]string(nil), scrubbedVariables...)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "DECODEBENCH_") && !isTestSwitch(name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		t.Setenv(name, "") // restores the caller's value when t ends
		os.Unsetenv(name)
	}
}

// testEnv is the environment of a command test: scrubEnv, DECODEBENCH_KERNELS pointing at
// kernels (unset when empty, so that no library is found), and a fresh working directory (no
// ./lib to find by accident, no run directory left by another test).
func testEnv(t *testing.T, kernels string) {
	t.Helper()
	scrubEnv(t)
	if kernels != "" {
		t.Setenv(cgo.EnvKernels, kernels)
	}
	t.Chdir(t.TempDir())
}

// emuEnv is testEnv with the emulator library, or skips (fails under DECODEBENCH_REQUIRE_EMU=1).
func emuEnv(t *testing.T) {
	t.Helper()
	testEnv(t, cgotest.EmuPath(t))
}

// helperEnv marks the subprocess that TestSweepHelperProcess turns into decodebench.
const helperEnv = "DECODEBENCH_TEST_HELPER"

// helperCommand is this test binary run as `decodebench args...` in dir, in the test's
// (scrubbed) environment: for what an in-process run cannot show, such as signals and exit
// codes of the process itself.
func helperCommand(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestSweepHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Dir = dir
	return cmd
}

// helperArgs are the arguments after "--" of a helper subprocess: its decodebench command line.
func helperArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// TestSweepHelperProcess is the command line when a test runs this binary as a subprocess
// (helperCommand); it does nothing in a normal test run.
func TestSweepHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	args := helperArgs()
	if phase := os.Getenv("SWEEP_TEST_PAUSE"); phase != "" {
		pauseAt(phase) // sweep_fault_test.go: hold the sweep at a phase for a signal
	}
	err := newApp().Run(append([]string{"decodebench"}, args...))
	code := 0
	if err != nil {
		code = exitCode(err)
		os.Stderr.WriteString("decodebench: " + err.Error() + "\n")
	}
	os.Exit(code)
}

// Other names of the harness, one per family of command tests; they add nothing to it.

// runCLI is runApp without standard error.
func runCLI(t *testing.T, args ...string) (stdout string, code int, msg string) {
	t.Helper()
	stdout, _, code, msg = runApp(t, args...)
	return stdout, code, msg
}

// runBench is runApp.
func runBench(t *testing.T, args ...string) (stdout, stderr string, code int, msg string) {
	t.Helper()
	return runApp(t, args...)
}

// runFleetCLI is runApp.
func runFleetCLI(t *testing.T, args ...string) (stdout, stderr string, code int, msg string) {
	t.Helper()
	return runApp(t, args...)
}

// runSweepCLI is runCLI.
func runSweepCLI(t *testing.T, args ...string) (stdout string, code int, msg string) {
	t.Helper()
	return runCLI(t, args...)
}

// hermetic is testEnv.
func hermetic(t *testing.T, kernels string) { t.Helper(); testEnv(t, kernels) }

// benchEnv is testEnv.
func benchEnv(t *testing.T, kernels string) { t.Helper(); testEnv(t, kernels) }

// sweepHermetic is testEnv.
func sweepHermetic(t *testing.T, kernels string) { t.Helper(); testEnv(t, kernels) }

// useEmu is emuEnv.
func useEmu(t *testing.T) { t.Helper(); emuEnv(t) }

// testEnv leaves no DECODEBENCH_* variable of the caller's shell (any flag's, the backend's,
// one no flag reads yet) nor the CUDA device choice, and keeps the test switches.
func TestHarnessScrubsTheEnvironment(t *testing.T) {
	hostile := map[string]string{"DECODEBENCH_BACKEND": "cuda", "DECODEBENCH_RESERVE": "0.5", "DECODEBENCH_NOT_A_FLAG_YET": "1",
		"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", cgo.EnvKernels: "/nowhere/libdecodebench_emu.so"}
	for name, value := range hostile {
		t.Setenv(name, value)
	}
	t.Setenv("DECODEBENCH_REQUIRE_EMU", "0")
	t.Run("scrubbed", func(t *testing.T) {
		testEnv(t, "")
		for name := range hostile {
			if value, ok := os.LookupEnv(name); ok {
				t.Errorf("%s=%s survives testEnv", name, value)
			}
		}
		if os.Getenv("DECODEBENCH_REQUIRE_EMU") != "0" {
			t.Errorf("the test switch DECODEBENCH_REQUIRE_EMU was cleared")
		}
		if _, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1", "--context", "1k"); code != 0 {
			t.Errorf("predict in the scrubbed environment: exit %d: %s", code, msg)
		}
	})
	if os.Getenv("DECODEBENCH_BACKEND") != "cuda" || os.Getenv("CUDA_VISIBLE_DEVICES") != "3" {
		t.Errorf("the caller's environment was not restored when the test ended")
	}
}

// overrideFlags is base with extra appended, less every flag of base that extra gives again:
// a test's extra --batch replaces the helper's rather than joining it (list flags given twice
// are merged, other flags given twice are refused).
func overrideFlags(base []string, extra ...string) []string {
	given := map[string]bool{}
	for _, a := range extra {
		if strings.HasPrefix(a, "--") {
			name, _, _ := strings.Cut(a, "=")
			given[name] = true
		}
	}
	var out []string
	for i := 0; i < len(base); i++ {
		name, _, hasValue := strings.Cut(base[i], "=")
		if strings.HasPrefix(name, "--") && given[name] {
			if !hasValue && i+1 < len(base) && !strings.HasPrefix(base[i+1], "--") {
				i++
			}
			continue
		}
		out = append(out, base[i])
	}
	return append(out, extra...)
}
