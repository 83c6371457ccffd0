package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// DECODEBENCH_KERNELS naming a library that is not there fails the command with the path and
// why, though a working library sits in ./lib: a run on other kernels than the ones named
// would pass for the wrong build.
func TestNamedKernelsLibraryMissingFails(t *testing.T) {
	emu := cgotest.EmuPath(t)
	testEnv(t, "")
	if err := os.Mkdir("lib", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(emu, filepath.Join("lib", cgo.LibraryFile(cgo.BackendEmu))); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "linear", "--backend", "emu", "--batch", "3", "--n", "7", "--k", "24"}
	if _, code, msg := runCLI(t, args...); code != 0 {
		t.Fatalf("with ./lib and %s unset: exit %d: %s", cgo.EnvKernels, code, msg)
	}
	for _, named := range []string{filepath.Join(t.TempDir(), "libdecodebench_emu.so"), filepath.Join(t.TempDir(), "no-such-dir")} {
		t.Setenv(cgo.EnvKernels, named)
		out, code, msg := runCLI(t, args...)
		if code != exitFailure || !strings.Contains(msg, named) || !strings.Contains(msg, cgo.EnvKernels) {
			t.Errorf("%s=%s: exit %d, message %q, output %q; want exit 1 naming the path", cgo.EnvKernels, named, code, msg, out)
		}
	}
}
