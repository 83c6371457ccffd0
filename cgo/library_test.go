package cgo_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func TestLocate(t *testing.T) {
	emu := buildFake(t, fakeEmu)
	dir := filepath.Dir(emu)
	cases := []struct {
		desc, env, backend, want string
	}{
		{"a directory", dir, cgo.BackendEmu, emu},
		{"the file itself", emu, cgo.BackendEmu, emu},
		{"the other backend's file stands for its directory", filepath.Join(dir, "libdecodebench_cuda.so"), cgo.BackendEmu, emu},
		{"a file of another name is taken as is", buildFake(t, fakeOldABI), cgo.BackendEmu, buildFake(t, fakeOldABI)},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			t.Setenv(cgo.EnvKernels, c.env)
			got, err := cgo.Locate(c.backend)
			if err != nil || got != c.want {
				t.Errorf("Locate(%q) with %s=%s = %q, %v; want %q", c.backend, cgo.EnvKernels, c.env, got, err, c.want)
			}
		})
	}
}

func TestLocateNotFoundSaysWhereItLooked(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(cgo.EnvKernels, "")
	os.Unsetenv(cgo.EnvKernels)
	t.Chdir(empty)
	for _, c := range []struct{ backend, make string }{{cgo.BackendCUDA, "make kernels"}, {cgo.BackendEmu, "make emu"}} {
		_, err := cgo.Locate(c.backend)
		if !errors.Is(err, cgo.ErrLibraryNotFound) {
			t.Fatalf("Locate(%q) = %v, want ErrLibraryNotFound", c.backend, err)
		}
		msg := err.Error()
		exe, _ := os.Executable()
		for _, want := range []string{cgo.LibraryFile(c.backend), "$DECODEBENCH_KERNELS (unset)", filepath.Dir(exe), "./lib", c.make} {
			if !strings.Contains(msg, want) {
				t.Errorf("Locate(%q) error does not mention %q: %s", c.backend, want, msg)
			}
		}
		if strings.Count(msg, "\n") > 0 {
			t.Errorf("not one line: %q", msg)
		}
	}
}

// A DECODEBENCH_KERNELS that names a library that is not there, or a directory without the
// backend's library, is an error naming the path and why; it never falls back to a library
// found elsewhere (here one in ./lib), which would run other kernels than the ones named.
func TestLocateNamedLibraryMissingIsAnError(t *testing.T) {
	elsewhere := t.TempDir()
	os.MkdirAll(filepath.Join(elsewhere, "lib"), 0o755)
	for _, name := range []string{"libdecodebench_emu.so", "libdecodebench_cuda.so"} {
		if err := os.Symlink(buildFake(t, fakeEmu), filepath.Join(elsewhere, "lib", name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(elsewhere)
	missingDir := filepath.Join(t.TempDir(), "gone")
	emptyDir := t.TempDir()
	cases := []struct {
		desc, env string
		want      []string
	}{
		{"a library file that does not exist", filepath.Join(missingDir, "libdecodebench_emu.so"),
			[]string{filepath.Join(missingDir, "libdecodebench_emu.so"), "no such file or directory"}},
		{"a file of another name that does not exist", filepath.Join(missingDir, "my-kernels.so"),
			[]string{filepath.Join(missingDir, "my-kernels.so"), "no such file or directory"}},
		{"a path through a file", "/etc/passwd/libdecodebench_emu.so",
			[]string{"/etc/passwd/libdecodebench_emu.so", "not a directory"}},
		{"a directory without the library", emptyDir,
			[]string{emptyDir, "holds no libdecodebench_emu.so"}},
		{"the other backend's file, its directory without this one", filepath.Join(emptyDir, "libdecodebench_cuda.so"),
			[]string{filepath.Join(emptyDir, "libdecodebench_cuda.so"), "stands for its directory " + emptyDir, "holds no libdecodebench_emu.so"}},
		{"the other backend's file in a directory that does not exist", filepath.Join(missingDir, "libdecodebench_cuda.so"),
			[]string{filepath.Join(missingDir, "libdecodebench_cuda.so"), "no such file or directory"}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			t.Setenv(cgo.EnvKernels, c.env)
			for _, open := range []func() (string, error){
				func() (string, error) { return cgo.Locate(cgo.BackendEmu) },
				func() (string, error) { lib, err := cgo.Open(cgo.BackendEmu); return libPath(lib), err },
			} {
				got, err := open()
				if err == nil {
					t.Fatalf("%s=%s found %s; want an error", cgo.EnvKernels, c.env, got)
				}
				for _, want := range append(c.want, cgo.EnvKernels) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if !errors.Is(err, cgo.ErrLibraryNotFound) {
					t.Errorf("error %q is not ErrLibraryNotFound", err)
				}
			}
		})
	}
	t.Run("a directory holding the other backend only", func(t *testing.T) {
		dir := filepath.Dir(buildFake(t, fakeNoGPU))
		t.Setenv(cgo.EnvKernels, dir)
		if _, err := os.Stat(filepath.Join(dir, "libdecodebench_emu.so")); err == nil {
			t.Skip("the fake libraries share a directory")
		}
		if got, err := cgo.Locate(cgo.BackendEmu); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Locate(emu) in a directory of the cuda library only = %q, %v", got, err)
		}
	})
}

func libPath(lib *cgo.Library) string {
	if lib == nil {
		return ""
	}
	return lib.Path()
}

func TestOpen(t *testing.T) {
	emu := buildFake(t, fakeEmu)
	t.Run("emu", func(t *testing.T) {
		t.Setenv(cgo.EnvKernels, emu)
		lib, err := cgo.Open(cgo.BackendEmu)
		if err != nil {
			t.Fatal(err)
		}
		if lib.Name() != "emu" || lib.Path() != emu || !lib.Emulated() {
			t.Errorf("Name %q Path %q Emulated %v", lib.Name(), lib.Path(), lib.Emulated())
		}
		again, err := cgo.Open(cgo.BackendEmu)
		if err != nil || again != lib {
			t.Errorf("a second Open gave %p, %v; want the same library %p", again, err, lib)
		}
	})
	t.Run("unknown backend", func(t *testing.T) {
		if _, err := cgo.Open("rocm"); err == nil || !strings.Contains(err.Error(), `"rocm"`) {
			t.Errorf("Open(rocm) = %v", err)
		}
	})
	t.Run("cuda asked, emu found under the cuda name", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(emu, filepath.Join(dir, "libdecodebench_cuda.so")); err != nil {
			t.Fatal(err)
		}
		t.Setenv(cgo.EnvKernels, dir)
		if _, err := cgo.Open(cgo.BackendCUDA); err == nil || !strings.Contains(err.Error(), `"emu" backend`) {
			t.Errorf("Open(cuda) of an emu library = %v", err)
		}
	})
	t.Run("old ABI", func(t *testing.T) {
		_, err := cgo.OpenPath(buildFake(t, fakeOldABI))
		if err == nil || !strings.Contains(err.Error(), "ABI version 99") {
			t.Errorf("OpenPath(old ABI) = %v", err)
		}
	})
	t.Run("missing function", func(t *testing.T) {
		_, err := cgo.OpenPath(buildFake(t, fakeMissing))
		if err == nil || !strings.Contains(err.Error(), "db_kv_append") {
			t.Errorf("OpenPath(missing db_kv_append) = %v", err)
		}
	})
	t.Run("not a library", func(t *testing.T) {
		junk := filepath.Join(t.TempDir(), "libdecodebench_emu.so")
		os.WriteFile(junk, []byte("not an ELF file"), 0o644)
		if _, err := cgo.OpenPath(junk); err == nil || !strings.Contains(err.Error(), "cannot load") {
			t.Errorf("OpenPath(junk) = %v", err)
		}
	})
}

func TestOpenAutoExplains(t *testing.T) {
	t.Run("no GPU library", func(t *testing.T) {
		empty := t.TempDir()
		t.Setenv(cgo.EnvKernels, empty)
		t.Chdir(empty)
		_, err := cgo.Open(cgo.BackendAuto)
		if err == nil || !errors.Is(err, cgo.ErrLibraryNotFound) {
			t.Fatalf("Open(auto) = %v, want ErrLibraryNotFound", err)
		}
		for _, want := range []string{"libdecodebench_cuda.so", "make kernels", "--backend emu"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(auto) error does not mention %q: %v", want, err)
			}
		}
	})
	t.Run("GPU library, no device", func(t *testing.T) {
		t.Setenv(cgo.EnvKernels, buildFake(t, fakeNoGPU))
		_, err := cgo.Open(cgo.BackendAuto)
		if err == nil || !errors.Is(err, cgo.ErrNoDevice) || !strings.Contains(err.Error(), "0 devices") ||
			!strings.Contains(err.Error(), "--backend emu") {
			t.Errorf("Open(auto) with no device = %v", err)
		}
	})
}

// TestCUDALibraryExportsTheABI loads the CUDA build wherever it was built, GPU or not: every
// function resolves and the ABI version matches, and without a device it says so as an error.
func TestCUDALibraryExportsTheABI(t *testing.T) {
	path, err := cgotest.LibraryPath(cgo.BackendCUDA)
	if err != nil {
		t.Skipf("CUDA library not built (make kernels): %v", err)
	}
	lib, err := cgo.OpenPath(path)
	if err != nil {
		t.Fatalf("the CUDA library does not load: %v", err)
	}
	if lib.Name() != cgo.BackendCUDA || lib.Emulated() {
		t.Errorf("%s says it is %q", path, lib.Name())
	}
	n, err := lib.DeviceCount()
	if err != nil && !errors.Is(err, cgo.ErrNoDevice) && !errors.Is(err, cgo.StatusCUDA) {
		t.Errorf("DeviceCount without a device = %v, want ErrNoDevice or a CUDA error", err)
	}
	t.Logf("%s: %d device(s), %v", path, n, err)
}
