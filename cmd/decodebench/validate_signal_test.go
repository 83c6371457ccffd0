package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/bench/validate"
	"github.com/decodebench/decodebench/internal/testtier"
)

// The helper process holds validate in one phase, named by DECODEBENCH_TEST_HOLD, until the
// test has signalled it: it writes DIR/held when it gets there and waits for DIR/release.
const (
	envValidateHelper = "DECODEBENCH_TEST_VALIDATE_HELPER"
	envHold           = "DECODEBENCH_TEST_HOLD"
	envSyncDir        = "DECODEBENCH_TEST_SYNC"
)

// hold writes the marker and waits (up to a minute) for the release.
func hold() {
	dir := os.Getenv(envSyncDir)
	os.WriteFile(filepath.Join(dir, "held"), nil, 0o644)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
			return
		}
	}
}

// holdingRunner holds the named step before running it.
type holdingRunner struct {
	validate.Runner
	step string
	once *sync.Once
}

func (h holdingRunner) Run(s validate.Step, cfg timing.Config) measure.Outcome {
	if s.Name == h.step {
		h.once.Do(hold)
	}
	return h.Runner.Run(s, cfg)
}

// TestValidateHelperProcess is validate's command line when a test runs this binary as a
// subprocess, on two simulated H100s, held in the phase DECODEBENCH_TEST_HOLD names:
// "idle-wait" (GPU 0 is busy), "probe" (the read probe), "kernel" (the batch-1 linear),
// "health-after" (the health read after the suite) or "report" (the report in its temporary
// file, before the rename).
func TestValidateHelperProcess(t *testing.T) {
	if os.Getenv(envValidateHelper) != "1" {
		return
	}
	args := helperArgs()
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1)}
	var once sync.Once
	switch phase := os.Getenv(envHold); phase {
	case "idle-wait":
		gpus[0].Set(func(s *fakenvml.State) {
			s.Processes = []nvml.ProcessInfo{{Pid: 4242}}
			s.OnCall = func(method string) {
				if method == "GetComputeRunningProcesses" {
					os.WriteFile(filepath.Join(os.Getenv(envSyncDir), "held"), nil, 0o644)
				}
			}
		})
	case "probe", "kernel":
		step := map[string]string{"probe": validate.StepRead, "kernel": validate.StepLinearBatch1}[phase]
		validateRunnerHook = func(r validate.Runner) validate.Runner { return holdingRunner{r, step, &once} }
	case "health-after":
		// ReadHealth reads the remapped rows once before the suite and once after.
		var mu sync.Mutex
		calls := 0
		gpus[1].Set(func(s *fakenvml.State) {
			s.OnCall = func(method string) {
				if method != "GetRemappedRows" {
					return
				}
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				if n == 2 {
					once.Do(hold)
				}
			}
		})
	case "report":
		reportWriteHook = func(string) { once.Do(hold) }
	}
	nvmlHook = func() nvml.Interface { return fakenvml.Library(gpus...) }
	app := newApp()
	err := app.Run(append([]string{"decodebench"}, args...))
	code := 0
	if err != nil {
		code = exitFailure
		var coder cli.ExitCoder
		if errors.As(err, &coder) {
			code = coder.ExitCode()
		}
		os.Stderr.WriteString("decodebench: " + err.Error() + "\n")
	}
	os.Exit(code)
}

// startHeldValidate runs validate in a subprocess held in phase, and waits until it is there.
func startHeldValidate(t *testing.T, phase string, args ...string) (cmd *exec.Cmd, output *bytes.Buffer, syncDir string) {
	t.Helper()
	syncDir = t.TempDir()
	cmd = exec.Command(os.Args[0], append([]string{"-test.run=^TestValidateHelperProcess$", "--", "validate"}, args...)...)
	cmd.Env = append(os.Environ(), envValidateHelper+"=1", envHold+"="+phase, envSyncDir+"="+syncDir)
	output = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(syncDir, "held")); err == nil {
			return cmd, output, syncDir
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("validate never reached %s:\n%s", phase, output)
		}
	}
}

func exitCodeOf(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// leftovers lists what validate left in dir besides the report.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if e.Name() != "r.json" {
			names = append(names, e.Name())
		}
	}
	return names
}

// SIGINT, SIGTERM or SIGHUP at every phase of validate: a report that says INTERRUPTED, exit 130, and
// no card failed for it; once the verdict is reached, a signal only waits for the report.
func TestValidateInterruptedAtEveryPhase(t *testing.T) {
	testtier.Slow(t, "validate interrupted at each of its phases")
	useEmu(t)
	validateEnv(t)
	base := []string{"--backend", "emu", "--suite", "tiny", "--json", "out/r.json", "--hostname", "node-7", "--idle-wait", "2m"}
	for _, tc := range []struct {
		phase  string
		signal syscall.Signal
	}{
		{"idle-wait", syscall.SIGTERM},
		{"probe", syscall.SIGINT},
		{"kernel", syscall.SIGTERM},
		{"kernel", syscall.SIGHUP}, // the terminal or ssh session closed
		{"health-after", syscall.SIGINT},
	} {
		t.Run(tc.phase+"-"+tc.signal.String(), func(t *testing.T) {
			dir, _ := os.Getwd()
			os.RemoveAll(filepath.Join(dir, "out"))
			cmd, output, syncDir := startHeldValidate(t, tc.phase, base...)
			cmd.Process.Signal(tc.signal)
			time.Sleep(50 * time.Millisecond) // the signal is taken before the phase goes on
			os.WriteFile(filepath.Join(syncDir, "release"), nil, 0o644)
			code := exitCodeOf(cmd.Wait())
			name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}[tc.signal]
			if code != exitInterrupted || !strings.Contains(output.String(), "validate was interrupted ("+name) ||
				!strings.Contains(output.String(), "verdict: INTERRUPTED") {
				t.Fatalf("exit %d, want 130 and the interrupt named:\n%s", code, output)
			}
			r := readValidateReport(t, filepath.Join("out", "r.json"))
			if r.Verdict != validate.Interrupted || !strings.Contains(r.Interrupted, name) || len(r.Cards) != 2 || r.ExitCode() != 130 {
				t.Fatalf("report: verdict %s, interrupted %q, %d cards", r.Verdict, r.Interrupted, len(r.Cards))
			}
			cut := 0
			for _, c := range r.Cards {
				if c.Verdict == validate.Fail {
					t.Errorf("GPU %d %s: FAIL for an interrupt: %+v", c.Index, c.UUID, c.Checks)
				}
				if c.CutShort {
					cut++
					if c.Verdict != validate.Interrupted {
						t.Errorf("GPU %d cut short with verdict %s", c.Index, c.Verdict)
					}
				}
			}
			if tc.phase != "health-after" && cut == 0 {
				t.Errorf("no card cut short by a signal %s", tc.phase)
			}
			if left := leftovers(t, "out"); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}

	// While the report is written the verdict already stands: the report is whole, the exit is
	// the verdict's.
	t.Run("report", func(t *testing.T) {
		os.RemoveAll("out")
		cmd, output, syncDir := startHeldValidate(t, "report", base...)
		cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(50 * time.Millisecond)
		os.WriteFile(filepath.Join(syncDir, "release"), nil, 0o644)
		code := exitCodeOf(cmd.Wait())
		r := readValidateReport(t, filepath.Join("out", "r.json"))
		if code != 0 || r.Verdict != validate.Pass || r.Counts.Skip == 0 || r.Interrupted != "" || !strings.Contains(output.String(), "the verdict is reached") {
			t.Errorf("exit %d, verdict %s (%q), %d skipped; want 0 and the emulator's PASS with its speed gates SKIP:\n%s", code, r.Verdict, r.Interrupted, r.Counts.Skip, output)
		}
		if left := leftovers(t, "out"); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})

	// A second signal does not wait for the measurement in flight.
	t.Run("a second signal", func(t *testing.T) {
		os.RemoveAll("out")
		cmd, output, _ := startHeldValidate(t, "kernel", base...)
		cmd.Process.Signal(syscall.SIGINT)
		time.Sleep(100 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := exitCodeOf(err); code != exitInterrupted || !strings.Contains(output.String(), "SIGINT again: stopping now") {
				t.Errorf("exit %d, want 130 at once:\n%s", code, output)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("still running 20 s after the second SIGINT:\n%s", output)
		}
		if _, err := os.Stat(filepath.Join("out", "r.json")); err == nil {
			t.Errorf("a report was written though the run stopped before its verdict")
		}
	})

	// Killed outright while the report is written: the old report stands whole, and no half
	// report takes its place.
	t.Run("killed while the report is written", func(t *testing.T) {
		os.RemoveAll("out")
		os.MkdirAll("out", 0o755)
		old := []byte(`{"schema": "decodebench.validate/v1", "hostname": "node-7", "verdict": "PASS"}` + "\n")
		os.WriteFile(filepath.Join("out", "r.json"), old, 0o644)
		cmd, _, _ := startHeldValidate(t, "report", base...)
		cmd.Process.Kill()
		cmd.Wait()
		if got, _ := os.ReadFile(filepath.Join("out", "r.json")); !bytes.Equal(got, old) {
			t.Errorf("r.json after a kill mid-write:\n%s", got)
		}
	})
}
