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

// EmuPath gives the path of libdecodebench_emu.so: where cgo.Locate finds it
// ($DECODEBENCH_KERNELS first), else lib/ at the root of the module the test runs in. If there
// is none it skips t, or fails it under DECODEBENCH_REQUIRE_EMU=1.
func EmuPath(t testing.TB) string {
	t.Helper()
	path, err := cgo.Locate(cgo.BackendEmu)
	if err == nil {
		return path
	}
	searched := err.Error()
	if root, ok := moduleRoot(); ok {
		candidate := filepath.Join(root, "lib", cgo.LibraryFile(cgo.BackendEmu))
		if fi, statErr := os.Stat(candidate); statErr == nil && !fi.IsDir() {
			return candidate
		}
		searched += "; nor in " + filepath.Dir(candidate)
	}
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
