package cgo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeVariant is one build of testdata/fakekernels.c.
type fakeVariant struct {
	name  string // the file it is built as
	flags []string
}

var (
	fakeEmu     = fakeVariant{"libdecodebench_emu.so", nil}
	fakeNoGPU   = fakeVariant{"libdecodebench_cuda.so", []string{`-DFAKE_BACKEND="cuda"`, "-DFAKE_DEVICES=0"}}
	fakeOldABI  = fakeVariant{"libdecodebench_oldabi.so", []string{"-DFAKE_ABI_VERSION=99"}}
	fakeMissing = fakeVariant{"libdecodebench_missing.so", []string{"-DFAKE_OMIT_KV_APPEND"}}
)

var (
	fakeMu    sync.Mutex
	fakeDirs  = map[string]string{} // variant name -> directory holding its build
	fakeRoot  string
	fakeRootE error
)

// buildFake compiles a variant of the fake kernels library (once per test binary) into a
// directory of its own and returns the library's path. It needs the C compiler cgo itself
// needs, so it is there wherever this package builds.
func buildFake(t *testing.T, v fakeVariant) string {
	t.Helper()
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if dir, ok := fakeDirs[v.name]; ok {
		return filepath.Join(dir, v.name)
	}
	if fakeRoot == "" && fakeRootE == nil {
		fakeRoot, fakeRootE = os.MkdirTemp("", "decodebench-fake-")
	}
	if fakeRootE != nil {
		t.Fatal(fakeRootE)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fake kernels library: %v", cc, err)
	}
	dir := filepath.Join(fakeRoot, strings.TrimSuffix(v.name, ".so"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, thisFile, _, _ := runtime.Caller(0)
	pkgDir := filepath.Dir(thisFile)
	args := append([]string{"-shared", "-fPIC", "-O1", "-I" + filepath.Join(pkgDir, "..", "kernels"),
		"-o", filepath.Join(dir, v.name), filepath.Join(pkgDir, "testdata", "fakekernels.c")}, v.flags...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the fake kernels library: %v\n%s", err, out)
	}
	fakeDirs[v.name] = dir
	return filepath.Join(dir, v.name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeRoot != "" {
		os.RemoveAll(fakeRoot)
	}
	os.Exit(code)
}
