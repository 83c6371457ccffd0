// Package cgotest finds the emulator library for tests of any package that launches kernels.
//
// Without the library a test skips with the reason, so `go test ./...` passes on a fresh
// checkout; with DECODEBENCH_REQUIRE_EMU=1 (set by `make test` and CI) the same test fails
// instead, saying where it looked, so a broken build cannot pass as a row of skips.
package cgotest

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/decodebench/decodebench/cgo"
)

// EnvRequireEmu turns a missing emulator library from a skip into a failure.
const EnvRequireEmu = "DECODEBENCH_REQUIRE_EMU"

// EnvRequireGPU turns a missing CUDA library, driver or device from a skip into a failure: for
// the runs on a GPU machine that must not pass as a row of skips.
const EnvRequireGPU = "DECODEBENCH_REQUIRE_GPU"

// LibraryPath finds a backend's library as cgo.Locate does, then in lib/ at the root of the
// module the test runs in; the error says where it looked.
func LibraryPath(backend string) (string, error) {
	path, err := cgo.Locate(backend)
	if err == nil {
		return path, nil
	}
	var notFound *cgo.NotFoundError
	root, ok := moduleRoot()
	if !ok || !errors.As(err, &notFound) {
		return "", err
	}
	candidate := filepath.Join(root, "lib", cgo.LibraryFile(backend))
	if fi, statErr := os.Stat(candidate); statErr == nil && !fi.IsDir() {
		return candidate, nil
	}
	notFound.Searched = append(notFound.Searched, filepath.Dir(candidate))
	return "", notFound
}

// EmuPath gives the path of libdecodebench_emu.so: where cgo.Locate finds it
// ($DECODEBENCH_KERNELS first), else lib/ at the root of the module the test runs in. If there
// is none it skips t, or fails it under DECODEBENCH_REQUIRE_EMU=1.
func EmuPath(t testing.TB) string {
	t.Helper()
	path, err := LibraryPath(cgo.BackendEmu)
	if err == nil {
		return path
	}
	searched := err.Error()
	if os.Getenv(EnvRequireEmu) == "1" {
		t.Fatalf("%s=1 but the emulator library is missing: %s", EnvRequireEmu, searched)
	}
	t.Skipf("emulator library not built, skipping (run `make emu`, or set %s=1 to fail instead): %s", EnvRequireEmu, searched)
	return ""
}

// Emu loads the emulator library, skipping or failing t as EmuPath does. A library that is
// there but does not load (an old ABI, a missing symbol) always fails t.
func Emu(t testing.TB) *cgo.Library {
	t.Helper()
	path := EmuPath(t)
	lib, err := cgo.OpenPath(path)
	if err != nil {
		t.Fatalf("emulator library: %v", err)
	}
	if lib.Name() != cgo.BackendEmu {
		t.Fatalf("%s is the %q backend, not the emulator", path, lib.Name())
	}
	return lib
}

// CUDA loads the GPU library when it is built and sees a device. Otherwise it skips t, saying
// why, or fails it under DECODEBENCH_REQUIRE_GPU=1. A library that is there but does not load
// always fails t: the CUDA build must export the whole ABI even where nothing runs it.
func CUDA(t testing.TB) *cgo.Library {
	t.Helper()
	require := os.Getenv(EnvRequireGPU) == "1"
	path, err := LibraryPath(cgo.BackendCUDA)
	if err != nil {
		if require {
			t.Fatalf("%s=1 but the CUDA library is missing: %v", EnvRequireGPU, err)
		}
		t.Skipf("CUDA library not built, skipping: %v", err)
	}
	lib, err := cgo.OpenPath(path)
	if err != nil {
		t.Fatalf("CUDA library: %v", err)
	}
	if lib.Name() != cgo.BackendCUDA {
		t.Fatalf("%s is the %q backend, not cuda", path, lib.Name())
	}
	n, err := lib.DeviceCount()
	if err == nil && n < 1 {
		err = errors.New("it reports 0 devices")
	}
	if err != nil {
		if require {
			t.Fatalf("%s=1 but %s sees no GPU: %v", EnvRequireGPU, path, err)
		}
		t.Skipf("no GPU, skipping (%s loads, but %v)", path, err)
	}
	return lib
}

// EmuDevice opens device 0 of the emulator, closed when t ends.
func EmuDevice(t testing.TB) *cgo.Device {
	t.Helper()
	dev, err := Emu(t).OpenDevice(0)
	if err != nil {
		t.Fatalf("opening the emulated device: %v", err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("closing the emulated device: %v", err)
		}
	})
	return dev
}

var (
	rootOnce sync.Once
	root     string
	rootOK   bool
)

// moduleRoot walks up from the working directory (a package's directory under go test) to
// the directory holding go.mod.
func moduleRoot() (string, bool) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root, rootOK = dir, true
				return
			} else if !errors.Is(err, os.ErrNotExist) {
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				return
			}
			dir = parent
		}
	})
	return root, rootOK
}
