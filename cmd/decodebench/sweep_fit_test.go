package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// A sweep of which nothing fits the emulator's memory is refused before the probes (no run
// directory, so nothing was measured), exit 2, naming why and the tiny preset to try.
func TestSweepOfWhichNothingFits(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	out := "run-nothing-fits"
	_, code, msg := runSweepCLI(t, "sweep", "--backend", "emu", "--model", "llama3-8b", "--batch", "1,4", "--context", "1k", "--out", out, "--progress", "none")
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, msg)
	}
	for _, want := range []string{"nothing in this sweep can run on the CPU emulator (2 configuration(s))", "Llama-3-8B batch 1 context 1024: does not fit in memory", "--model tiny-emu"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was made: the sweep got past the check", out)
	}
}

// On a card, the presets suggested are ones that fit where the sweep's did not, largest first.
func TestSmallerPresetsFit(t *testing.T) {
	big, err := model.Lookup("llama3-70b")
	if err != nil {
		t.Fatal(err)
	}
	r := &sweep.Runner{MemoryBytes: 80e9, ReserveFraction: 0.1}
	pending := []sweep.Config{{Model: big, Batch: 8, Context: 8192}, {Model: big, Batch: 1, Context: 4096}}
	if err := checkAnythingFits(r, pending, false); err == nil || !strings.Contains(err.Error(), "a smaller model fits at batch 1 context 4096: --model ") {
		t.Fatalf("%v", err)
	}
	s := smallerPresets(r, pending, false)
	names := strings.Split(s[strings.Index(s, "--model"):], ", ")
	prev := 1e300
	for _, n := range names {
		shape, err := model.Lookup(strings.TrimPrefix(n, "--model "))
		if err != nil {
			t.Fatalf("suggested %q: %v", n, err)
		}
		if ok, why := r.StepFits(sweep.Config{Model: shape, Batch: 1, Context: 4096}); !ok {
			t.Errorf("suggested %s does not fit: %s", shape.Name, why)
		}
		if w := shape.WeightBytesTotal(); w > prev {
			t.Errorf("suggestions not largest first: %s", s)
		} else {
			prev = w
		}
	}
	// A sweep with one configuration that fits is not refused.
	small, _ := model.Lookup("llama3-8b")
	if err := checkAnythingFits(r, append(pending, sweep.Config{Model: small, Batch: 1, Context: 1024}), false); err != nil {
		t.Errorf("refused a sweep with one configuration that fits: %v", err)
	}
}

// The README's quick emulated run works as written: its command, taken from the README,
// measures every configuration ok on the emulator and ends with the headline.
func TestReadmeQuickRun(t *testing.T) {
	testtier.Slow(t, "the README's quick sweep, end to end")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "bin/decodebench sweep --model tiny-emu") {
			args = strings.Fields(line)[1:]
			break
		}
	}
	if args == nil {
		t.Fatal("README.md has no line `bin/decodebench sweep --model tiny-emu ...`")
	}
	sweepHermetic(t, cgotest.EmuPath(t))
	stdout, code, msg := runSweepCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s\n%s", args, code, msg, stdout)
	}
	out := args[slices.Index(args, "--out")+1]
	records := readSweepRecords(t, out)
	for _, r := range records {
		if r.Status != "ok" {
			t.Errorf("%s: %s %s", r.Key, r.Status, r.Reason)
		}
	}
	if len(records) == 0 {
		t.Errorf("no record")
	}
	for _, want := range []string{"Model: tiny-emu", "Per request at batch 1", "Peak per server", "WARNING: EMULATED"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the run's output lacks %q:\n%s", want, stdout)
		}
	}
}
