package cgo_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestEmptyKernelTimesLaunches(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	timer, err := dev.NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	defer timer.Close()
	if err := timer.Start(); err != nil {
		t.Fatal(err)
	}
	if err := dev.EmptyKernel(5); err != nil {
		t.Fatalf("EmptyKernel(5): %v", err)
	}
	if err := timer.Stop(); err != nil {
		t.Fatal(err)
	}
	if ms, err := timer.ElapsedMs(); err != nil || ms < 0 {
		t.Errorf("ElapsedMs = %v, %v", ms, err)
	}
}

func TestEmptyKernelRefusesBadCounts(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, n := range []int{0, -1, cgo.MaxEmptyLaunches + 1} {
		err := dev.EmptyKernel(n)
		if !errors.Is(err, cgo.ErrInvalidArgument) || !strings.Contains(err.Error(), "launches") {
			t.Errorf("EmptyKernel(%d) = %v, want an invalid argument naming launches", n, err)
		}
	}
}

// The fake library predates the optional functions: each call says what is missing, and the
// library still loads.
func TestOptionalFunctionsMissing(t *testing.T) {
	lib, err := cgo.OpenPath(buildFake(t, fakeEmu))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := lib.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"db_empty_kernel", func() error { return dev.EmptyKernel(1) }},
		{"db_linear_launches", func() error { _, err := dev.LinearLaunches(cgo.LinearParams{}); return err }},
		{"db_attention_launches", func() error { _, err := dev.AttentionLaunches(cgo.AttentionParams{}); return err }},
		{"db_graph_begin", dev.BeginGraph},
		{"db_add_i32", func() error { return dev.AddInt32(16, 1, 1) }},
		{"db_grouped_linear", func() error { return dev.GroupedLinear(cgo.GroupedLinearParams{}) }},
	} {
		if lib.HasFunction(c.name) {
			t.Errorf("the fake library exports %s", c.name)
		}
		if err := c.call(); !errors.Is(err, cgo.ErrNotExported) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s on the fake library = %v, want ErrNotExported naming it", c.name, err)
		}
	}
	if !lib.HasFunction("db_linear") || lib.HasFunction("db_no_such_function") {
		t.Errorf("HasFunction: db_linear %v, db_no_such_function %v; want true, false",
			lib.HasFunction("db_linear"), lib.HasFunction("db_no_such_function"))
	}
}

// The emulator lists the launches of a linear call where its planner does (db_linear_launches),
// else says it cannot.
func TestLinearLaunchesOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	p := cgo.LinearParams{X: 1 << 20, W: 2 << 20, Y: 3 << 20, Batch: 1, N: 4096, K: 4096, DType: cgo.DTypeBF16}
	launches, err := dev.LinearLaunches(p)
	if !dev.Library().HasFunction("db_linear_launches") {
		if !errors.Is(err, cgo.ErrNotExported) {
			t.Fatalf("LinearLaunches without db_linear_launches = %v, want ErrNotExported", err)
		}
		t.Skip("this emulator library does not list linear launches yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(launches) == 0 {
		t.Fatal("no launches listed for a linear call")
	}
	for _, l := range launches {
		if l.Kernel == "" || l.Blocks() < 1 || l.BlockThreads < 1 || l.SmemBytes < 0 {
			t.Errorf("implausible launch %+v", l)
		}
	}
}

// The cuBLAS peer runs on a GPU only: the emulator's plan says so in one line.
func TestCUBLASUnsupportedOnTheEmulator(t *testing.T) {
	if v, err := cgo.ParseLinearVariant("cublas"); err != nil || v != cgo.LinearCUBLAS || v.String() != "cublas" {
		t.Fatalf("ParseLinearVariant(cublas) = %v, %v", v, err)
	}
	dev := cgotest.EmuDevice(t)
	p := cgo.LinearParams{X: 1 << 20, W: 2 << 20, Y: 3 << 20, Batch: 1, N: 64, K: 64, DType: cgo.DTypeBF16, Variant: cgo.LinearCUBLAS}
	_, _, err := dev.LinearPlan(p)
	if !errors.Is(err, cgo.ErrUnsupportedShape) || !strings.Contains(err.Error(), "cublas") || strings.Contains(err.Error(), "\n") {
		t.Errorf("LinearPlan(cublas) on the emulator = %v, want one line of unsupported shape naming cublas", err)
	}
	if err := dev.Linear(p); !errors.Is(err, cgo.ErrUnsupportedShape) {
		t.Errorf("Linear(cublas) on the emulator = %v, want unsupported shape", err)
	}
}

// A library with the optional functions: the launch lists cross the seam intact.
func TestLaunchesFromALibraryThatHasThem(t *testing.T) {
	lib, err := cgo.OpenPath(cgotest.FakeLibrary(t, "libdecodebench_launches.so", "FAKE_LAUNCHES"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := lib.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	// The fake splits K in 2 at k >= 64 for the GEMV: a main launch and a reduce.
	got, err := dev.LinearLaunches(cgo.LinearParams{X: 16, W: 32, Y: 48, Batch: 1, N: 100, K: 64, DType: cgo.DTypeBF16})
	if err != nil {
		t.Fatal(err)
	}
	want := []cgo.LaunchInfo{
		{Kernel: "linear_gemv_kernel<__nv_bfloat16, 1>", GridX: 13, GridY: 2, GridZ: 1, BlockThreads: 128},
		{Kernel: "linear_splitk_reduce_kernel<__nv_bfloat16>", GridX: 64, GridY: 1, GridZ: 1, BlockThreads: 256},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("LinearLaunches = %+v, want %+v", got, want)
	}
	if got[0].Blocks() != 26 {
		t.Errorf("Blocks() = %d, want 26", got[0].Blocks())
	}
	att, err := dev.AttentionLaunches(cgo.AttentionParams{Batch: 3, QHeads: 8, MaxContext: 100,
		Cache: cgo.KVCache{KVHeads: 2, HeadDim: 128, DType: cgo.DTypeBF16}})
	if err != nil {
		t.Fatal(err)
	}
	if len(att) != 1 || att[0].GridX != 6 || att[0].GridY != 2 || att[0].SmemBytes != 39472 {
		t.Errorf("AttentionLaunches = %+v, want one launch of 6 x 2 blocks with 39472 bytes", att)
	}
	if _, err := dev.LinearLaunches(cgo.LinearParams{Batch: 1, N: 8, K: 7, DType: cgo.DTypeBF16}); !errors.Is(err, cgo.ErrUnsupportedShape) {
		t.Errorf("LinearLaunches of k=7 = %v, want the plan's unsupported shape", err)
	}
	if err := dev.EmptyKernel(3); err != nil {
		t.Errorf("EmptyKernel(3) = %v", err)
	}
}
