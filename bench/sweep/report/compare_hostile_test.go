package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
)

// Two runs of one model in different formats (a bf16 KV cache against an fp8 one) are not
// matched by batch and context: there is nothing to compare, an error names what each run
// measured, and no verdict (SLOWER, exit 1) comes of it.
func TestCompareRefusesDifferentFormats(t *testing.T) {
	base := sampledRun(t)
	a := writeRun(t, base)
	fp8 := base
	fp8.Model.KVDType = model.FP8
	fp8.Scale, fp8.Seed = 1.10, 2
	b := writeRun(t, fp8)
	c, err := Compare(a, b)
	if err == nil || !strings.Contains(err.Error(), "not comparable") || !strings.Contains(err.Error(), "fp8 KV") {
		t.Errorf("bf16 KV against fp8 KV: %d pairs, regressed %v, error %v; want an error naming both formats", len(c.Pairs), c.Regressed(), err)
	}
}

// What compare passes over in a run directory it says: an unreadable line, a duplicated line,
// a missing kernels.jsonl; a kept sample that is no time (negative, zero) gives no interval
// (UNSURE, never SAME); a record whose rate does not follow from its step time (edited by
// hand: per-server halved) is refused, not set against the other run's.
func TestCompareSaysWhatItPassedOver(t *testing.T) {
	base := sampledRun(t)
	a := writeRun(t, base)
	b := writeRun(t, base)
	editLines(t, filepath.Join(b, sweep.ResultsFile), func(lines []string) []string {
		halved := strings.Replace(lines[1], `"per_server_tokens_per_s":`, `"per_server_tokens_per_s":0.5e-9,"x":`, 1)
		return append([]string{lines[0], "{not json", lines[0], halved}, lines[2:]...)
	})
	editLines(t, filepath.Join(b, sweep.KernelsFile), func(lines []string) []string {
		var m sweep.Measurement
		if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
			t.Fatal(err)
		}
		m.Stats.Samples[0] = -1
		line, _ := json.Marshal(m)
		return append([]string{string(line)}, lines[1:]...)
	})
	c, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(c.Notes, "\n")
	for _, want := range []string{"B: 1 line(s)", "could not be read", "recorded a configuration again", "inconsistent record", "per server"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not say %q:\n%s", want, notes)
		}
	}
	for _, p := range c.Pairs {
		if p.Batch == base.Batches[0] && p.Context == base.Contexts[0] && (p.Verdict != VerdictUnsure || !strings.Contains(p.NoInterval, "sample of -1")) {
			t.Errorf("batch %d context %d, a sample of -1 s in B: %s %q; want UNSURE naming the sample", p.Batch, p.Context, p.Verdict, p.NoInterval)
		}
	}
	if len(c.Pairs) != len(base.Batches)*len(base.Contexts)-1 {
		t.Errorf("%d pairs; want all but the edited record", len(c.Pairs))
	}

	os.Remove(filepath.Join(b, sweep.KernelsFile))
	c, _ = Compare(a, b)
	if notes := strings.Join(c.Notes, "\n"); !strings.Contains(notes, "has no kernels.jsonl") {
		t.Errorf("a missing kernels.jsonl is not named:\n%s", notes)
	}
}

func editLines(t *testing.T, path string, edit func([]string) []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := edit(strings.Split(strings.TrimSpace(string(data)), "\n"))
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
