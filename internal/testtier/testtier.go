// Package testtier splits the tests into two tiers. `make test` runs `go test -short`, the fast
// tier a newcomer runs on a 2-core machine in a few minutes; `make test-full` (and CI) runs every
// test, the slow ones included, and the kernel tests again under the emulator's hazard modes.
//
// A test goes to the slow tier when it costs seconds and what it checks is also checked, more
// cheaply, by a fast test (an end-to-end run of a command whose parts have their own tests, a
// repeat over every phase or format, a browser render). Nothing is dropped: the slow tier runs
// in CI on every submission.
package testtier

import "testing"

// Slow skips t under `go test -short` (make test), saying why it is slow and where it runs.
func Slow(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("slow tier (%s): runs under make test-full", why)
	}
}
