package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep/report"
	"github.com/decodebench/decodebench/bench/sweep/sweeptest"
)

// writeSynthRun writes a run directory of Llama-3-8B at batches 1, 8, 64 and context 1k into
// the working directory, its kernels' samples x scale with a relative spread of noise.
func writeSynthRun(t *testing.T, dir string, scale, noise float64, seed uint64) {
	t.Helper()
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	r := sweeptest.Run{Card: "NVIDIA H200", Model: s, Batches: []int{1, 8, 64}, Contexts: []int{1024},
		Scale: scale, Noise: noise, Samples: 100, Seed: seed}
	if err := sweeptest.Write(dir, r); err != nil {
		t.Fatal(err)
	}
}

func TestCompareExitStatus(t *testing.T) {
	testEnv(t, "")
	writeSynthRun(t, "base", 1, 0.003, 1)
	writeSynthRun(t, "slower", 1.10, 0.003, 2)
	writeSynthRun(t, "noisy", 1, 0.25, 3)

	// A run with itself: SAME, exit 0.
	out, _, code, msg := runApp(t, "compare", "--out", "cmp-same", "base", "base")
	if code != 0 || !strings.Contains(out, "configurations: 3 SAME") || !strings.Contains(out, "geometric mean of B / A: 1.000") {
		t.Errorf("base vs base: exit %d %q\n%s", code, msg, out)
	}
	// Slower on purpose: SLOWER, exit 1, and the reason on stderr.
	out, _, code, msg = runApp(t, "compare", "--out", "cmp-slower", "base", "slower")
	if code != exitFailure || !strings.Contains(msg, "SLOWER") || !strings.Contains(out, "configurations: 3 SLOWER") {
		t.Errorf("base vs slower: exit %d %q\n%s", code, msg, out)
	}
	if _, err := os.Stat(filepath.Join("cmp-slower", report.CompareHTMLFile)); err != nil {
		t.Errorf("a SLOWER comparison still writes its report: %v", err)
	}
	// A 10% slowdown under a 15% threshold is not a regression: SAME or UNSURE, exit 0.
	if _, _, code, msg = runApp(t, "compare", "--threshold", "15%", "--out", "cmp-15", "base", "slower"); code != 0 {
		t.Errorf("base vs slower at 15%%: exit %d %q", code, msg)
	}
	// Noisy: UNSURE, exit 0.
	out, _, code, msg = runApp(t, "compare", "--format", "md", "--out", "cmp-noisy", "base", "noisy")
	if code != 0 || !strings.Contains(out, "configurations: 3 UNSURE") || !strings.Contains(out, "| model | batch |") {
		t.Errorf("base vs noisy: exit %d %q\n%s", code, msg, out)
	}
	// JSON: stdout is the JSON alone.
	out, _, code, _ = runApp(t, "compare", "--format", "json", "--out", "cmp-json", "base", "slower")
	var j report.CompareJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil || code != exitFailure || !j.Regressed || j.Verdicts["SLOWER"] != 3 {
		t.Errorf("json: exit %d, %v, %+v\n%s", code, err, j, out)
	}
}

func TestCompareBadInput(t *testing.T) {
	testEnv(t, "")
	writeSynthRun(t, "base", 1, 0.003, 1)
	cases := []struct {
		desc string
		args []string
		want string
	}{
		{"threshold not a number", []string{"--threshold", "abc", "base", "base"}, `--threshold abc: want a fraction such as 0.03 or a percentage such as 3%`},
		{"threshold zero", []string{"--threshold", "0", "base", "base"}, "--threshold 0: must be more than 0"},
		{"threshold negative", []string{"--threshold", "-3%", "base", "base"}, "--threshold -3%: must be more than 0"},
		{"threshold 100%", []string{"--threshold", "100%", "base", "base"}, "less than 100%"},
		{"threshold NaN", []string{"--threshold", "NaN", "base", "base"}, "--threshold NaN"},
		{"confidence 100%", []string{"--confidence", "100%", "base", "base"}, "--confidence 100%"},
		{"confidence 0.2", []string{"--confidence", "0.2", "base", "base"}, "at least 50%"},
		{"format xml", []string{"--format", "xml", "base", "base"}, `--format "xml": accepted are table, md, json`},
		{"one directory", []string{"base"}, "two run directories"},
		{"not a run directory", []string{"base", "."}, "not a run directory"},
		{"a flag after the directories is read (a bad one refused)", []string{"base", "base", "--threshold", "5"}, "--threshold 5: must be more than 0"},
	}
	for _, tc := range cases {
		out, _, code, msg := runApp(t, append([]string{"compare", "--out", "cmp"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: exit %d, %q (stdout %q), want exit 2 and one line saying %q", tc.desc, code, msg, out, tc.want)
		}
		if _, err := os.Stat("cmp"); err == nil {
			t.Fatalf("%s: bad input wrote cmp/", tc.desc)
		}
	}
}
