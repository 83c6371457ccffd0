package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A config of 1e7 layers is held to sweep's limit (Runner.StepFits) before a step is built:
// step and step --plan refuse it at once with sweep's sentence, where they once built it call
// by call until Go ran out of memory. Nothing is written.
func TestStepRefusesWhatSweepRefuses(t *testing.T) {
	tinyPath, err := filepath.Abs(filepath.Join("testdata", "tiny-llama.json"))
	if err != nil {
		t.Fatal(err)
	}
	emuEnv(t)
	tiny, err := os.ReadFile(tinyPath)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Replace(string(tiny), `"num_hidden_layers": 3`, `"num_hidden_layers": 10000000`, 1)
	if err := os.WriteFile("huge.json", []byte(huge), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"step", "--backend", "emu", "--model-config", "huge.json", "--batch", "1", "--context", "128", "--out", "run"},
		{"step", "--plan", "--model-config", "huge.json", "--batch", "1", "--context", "128"},
	} {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, _, code, msg := runApp(t, args...)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if code != exitUsage || !strings.Contains(msg, "more than the 1000000 a step may make") {
			t.Errorf("%s: exit %d %q; want exit 2, sweep's reason", strings.Join(args, " "), code, msg)
		}
		if d, grew := time.Since(start), after.TotalAlloc-before.TotalAlloc; d > 20*time.Second || grew > 4<<30 {
			t.Errorf("%s: %v and %d MB allocated to refuse", strings.Join(args, " "), d, grew>>20)
		}
	}
	if _, err := os.Stat("run"); err == nil {
		t.Error("a refused step wrote its run directory")
	}
}
