package cgo_test

import (
	"os"
	"testing"

	"github.com/decodebench/decodebench/cgo/cgotest"
)

// fakeVariant is one build of testdata/fakekernels.c.
type fakeVariant struct {
	name    string // the file it is built as
	defines []string
}

var (
	fakeEmu     = fakeVariant{"libdecodebench_emu.so", nil}
	fakeNoGPU   = fakeVariant{"libdecodebench_cuda.so", []string{`FAKE_BACKEND="cuda"`, "FAKE_DEVICES=0"}}
	fakeOldABI  = fakeVariant{"libdecodebench_oldabi.so", []string{"FAKE_ABI_VERSION=99"}}
	fakeMissing = fakeVariant{"libdecodebench_missing.so", []string{"FAKE_OMIT_KV_APPEND"}}
)

func buildFake(t *testing.T, v fakeVariant) string {
	t.Helper()
	return cgotest.FakeLibrary(t, v.name, v.defines...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	cgotest.RemoveFakes()
	os.Exit(code)
}
