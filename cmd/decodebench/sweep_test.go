package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"github.com/decodebench/decodebench/bench/measure"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/report"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// tinySweep is a model and timing small enough for the emulator to sweep in about a second.
func tinySweep(out string, extra ...string) []string {
	args := []string{"sweep", "--backend", "emu", "--out", out, "--progress", "lines",
		"--hidden", "128", "--ffn", "256", "--heads", "2", "--kv-heads", "1", "--head-dim", "64", "--layers", "2", "--vocab", "512",
		"--batch", "1,2,4", "--context", "64,128",
		"--warmup", "1", "--min-samples", "3", "--min-time", "0s", "--max-time", "50ms", "--target-spread", "0.5", "--max-samples", "5",
		"--max-rotate-bytes", "1048576", "--gpu", "h200"}
	return overrideFlags(args, extra...)
}

func readSweepRecords(t *testing.T, dir string) []sweep.Record {
	t.Helper()
	var out []sweep.Record
	f, err := os.Open(filepath.Join(dir, sweep.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r sweep.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: a line that is not a record: %v", sweep.ResultsFile, err)
		}
		out = append(out, r)
	}
	return out
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

func TestSweepUsageErrors(t *testing.T) {
	sweepHermetic(t, "") // no kernels library: any device work would exit 1, not 2
	os.MkdirAll("taken", 0o755)
	os.WriteFile(filepath.Join("taken", sweep.InfoFile), []byte("{}"), 0o644)
	tests := []struct {
		desc string
		args []string
		want string
	}{
		{"zero batch", []string{"--model", "llama3-8b", "--batch", "0"}, `"0": values must be positive`},
		{"batch past the kernels", []string{"--model", "llama3-8b", "--batch", "1,2048"}, "batch 2048"},
		{"bad context", []string{"--model", "llama3-8b", "--context", "1k-"}, "--context"},
		{"unknown preset", []string{"--model", "llama9-1t"}, `unknown model "llama9-1t"`},
		{"fp8", []string{"--model", "llama3-8b", "--dtype", "fp8"}, `--dtype "fp8"`},
		{"head dim", []string{"--hidden", "128", "--ffn", "256", "--heads", "2", "--head-dim", "100", "--layers", "1", "--vocab", "64"}, "head dim 100"},
		{"missing dims", []string{"--hidden", "128"}, "missing --ffn"},
		{"tp does not divide", []string{"--model", "llama3-8b", "--tp", "3"}, "--tp 3"},
		{"device", []string{"--model", "llama3-8b", "--device", "first"}, `--device "first"`},
		{"gpu", []string{"--model", "llama3-8b", "--gpu", "h900"}, `--gpu: unknown GPU "h900"`},
		{"datasheet (the old --gpu)", []string{"--model", "llama3-8b", "--datasheet", "h900"}, `--gpu: unknown GPU "h900"`},
		{"a device given twice, as --gpu and --device", []string{"--model", "llama3-8b", "--gpu", "1", "--device", "0"}, "give the device once, with --device"},
		{"resume nothing", []string{"--model", "llama3-8b", "--resume", "nowhere"}, "--resume nowhere"},
		{"out holds a run", []string{"--model", "llama3-8b", "--out", "taken"}, "already holds a run"},
		{"retry without resume", []string{"--model", "llama3-8b", "--retry-failed"}, "--retry-failed goes with --resume"},
		{"argument", []string{"--model", "llama3-8b", "extra"}, `got "extra"`},
		{"progress", []string{"--model", "llama3-8b", "--progress", "fancy"}, `--progress "fancy"`},
		{"timing rule", []string{"--model", "llama3-8b", "--min-samples", "0"}, "timing rule"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, code, msg := runSweepCLI(t, append([]string{"sweep"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(msg, tc.want) {
				t.Fatalf("exit %d %q; want exit 2 naming %q", code, msg, tc.want)
			}
		})
	}
	for _, args := range [][]string{{"plot"}, {"report", "taken", "x"}, {"plot", "nowhere"}, {"compare", "taken"}, {"compare", "taken", "nowhere"},
		{"compare", "taken", "taken", "--out", "x"}} {
		if _, code, msg := runSweepCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d %q, want 2", args, code, msg)
		}
	}
}

func TestSweepEmulatedEndToEnd(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	start := time.Now()
	stdout, code, msg := runSweepCLI(t, tinySweep("run")...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, stdout)
	}
	t.Logf("emulated sweep of 6 configurations in %v", time.Since(start))
	if !strings.Contains(stdout, "report: run/report.html") || !strings.Contains(stdout, "EMULATED") {
		t.Errorf("stdout does not point at the report or say it was emulated:\n%s", stdout)
	}
	for _, name := range []string{sweep.InfoFile, sweep.ResultsFile, sweep.KernelsFile, sweep.CSVFile, report.MarkdownFile, report.HTMLFile,
		"plots/tokens_vs_batch.png", "plots/tokens_vs_batch.svg", "plots/tradeoff.png", "plots/tradeoff.svg", "plots/tokens_vs_context_server.svg",
		"plots/efficiency_measured.png", "plots/efficiency_datasheet.svg", "plots/roofline.png", "plots/roofline.svg"} {
		if _, err := os.Stat(filepath.Join("run", name)); err != nil {
			t.Errorf("run/%s missing", name)
		}
	}

	// run.json: the identity, the command line, the measured ceilings.
	var info sweep.RunInfo
	data, _ := os.ReadFile(filepath.Join("run", sweep.InfoFile))
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	if info.State != sweep.StateComplete || !info.Backend.Emulated || info.Version != version ||
		!info.Measured.Known() || info.Datasheet.BandwidthBytesPerSec != 4.8e12 || info.Card.Name == "" ||
		!slices.Contains(info.Flags, "--hidden=128") || len(info.CommandLine) == 0 {
		t.Errorf("run.json: %+v", info)
	}
	// Every record: the documented fields, both levels of tokens/s, marked emulated.
	var raw []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(os.ReadFile(filepath.Join("run", sweep.ResultsFile))))), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(line), &m)
		raw = append(raw, m)
	}
	for _, m := range raw {
		for _, field := range []string{"batch", "context", "model", "status", "reason", "step_seconds", "per_request_tokens_per_s",
			"per_server_tokens_per_s", "achieved_gbps", "roofline_fraction", "roofline_fraction_datasheet", "roofline_fraction_measured", "throttled", "kernels"} {
			if _, ok := m[field]; !ok {
				t.Errorf("record %v lacks %q", m["key"], field)
			}
		}
	}
	records := readSweepRecords(t, "run")
	if len(records) != 6 {
		t.Fatalf("%d records, want 6", len(records))
	}
	for _, r := range records {
		if r.Status != measure.StatusOK || !r.Emulated || r.PerServerTokensPerSec != float64(r.Batch)*r.PerRequestTokensPerSec ||
			r.RooflineFraction != r.RooflineFractionMeasured || len(r.Kernels) != 6 || r.Throttled {
			t.Errorf("record %s: %+v", r.Key, r)
		}
	}
	html := string(mustRead(os.ReadFile(filepath.Join("run", report.HTMLFile))))
	if !strings.Contains(html, "EMULATED RUN: THESE TIMES ARE NOT A SPEED") {
		t.Errorf("report.html does not say loudly that the run was emulated")
	}

	// plot and report redraw from the directory.
	if out, code, msg := runSweepCLI(t, "plot", "run"); code != 0 || !strings.Contains(out, "roofline.svg") {
		t.Errorf("plot: exit %d %s\n%s", code, msg, out)
	}
	if out, code, msg := runSweepCLI(t, "report", "run"); code != 0 || !strings.Contains(out, "report.html") {
		t.Errorf("report: exit %d %s\n%s", code, msg, out)
	}

	// A resume with the same axes measures nothing; with a longer batch axis only what is new.
	kernelsBefore := countLines(t, filepath.Join("run", sweep.KernelsFile))
	args := tinySweep("", "--resume", "run")
	args = slices.DeleteFunc(args, func(s string) bool { return s == "--out" || s == "" })
	if out, code, msg := runSweepCLI(t, args...); code != 0 || !strings.Contains(out, "6 already done") {
		t.Fatalf("resume: exit %d %s\n%s", code, msg, out)
	}
	if n := countLines(t, filepath.Join("run", sweep.KernelsFile)); n != kernelsBefore {
		t.Errorf("a resume of a complete run measured %d kernels", n-kernelsBefore)
	}
	args = append(args, "--batch", "1,2,4,8")
	if out, code, msg := runSweepCLI(t, args...); code != 0 || !strings.Contains(out, "2 configuration(s) recorded") {
		t.Fatalf("resume with batch 8: exit %d %s\n%s", code, msg, out)
	}
	checkRecordedOnce(t, "run", 8)
	// --resume DIR alone continues the same sweep: the model, axes, backend and timing come
	// from run.json, the axes as the last resume grew them.
	if out, code, msg := runSweepCLI(t, "sweep", "--resume", "run", "--progress", "lines"); code != 0 || !strings.Contains(out, "8 already done") {
		t.Fatalf("bare resume: exit %d %s\n%s", code, msg, out)
	}
	// A resume with another model axis is refused, naming both.
	other := slices.Clone(args)
	other[slices.Index(other, "--layers")+1] = "3"
	if _, code, msg := runSweepCLI(t, other...); code != exitUsage || !strings.Contains(msg, "model axis") {
		t.Errorf("resume with other layers: exit %d %q", code, msg)
	}

	// compare: the run against itself.
	if out, code, msg := runSweepCLI(t, "compare", "--out", "cmp", "run", "run"); code != 0 || !strings.Contains(out, "geometric mean of B / A: 1.000") {
		t.Errorf("compare: exit %d %s\n%s", code, msg, out)
	}
	if _, err := os.Stat(filepath.Join("cmp", report.CompareHTMLFile)); err != nil {
		t.Errorf("compare.html: %v", err)
	}
}

// failingMeasurer fails every kernel whose key contains substr.
type failingMeasurer struct {
	sweep.Measurer
	substr string
}

func (f failingMeasurer) Measure(s measure.Spec) measure.Outcome {
	if strings.Contains(s.Key(), f.substr) {
		return measure.Outcome{Spec: s, Status: measure.StatusFailed, Reason: "injected: verification failed, 3 NaN outputs"}
	}
	return f.Measurer.Measure(s)
}

func TestSweepInjectedFailureSkipAndThrottle(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	sweepMeasurerHook = func(m sweep.Measurer) sweep.Measurer {
		return failingMeasurer{Measurer: m, substr: "attention bf16 b=2 q=2 kv=1 d=64 ctx=128"}
	}
	// The card "throttles" from the second reading on.
	var mu sync.Mutex
	readings := 0
	sweepTelemetryHook = func() telemetry.Source {
		return telemetry.Func(func() (gpuinfo.Telemetry, error) {
			mu.Lock()
			defer mu.Unlock()
			readings++
			tel := gpuinfo.Telemetry{SMClockMHz: 1980, MemClockMHz: 3201, PowerWatts: 600}
			if readings > 1 {
				tel.ThrottleReasons, tel.Throttled, tel.ThrottleText = 4, true, []string{"SW Power Cap"}
			}
			return tel, nil
		})
	}
	t.Cleanup(func() { sweepMeasurerHook, sweepTelemetryHook = nil, nil })

	// The tiny model's weights are 853248 bytes and a sequence of 128 tokens has 65536 bytes of
	// KV cache: with room for three such sequences and nothing kept free, batch 4 at context
	// 128 does not fit and everything else does.
	memory := "1049856"
	out, code, msg := runSweepCLI(t, tinySweep("run", "--memory-bytes", memory, "--reserve", "0")...)
	if code != exitFailure || !strings.Contains(msg, "1 configuration(s) failed") {
		t.Fatalf("exit %d %q, want 1 for the injected failure\n%s", code, msg, out)
	}
	byKey := map[string]sweep.Record{}
	for _, r := range readSweepRecords(t, "run") {
		byKey[r.Key] = r
	}
	var failed, skipped, throttled int
	for _, r := range byKey {
		switch r.Status {
		case measure.StatusFailed:
			failed++
			if !strings.Contains(r.Reason, "injected") || r.StepSeconds != 0 || r.PerServerTokensPerSec != 0 {
				t.Errorf("failed record %+v", r)
			}
		case measure.StatusSkipped:
			skipped++
			if !strings.Contains(r.Reason, "does not fit in memory") {
				t.Errorf("skipped record reason %q", r.Reason)
			}
		}
		if r.Throttled {
			throttled++
			if !slices.Contains(r.ThrottleReasons, "SW Power Cap") {
				t.Errorf("throttled record without its reason: %v", r.ThrottleReasons)
			}
		}
	}
	t.Logf("%d records: %d failed, %d skipped, %d throttled", len(byKey), failed, skipped, throttled)
	if failed != 1 || skipped != 1 || throttled == 0 {
		t.Fatalf("want one failed, some skipped and some throttled records")
	}
	csvText := string(mustRead(os.ReadFile(filepath.Join("run", sweep.CSVFile))))
	html := string(mustRead(os.ReadFile(filepath.Join("run", report.HTMLFile))))
	if !strings.Contains(html, "injected: verification failed") || !strings.Contains(html, `class="throttled"`) || !strings.Contains(html, "does not fit in memory") {
		t.Errorf("report.html does not show the failure, the skip and the throttling")
	}
	// The failed configuration is no speed: its CSV row has no numbers.
	for _, line := range strings.Split(csvText, "\n") {
		if strings.Contains(line, ",failed,") && !strings.Contains(line, ",,,,") {
			t.Errorf("failed CSV row carries numbers: %s", line)
		}
	}
}

// A budget that no configuration fits is a usage error before any measurement, and leaves
// no run behind.
func TestSweepBudgetThatDropsEverything(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	out, code, msg := runSweepCLI(t, tinySweep("run", "--budget", "1ns")...)
	if code != exitUsage || !strings.Contains(msg, "--budget 1ns") || !strings.Contains(msg, "drops every configuration (6)") {
		t.Fatalf("exit %d %q\n%s; want exit 2 saying the budget drops all 6", code, msg, out)
	}
	if _, err := os.Stat("run"); err == nil {
		t.Errorf("a sweep refused before any measurement left its directory behind")
	}
}

// Ctrl-C in the middle: the measured configurations are on disk with a report, exit 130; the
// resume measures the rest and repeats nothing.
func TestSweepInterruptAndResume(t *testing.T) {
	testtier.Slow(t, "a sweep interrupted and resumed")
	sweepHermetic(t, cgotest.EmuPath(t))
	dir, _ := os.Getwd()
	// Each measurement samples for 150 ms, so the sweep lasts seconds: time to interrupt it.
	args := tinySweep("run", "--batch", "1,2,4,8", "--context", "64,128,256", "--min-time", "150ms", "--max-time", "300ms", "--max-samples", "1000")
	cmd := helperCommand(t, dir, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, "run", sweep.ResultsFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if data, err := os.ReadFile(results); err == nil && bytes.Count(data, []byte("\n")) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no record after 60 s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("interrupted sweep: %v, want exit 130\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping after the measurement in flight") {
		t.Errorf("no word of the interrupt on stderr:\n%s", stderr.String())
	}
	var info sweep.RunInfo
	json.Unmarshal(mustRead(os.ReadFile(filepath.Join("run", sweep.InfoFile))), &info)
	measured := readSweepRecords(t, "run")
	if info.State != sweep.StateInterrupted || len(measured) == 0 || len(measured) >= 12 {
		t.Fatalf("after the interrupt: state %q, %d records", info.State, len(measured))
	}
	if _, err := os.Stat(filepath.Join("run", report.HTMLFile)); err != nil {
		t.Errorf("no report for what was measured: %v", err)
	}
	kernelKeys := func() map[string]int {
		keys := map[string]int{}
		data := mustRead(os.ReadFile(filepath.Join("run", sweep.KernelsFile)))
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var m sweep.Measurement
			json.Unmarshal([]byte(line), &m)
			keys[m.Key]++
		}
		return keys
	}
	before := kernelKeys()

	resume := tinySweep("", "--resume", "run", "--batch", "1,2,4,8", "--context", "64,128,256")
	resume = slices.DeleteFunc(resume, func(s string) bool { return s == "--out" || s == "" })
	if out, code, msg := runSweepCLI(t, resume...); code != 0 {
		t.Fatalf("resume: exit %d %s\n%s", code, msg, out)
	}
	checkRecordedOnce(t, "run", 12)
	for k, n := range kernelKeys() {
		if n != 1 {
			t.Errorf("kernel %s measured %d times (%d before the resume)", k, n, before[k])
		}
	}
	json.Unmarshal(mustRead(os.ReadFile(filepath.Join("run", sweep.InfoFile))), &info)
	if info.State != sweep.StateComplete || len(info.Sessions) != 2 {
		t.Errorf("after the resume: state %q, %d sessions", info.State, len(info.Sessions))
	}
}

func mustRead[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// checkRecordedOnce fails unless the run in dir holds want configurations after a resume,
// each recorded once.
func checkRecordedOnce(t *testing.T, dir string, want int) {
	t.Helper()
	keys := map[string]int{}
	for _, r := range readSweepRecords(t, dir) {
		keys[r.Key]++
	}
	if len(keys) != want {
		t.Errorf("%d configurations after the resume, want %d", len(keys), want)
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%s recorded %d times", k, n)
		}
	}
}
