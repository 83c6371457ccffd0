package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/report"
	"github.com/decodebench/decodebench/cgo"
)

// The documents a run leaves name the kernels library by its file name: run.json, the report
// and validate's report carry no directory of the machine that wrote them.
func TestDocumentsNameTheLibraryWithoutItsPath(t *testing.T) {
	emuEnv(t)
	libDir := filepath.Dir(os.Getenv(cgo.EnvKernels))
	if _, code, msg := runSweepCLI(t, tinySweep("run", "--batch", "1", "--context", "64")...); code != 0 {
		t.Fatalf("sweep: exit %d %s", code, msg)
	}
	p, err := sweep.Load("run")
	if err != nil {
		t.Fatal(err)
	}
	if p.Info.Backend.Library != "libdecodebench_emu.so" {
		t.Errorf("run.json backend.library = %q, want the file name", p.Info.Backend.Library)
	}
	for _, name := range []string{sweep.InfoFile, report.HTMLFile, "report.md"} {
		data, err := os.ReadFile(filepath.Join("run", name))
		if err != nil || strings.Contains(string(data), libDir+"/") {
			t.Errorf("%s names the library's directory %s (%v)", name, libDir, err)
		}
	}
	if _, _, code, msg := runFleetCLI(t, "validate", "--simulate-gpus", "1", "--backend", "emu", "--suite", "tiny", "--out", "v.json"); code != 0 {
		t.Fatalf("validate: exit %d %s", code, msg)
	}
	var v struct {
		Library string `json:"library"`
	}
	data, err := os.ReadFile("v.json")
	if err := json.Unmarshal(data, &v); err != nil || v.Library != "libdecodebench_emu.so" || strings.Contains(string(data), libDir+"/") {
		t.Errorf("validate's report: library %q (%v), want the file name and no %s", v.Library, err, libDir)
	}
}
