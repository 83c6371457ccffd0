package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --resume of a run.json that names no backend and no model (`{}`) is refused before the
// directory is locked or written: one line naming what is missing, nothing beside run.json.
func TestResumeRefusesAnEmptyRunJSON(t *testing.T) {
	sweepHermetic(t, filepath.Join(t.TempDir(), "nowhere"))
	os.Mkdir("run", 0o755)
	os.WriteFile(filepath.Join("run", "run.json"), []byte("{}\n"), 0o644)
	_, code, msg := runSweepCLI(t, "sweep", "--resume", "run", "--model", "tiny-emu", "--batch", "1", "--context", "128", "--backend", "emu")
	if code != exitUsage || !strings.Contains(msg, "no backend.name") {
		t.Errorf("exit %d %q; want exit 2 naming the missing backend", code, msg)
	}
	entries, _ := os.ReadDir("run")
	if len(entries) != 1 {
		t.Errorf("the refused resume wrote into the directory: %v", entries)
	}
}
