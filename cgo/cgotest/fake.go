package cgotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	fakeMu    sync.Mutex
	fakeBuilt = map[string]string{} // key: name and defines -> path
	fakeDirs  []string
)

// RemoveFakes deletes every library FakeLibrary built; call it from TestMain after m.Run.
// (They outlive single tests because a loaded library stays loaded for the process.)
func RemoveFakes() {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	for _, dir := range fakeDirs {
		os.RemoveAll(dir)
	}
	fakeDirs = nil
	fakeBuilt = map[string]string{}
}

// FakeLibrary builds cgo/testdata/fakekernels.c, a plain host implementation of decodebench.h,
// as a library called name (e.g. libdecodebench_emu.so) with the given -D defines, and returns
// its path. Each (name, defines) is built once per test binary, in a directory of its own under
// the system temp directory. It lets tests reach paths the real libraries never take: another
// ABI version, a missing function, a GPU library without a device, a kernel that computes
// wrong. It needs the C compiler that cgo itself needs; without one the test is skipped.
//
// Defines (see the file): FAKE_BACKEND="cuda", FAKE_DEVICES=0, FAKE_ABI_VERSION=99,
// FAKE_OMIT_KV_APPEND, FAKE_LINEAR_SKIP=i (leaves Y[i] unwritten), FAKE_LINEAR_BIAS=x (adds x
// to every output), FAKE_PROBE_BUG (one wrong word or value per probe), FAKE_LAUNCHES (the
// optional functions: launch lists of fixed geometry, the empty kernel), FAKE_NO_CUBLAS (the
// cublas variant cannot plan), FAKE_CUBLAS_SLOWER=x (the timer reports x times its time after a
// cublas call). One build also takes
// faults at run time from FAKEKERNELS_FAULT (nan, unwritten, timer-nan, timer-zero,
// timer-negative, timer-tiny) and a device name from FAKEKERNELS_NAME (see the file).
func FakeLibrary(t testing.TB, name string, defines ...string) string {
	t.Helper()
	key := name + "\x00" + strings.Join(defines, "\x00")
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if path, ok := fakeBuilt[key]; ok {
		return path
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fake kernels library: %v", cc, err)
	}
	dir, err := os.MkdirTemp("", "decodebench-fake-")
	if err != nil {
		t.Fatal(err)
	}
	fakeDirs = append(fakeDirs, dir)
	_, thisFile, _, _ := runtime.Caller(0)
	cgoDir := filepath.Join(filepath.Dir(thisFile), "..")
	path := filepath.Join(dir, name)
	args := []string{"-shared", "-fPIC", "-O1", "-I" + filepath.Join(cgoDir, "..", "kernels"), "-o", path,
		filepath.Join(cgoDir, "testdata", "fakekernels.c")}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	args = append(args, "-lm")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the fake kernels library: %v\n%s", err, out)
	}
	fakeBuilt[key] = path
	return path
}
