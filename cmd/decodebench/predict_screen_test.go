package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/decodebench/decodebench/bench/format"
)

// checkWidth fails t for every line of text wider than an 80-column terminal.
func checkWidth(t *testing.T, what, text string) {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > screenWidth {
			t.Errorf("%s line %d is %d columns wide (wraps in an 80-column terminal):\n%s", what, i+1, n, line)
		}
	}
}

// The first screen of predict: every line fits 80 columns (the default axes: 54 rows, and
// with --out), the two number pairs a new user could not reconcile are explained where they
// appear (16.06 GB of weights stored against the 15.01 GB a step reads; the "141GB" of the
// H200's name against 151.40 GB), every chart is named by its path, and the last line says it
// is a prediction.
func TestPredictFirstScreen(t *testing.T) {
	hermetic(t, "")
	out, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--out", "out/predict")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	checkWidth(t, "predict", out)
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"weights: 16.06 GB stored; a step at batch 1 reads 15.01 GB of them (the WEIGHTS column): of the embedding table only the batch's rows",
		`memory: 151.40 GB = 141 GiB (the "141GB" of the card's name counts GiB, 2^30 bytes)`,
		"1k 1 15.01 0.1342 3.155 317 317 memory yes", // rounded for people: the CSV keeps every digit
		"out/predict/predict.csv", "out/predict/predict.json",
		"out/predict/tokens_vs_batch.png tokens/s against batch", "out/predict/tradeoff.png", "out/predict/roofline.png",
		"at most 317 tokens/s per request (batch 1, context 1k) and 24889 tokens/s per server (batch 256, context 1k",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("predict's screen lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "PREDICTION, not a measurement") {
		t.Errorf("the last line is %q, want the PREDICTION line", last)
	}
	if rows := strings.Count(out, " memory "); rows != 54 {
		t.Errorf("%d rows in the table, want 9 batches x 6 contexts", rows)
	}
	csv, err := os.ReadFile("out/predict/predict.csv")
	if err != nil || !strings.Contains(string(csv), ",0.00001571274285021225,") { // the compute time at batch 1, 1k
		t.Errorf("predict.csv lacks the step time in every digit (%v):\n%.400s", err, csv)
	}
}

// In every format but table the rows alone are on stdout, the people's numbers rounded in md,
// and the prose (the summary, the headline) moves to stderr, as the README says.
func TestPredictFormatsKeepProseOnStderr(t *testing.T) {
	hermetic(t, "")
	for _, name := range []string{format.MD, format.CSV, format.JSON, format.JSONL} {
		stdout, stderr, code, msg := runApp(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1,64", "--context", "8k", "--format", name)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, msg)
		}
		if cols, n, err := format.Shape(name, stdout); err != nil || strings.Join(cols, ",") != strings.Join(predictColumns(t), ",") || n != 2 {
			t.Errorf("%s: stdout is not the 2 rows (%v, %d rows, %v):\n%s", name, cols, n, err, stdout)
		}
		if strings.Contains(stdout, "PREDICTION") || !strings.Contains(stderr, "PREDICTION, not a measurement") ||
			!strings.Contains(stderr, "largest batch that fits") {
			t.Errorf("%s: the prose belongs on stderr:\nstdout:\n%s\nstderr:\n%s", name, stdout, stderr)
		}
		if name == format.MD && (!strings.Contains(stdout, "| 0.003351 |") || strings.Contains(stdout, "0.0033507498")) {
			t.Errorf("md: want the step time rounded for people (0.003351):\n%s", stdout)
		}
		if name != format.MD && !strings.Contains(stdout, "0.0033507498666666665") {
			t.Errorf("%s: want the step time in every digit:\n%s", name, stdout)
		}
	}
}

func predictColumns(t *testing.T) []string {
	rows, err := format.FromRecords([]predictRow{{}})
	if err != nil {
		t.Fatal(err)
	}
	return rows.Columns
}

// make run without a usable GPU: the Makefile's run target with this test binary as
// bin/decodebench. Every line fits 80 columns, and the last says that nothing was measured
// and why, so it stays on the screen.
func TestMakeRunWithoutGPU(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	hermetic(t, "")
	if err := helperCommand(t, ".", "info").Run(); err == nil {
		t.Skip("this machine has a usable GPU: make run would sweep it")
	}
	os.MkdirAll("bin", 0o755)
	script := "#!/bin/sh\n" + helperEnv + "=1 exec '" + os.Args[0] + "' -test.run='^TestSweepHelperProcess$' -- \"$@\"\n"
	if err := os.WriteFile("bin/decodebench", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-I", repo, "-f", filepath.Join(repo, "Makefile"), "-o", "bin/decodebench", "run")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("make run: %v\n%s", err, out.String())
	}
	text := out.String()
	checkWidth(t, "make run", text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	tail := strings.Join(strings.Fields(strings.Join(lines[max(len(lines)-4, 0):], " ")), " ")
	for _, want := range []string{"NOTHING WAS MEASURED: no usable NVIDIA GPU here (", "not a measurement."} {
		if !strings.Contains(tail, want) {
			t.Errorf("the last lines of make run lack %q:\n%s", want, text)
		}
	}
	for _, chart := range []string{"tokens_vs_batch", "tradeoff", "roofline"} {
		path := "out/predict/" + chart + ".png"
		if _, err := os.Stat(path); err != nil || !strings.Contains(text, path) {
			t.Errorf("chart %s not written or not named (%v)", path, err)
		}
	}
}
