package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestVerifyLinearShapes(t *testing.T) {
	useEmu(t)
	cases := []struct {
		batch, n, k int
		dtype       string
		variant     string
		splitK      int
	}{
		{1, 1, 8, "bf16", "auto", 0},
		{1, 7, 24, "fp16", "gemv", 0},
		{1, 300, 200, "bf16", "gemv", 3}, // splits of 9, 9 and 7 chunks of 8
		{2, 9, 16, "bf16", "gemv", 64},   // more splits than chunks: most are empty
		{3, 7, 24, "bf16", "mma", 0},
		{3, 300, 200, "fp16", "auto", 0},
		{5, 33, 64, "fp16", "gemv", 8},
		{8, 1, 8, "fp16", "mma", 0},
		{8, 300, 200, "bf16", "gemv", 4},
		{17, 7, 200, "bf16", "mma", 0},
		{17, 300, 24, "fp16", "gemv", 0},
		{64, 7, 24, "bf16", "auto", 0},
		{64, 300, 200, "fp16", "mma", 0},
		{256, 7, 24, "bf16", "auto", 0},
		{256, 1, 8, "fp16", "gemv", 0},
		{256, 9, 40, "fp16", "mma", 1},
		{17, 130, 136, "bf16", "tiled", 0},
		{257, 7, 200, "fp16", "tiled", 5}, // 4 k tiles in 5 splits: one is empty
		{1000, 9, 24, "bf16", "tiled", 0},
	}
	for _, c := range cases {
		name := fmt.Sprintf("b%d_n%d_k%d_%s_%s_split%d", c.batch, c.n, c.k, c.dtype, c.variant, c.splitK)
		t.Run(name, func(t *testing.T) {
			out, code, msg := runCLI(t, "verify", "linear", "--backend", "emu", "--json",
				"--batch", fmt.Sprint(c.batch), "--n", fmt.Sprint(c.n), "--k", fmt.Sprint(c.k),
				"--dtype", c.dtype, "--variant", c.variant, "--split-k", fmt.Sprint(c.splitK), "--seed", fmt.Sprint(c.n))
			var rep linearReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("exit %d (%s); output is not one JSON object: %v\n%s", code, msg, err, out)
			}
			if code != 0 || !rep.Passed {
				t.Fatalf("exit %d (%s): %s", code, msg, out)
			}
			if rep.Batch != c.batch || rep.N != c.n || rep.K != c.k || rep.DType != c.dtype || rep.Backend != "emu" || rep.Kernel != "linear" {
				t.Errorf("report describes another run: %+v", rep)
			}
			if c.variant != "auto" && rep.Variant != c.variant {
				t.Errorf("variant %s was asked, %s ran", c.variant, rep.Variant)
			}
			if c.variant == "auto" && rep.Variant != "gemv" && rep.Variant != "mma" && rep.Variant != "tiled" {
				t.Errorf("auto resolved to %q", rep.Variant)
			}
			if c.splitK > 0 && rep.SplitK != c.splitK {
				t.Errorf("split-k %d was asked, %d ran", c.splitK, rep.SplitK)
			}
			if rep.SplitK > 1 && rep.WorkspaceBytes == 0 {
				t.Errorf("split-k %d without a workspace", rep.SplitK)
			}
			if rep.RelError == nil || float64(*rep.RelError) > rep.Tolerance || rep.Tolerance != ref.LinearTolerance(map[string]ref.DType{"bf16": ref.BF16, "fp16": ref.FP16}[c.dtype]) {
				t.Errorf("rel error %v, tolerance %v", rep.RelError, rep.Tolerance)
			}
		})
	}
}

func TestVerifyLinearText(t *testing.T) {
	useEmu(t)
	out, code, msg := runCLI(t, "verify", "linear", "--backend", "emu", "--batch", "3", "--n", "7", "--k", "24", "--variant", "gemv", "--split-k", "2")
	if code != 0 {
		t.Fatalf("exit %d (%s)\n%s", code, msg, out)
	}
	for _, want := range []string{"batch 3, n 7, k 24, bf16", "emu backend", "plan: variant gemv, split-k 2", "relative L2 error", "tolerance 0.01", "worst element", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVerifyProbes(t *testing.T) {
	useEmu(t)
	for _, name := range []string{"read", "write", "copy", "triad", "fma", "mma"} {
		t.Run(name, func(t *testing.T) {
			// 1028 words: not a multiple of any launch's sweep, so the kernels' tails run.
			out, code, msg := runCLI(t, "verify", "probe", name, "--backend", "emu", "--words", "1028", "--json")
			if code != 0 {
				t.Fatalf("exit %d (%s)\n%s", code, msg, out)
			}
			var rep struct {
				Passed bool
				Probes []probeReport
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			if !rep.Passed || len(rep.Probes) != 1 || rep.Probes[0].Name != name || rep.Probes[0].Checked == 0 {
				t.Errorf("report: %s", out)
			}
		})
	}
	t.Run("all with a forced launch", func(t *testing.T) {
		out, code, msg := runCLI(t, "verify", "probe", "all", "--backend", "emu", "--words", "4096", "--blocks", "3", "--threads", "96")
		if code != 0 {
			t.Fatalf("exit %d (%s)\n%s", code, msg, out)
		}
		if n := strings.Count(out, " PASS "); n != 6 {
			t.Errorf("%d of 6 probes pass:\n%s", n, out)
		}
		if !strings.Contains(out, "3 blocks x 96 threads") {
			t.Errorf("the memory probes did not take --blocks 3 --threads 96:\n%s", out)
		}
	})
}

func TestVerifyUsageErrors(t *testing.T) {
	hermetic(t, "") // validation comes before any library is looked for
	linear := []string{"verify", "linear", "--backend", "emu"}
	cases := []usageCase{
		{"k not a multiple of 8", append(linear, "--batch", "1", "--n", "8", "--k", "1001"), "--k 1001"},
		{"k zero", append(linear, "--batch", "1", "--n", "8", "--k", "0"), "--k 0"},
		{"batch 0", append(linear, "--batch", "0", "--n", "8", "--k", "8"), "--batch 0"},
		{"batch 1025", append(linear, "--batch", "1025", "--n", "8", "--k", "8"), "--batch 1025"},
		{"dtype fp32", append(linear, "--batch", "1", "--n", "8", "--k", "8", "--dtype", "fp32"), `"fp32"`},
		{"n 0", append(linear, "--batch", "1", "--n", "0", "--k", "8"), "--n 0"},
		{"unknown variant", append(linear, "--batch", "1", "--n", "8", "--k", "8", "--variant", "wmma"), `"wmma"`},
		{"negative split-k", append(linear, "--batch", "1", "--n", "8", "--k", "8", "--split-k", "-1"), "--split-k -1"},
		{"split-k above the kernels' 64", append(linear, "--batch", "1", "--n", "8", "--k", "8", "--variant", "gemv", "--split-k", "65"), "--split-k 65"},
		{"split-k with mma", append(linear, "--batch", "1", "--n", "8", "--k", "8", "--variant", "mma", "--split-k", "2"), "--split-k 2"},
		{"missing --batch", append(linear, "--n", "8", "--k", "8"), "--batch"},
		{"not a number", append(linear, "--batch", "x", "--n", "8", "--k", "8"), "--batch x: want a whole number"},
		{"stray argument", append(linear, "--batch", "1", "--n", "8", "--k", "8", "extra"), `"extra"`},
		{"unknown backend", []string{"verify", "linear", "--batch", "1", "--n", "8", "--k", "8", "--backend", "rocm"}, `"rocm"`},
		{"negative device", append(linear, "--batch", "1", "--n", "8", "--k", "8", "--device", "-1"), "--device -1"},
		{"no kernel", []string{"verify"}, "linear, probe or attention"},
		{"unknown kernel", []string{"verify", "conv"}, `"conv"`},
		{"no probe name", []string{"verify", "probe"}, "read, write"},
		{"unknown probe", []string{"verify", "probe", "stream"}, `"stream"`},
		{"words not a multiple of 4", []string{"verify", "probe", "read", "--words", "6"}, "--words 6"},
		{"threads not a multiple of 32", []string{"verify", "probe", "copy", "--threads", "33"}, "--threads 33"},
		{"unknown probe backend", []string{"verify", "probe", "all", "--backend", "opencl"}, `"opencl"`},
	}
	checkUsageErrors(t, cases)
}

// usageCase is a command line that must fail as a usage error naming want.
type usageCase struct {
	desc string
	args []string
	want string // the message names the offending value
}

// checkUsageErrors runs each case as a subtest of checkUsageError.
func checkUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) { checkUsageError(t, c.args, c.want) })
	}
}

// checkUsageError runs args and fails unless they exit 2 with a one-line message naming each
// of want, and nothing on standard output.
func checkUsageError(t *testing.T, args []string, want ...string) {
	t.Helper()
	out, code, msg := runCLI(t, args...)
	if code != exitUsage {
		t.Errorf("exit %d, want %d (message %q)", code, exitUsage, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
			t.Errorf("message %q should be one line naming %s", msg, w)
		}
	}
	if out != "" {
		t.Errorf("a usage error wrote output: %q", out)
	}
}

func TestVerifyDeviceOutOfRange(t *testing.T) {
	useEmu(t)
	_, code, msg := runCLI(t, "verify", "probe", "read", "--backend", "emu", "--device", "7")
	if code != exitUsage || !strings.Contains(msg, "--device 7") {
		t.Errorf("exit %d, message %q", code, msg)
	}
}

// The failure paths, on fake libraries whose kernels are wrong in known ways.

func TestVerifyLinearCatchesWrongKernels(t *testing.T) {
	args := []string{"verify", "linear", "--backend", "emu", "--json", "--batch", "3", "--n", "40", "--k", "64"}
	cases := []struct {
		desc, define string
		check        func(t *testing.T, rep linearReport)
	}{
		{"an element never written stays NaN", "FAKE_LINEAR_SKIP=77", func(t *testing.T, rep linearReport) {
			if rep.NonFinite != 1 || rep.Worst.Index != 77 || rep.Worst.Row != 1 || rep.Worst.Col != 37 || !strings.Contains(rep.Reason, "NaN") {
				t.Errorf("worst %+v, reason %q", rep.Worst, rep.Reason)
			}
		}},
		{"an offset on every element", "FAKE_LINEAR_BIAS=0.05f", func(t *testing.T, rep linearReport) {
			if rep.RelError == nil || float64(*rep.RelError) <= rep.Tolerance || rep.NonFinite != 0 {
				t.Errorf("rel error %v, tolerance %v", rep.RelError, rep.Tolerance)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", c.define))
			out, code, msg := runCLI(t, args...)
			if code != exitFailure || !strings.Contains(msg, "verify linear failed") {
				t.Fatalf("exit %d (%s), want %d", code, msg, exitFailure)
			}
			var rep linearReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("a failed run's JSON does not parse (NaN?): %v\n%s", err, out)
			}
			if rep.Passed {
				t.Error("passed")
			}
			c.check(t, rep)
		})
	}
	t.Run("text", func(t *testing.T) {
		hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", "FAKE_LINEAR_SKIP=0"))
		out, code, _ := runCLI(t, "verify", "linear", "--backend", "emu", "--batch", "1", "--n", "8", "--k", "8")
		if code != exitFailure || !strings.Contains(out, "FAIL") || !strings.Contains(out, "element 0 (row 0, col 0): got NaN") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	// A NaN the kernel writes (FAKEKERNELS_FAULT=nan): rel_error null with the count, in JSON
	// and in words.
	t.Run("nan", func(t *testing.T) {
		hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so"))
		t.Setenv("FAKEKERNELS_FAULT", "nan")
		out, code, _ := runCLI(t, "verify", "linear", "--backend", "emu", "--batch", "2", "--n", "8", "--k", "8", "--json")
		var rep linearReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitFailure || rep.RelError != nil || rep.NonFinite != 1 ||
			!strings.Contains(out, `"rel_error": null`) {
			t.Errorf("exit %d (%v):\n%s", code, err, out)
		}
		text, _, _ := runCLI(t, "verify", "linear", "--backend", "emu", "--batch", "2", "--n", "8", "--k", "8")
		if !strings.Contains(text, "relative L2 error undefined: 1 output(s) NaN or infinite") {
			t.Errorf("text:\n%s", text)
		}
	})
}

func TestVerifyProbesCatchWrongKernels(t *testing.T) {
	hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", "FAKE_PROBE_BUG"))
	out, code, msg := runCLI(t, "verify", "probe", "all", "--backend", "emu", "--words", "64", "--json")
	if code != exitFailure {
		t.Fatalf("exit %d (%s), want %d", code, msg, exitFailure)
	}
	var rep struct {
		Passed bool
		Probes []probeReport
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Passed || len(rep.Probes) != 6 {
		t.Fatalf("report: %s", out)
	}
	for _, p := range rep.Probes {
		// The fake gets one value of each memory probe wrong; its compute probes write 1.0.
		if p.Passed || p.Mismatches < 1 || p.First == "" {
			t.Errorf("%s: %+v", p.Name, p)
		}
		if p.Name != "fma" && p.Name != "mma" && p.Mismatches != 1 {
			t.Errorf("%s: %d mismatches, want exactly the one planted", p.Name, p.Mismatches)
		}
	}
}

func TestVerifyBackendErrors(t *testing.T) {
	t.Run("auto without a GPU library", func(t *testing.T) {
		hermetic(t, t.TempDir())
		_, code, msg := runCLI(t, "verify", "probe", "read")
		if code != exitFailure || !strings.Contains(msg, "make kernels") || !strings.Contains(msg, "--backend emu") {
			t.Errorf("exit %d, message %q", code, msg)
		}
	})
	t.Run("auto with a GPU library and no device", func(t *testing.T) {
		hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_cuda.so", `FAKE_BACKEND="cuda"`, "FAKE_DEVICES=0"))
		_, code, msg := runCLI(t, "verify", "linear", "--batch", "1", "--n", "8", "--k", "8")
		if code != exitFailure || !strings.Contains(msg, "0 devices") || !strings.Contains(msg, "--backend emu") {
			t.Errorf("exit %d, message %q", code, msg)
		}
	})
	// The emulator has no GPU for cuBLASLt: say so, not "unsupported shape" (the shape is fine).
	t.Run("cublas on the emulator", func(t *testing.T) {
		useEmu(t)
		out, code, msg := runCLI(t, "verify", "linear", "--backend", "emu", "--variant", "cublas", "--batch", "1", "--n", "64", "--k", "64")
		if code != exitUsage || !strings.Contains(msg, "needs a GPU, and the emu backend has none") || !strings.Contains(msg, "--backend cuda") ||
			strings.Contains(msg, "unsupported shape") || strings.Contains(msg, "\n") {
			t.Errorf("exit %d, message %q (stdout %q): want exit 2 and one line saying the emulator has no GPU", code, msg, out)
		}
	})
	t.Run("emu not built", func(t *testing.T) {
		hermetic(t, t.TempDir())
		_, code, msg := runCLI(t, "verify", "linear", "--backend", "emu", "--batch", "1", "--n", "8", "--k", "8")
		if code != exitFailure || !strings.Contains(msg, "make emu") {
			t.Errorf("exit %d, message %q", code, msg)
		}
	})
}

func TestJSONFloat(t *testing.T) {
	in := []jsonFloat{1.5, jsonFloat(math.NaN()), jsonFloat(math.Inf(1)), jsonFloat(math.Inf(-1))}
	b, err := json.Marshal(in)
	if err != nil || string(b) != `[1.5,"NaN","+Inf","-Inf"]` {
		t.Fatalf("%s, %v", b, err)
	}
	var back []jsonFloat
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 4 || back[0] != 1.5 ||
		!math.IsNaN(float64(back[1])) || !math.IsInf(float64(back[2]), 1) || !math.IsInf(float64(back[3]), -1) {
		t.Errorf("round trip: %v, %v", back, err)
	}
}

// TestVerifyOnGPU runs the same checks on a GPU where there is one (skipped otherwise, failed
// under DECODEBENCH_REQUIRE_GPU=1): real tensor cores, real fmaf, the auto launch sizes.
func TestVerifyOnGPU(t *testing.T) {
	lib := cgotest.CUDA(t)
	hermetic(t, lib.Path())
	for _, args := range [][]string{
		{"--batch", "1", "--n", "4096", "--k", "4096"},
		{"--batch", "3", "--n", "300", "--k", "200", "--variant", "gemv", "--split-k", "3", "--dtype", "fp16"},
		{"--batch", "17", "--n", "1000", "--k", "1024", "--variant", "mma"},
		{"--batch", "256", "--n", "7", "--k", "24"},
	} {
		out, code, msg := runCLI(t, append([]string{"verify", "linear", "--backend", "auto"}, args...)...)
		if code != 0 || !strings.Contains(out, "cuda backend") {
			t.Errorf("verify linear %v: exit %d (%s)\n%s", args, code, msg, out)
		}
	}
	out, code, msg := runCLI(t, "verify", "probe", "all", "--backend", "cuda", "--words", fmt.Sprint(1<<24))
	if code != 0 {
		t.Errorf("verify probe all: exit %d (%s)\n%s", code, msg, out)
	}
}
