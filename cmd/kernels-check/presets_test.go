package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// presetBatches are the batches every preset's linear shapes are planned at.
var presetBatches = []int{1, 16, 64, 256, 1024}

// linearKernels are the linear kernels' sm_90 ptxas figures the wave rule reads: the build's
// (build/kernels-ptxas.log, after `make kernels`) where there is one, else the checked-in copy
// (testdata/linear-ptxas.log), which must then agree with the build (`make
// kernels-check-testdata` refreshes it).
func linearKernels(t *testing.T) *Kernels {
	t.Helper()
	fixture := filepath.Join("testdata", "linear-ptxas.log")
	want := readPtxas(t, fixture)
	built := filepath.Join("..", "..", "build", "kernels-ptxas.log")
	if _, err := os.Stat(built); err != nil {
		t.Logf("no %s (no `make kernels` here): the registers of %s", built, fixture)
		return want
	}
	got := readPtxas(t, built)
	var stale []string
	for _, name := range got.names {
		if !plannedLinear.MatchString(name) {
			continue
		}
		r, _ := got.Resources(name)
		if w, ok := want.Resources(name); !ok || w.Registers != r.Registers {
			stale = append(stale, fmt.Sprintf("%s: %d registers, %s has %d", name, r.Registers, fixture, w.Registers))
		}
	}
	if len(stale) > 0 {
		t.Errorf("%s is stale beside %s (run `make kernels-check-testdata`):\n%s", fixture, built, strings.Join(stale, "\n"))
	}
	return got
}

// plannedLinear names the kernels db_linear's planner launches for bf16 and fp16 weights (the
// fixture's; kernels of other linear families are not its business).
var plannedLinear = regexp.MustCompile(`^linear_(gemv|mma|tiled|splitk_reduce|streamk_reduce)_kernel<`)

func readPtxas(t *testing.T, path string) *Kernels {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParsePtxasLog(bufio.NewReader(f), "sm_90")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	mangled := make([]string, 0, len(res))
	for name := range res {
		mangled = append(mangled, name)
	}
	sort.Strings(mangled)
	names, err := demangle(mangled)
	if err != nil {
		t.Fatal(err)
	}
	k := NewKernels(nil, res, names)
	for _, m := range mangled {
		k.names = append(k.names, names[m])
	}
	sort.Strings(k.names)
	return k
}

// TestEveryPresetLinearFillsWholeWaves plans every linear shape of every preset's decode step
// (model.Presets, Shape.Kernels) at batch 1 to 1024 through the emulator's planner as a 132-SM
// card (DB_EMU_SM_COUNT) and holds each launch to the gate's wave rule, so that a shape nobody
// listed cannot fall out of whole waves.
func TestEveryPresetLinearFillsWholeWaves(t *testing.T) {
	if _, err := exec.LookPath("c++filt"); err != nil {
		t.Fatalf("c++filt (binutils) demangles ptxas's kernel names: %v", err)
	}
	lib := cgotest.Emu(t)
	t.Setenv(EnvEmuSMCount, "132")
	dev, err := lib.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if props, err := lib.DeviceProps(0); err != nil || props.SMCount != 132 {
		t.Fatalf("the emulator sees %d SMs (%v), want 132 from %s", props.SMCount, err, EnvEmuSMCount)
	}
	kernels := linearKernels(t)

	var calls []Call
	seen := map[[3]int]bool{}
	for _, s := range model.Presets() {
		for _, b := range presetBatches {
			for _, k := range s.Kernels(b, 1) {
				key := [3]int{k.M, k.N, k.K}
				if k.Kind != model.KindLinear || seen[key] {
					continue
				}
				seen[key] = true
				calls = append(calls, Call{Model: s.Name, Name: k.Name, Kind: k.Kind, Batch: k.M, N: k.N, K: k.K})
			}
		}
	}
	waves, err := PlanWaves(dev, calls, kernels, SM90, 132)
	if err != nil {
		t.Fatal(err)
	}
	var failed bytes.Buffer
	held, exempt := 0, 0
	for _, w := range waves {
		switch {
		case w.Rule == RuleFail:
			fmt.Fprintf(&failed, "  %s %s batch %d n=%d k=%d: %s %d blocks, %d units, %d/SM: fill %.0f%% %s\n",
				w.Model, w.Name, w.Batch, w.N, w.K, shortKernel(w.Kernel), w.Blocks, w.Units, w.BlocksPerSM, 100*w.Fill, w.Error)
		case w.Rule == RuleOK:
			held++
		default:
			exempt++
		}
	}
	t.Logf("%d distinct (batch, n, k) linear calls of %d presets: %d launches held to the wave rule, %d exempt", len(calls), len(model.Presets()), held, exempt)
	if failed.Len() > 0 {
		t.Errorf("launches under %.0f%% of the card:\n%s", 100*WholeWaves, failed.String())
	}
}
