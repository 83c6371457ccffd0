package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Without --model, bench refuses a format flag its kernel has no use for, naming it, where it
// once took any value (garbage included) and measured as if it were not there.
func TestBenchRefusesFormatsItHasNoUseFor(t *testing.T) {
	benchEnv(t, filepath.Join(t.TempDir(), "nowhere")) // a usage error comes before any device work
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "attention", "--q-heads", "4", "--kv-heads", "2", "--head-dim", "64", "--context", "8", "--weight-dtype", "garbage"}, `--weight-dtype "garbage"`},
		{[]string{"bench", "attention", "--q-heads", "4", "--kv-heads", "2", "--head-dim", "64", "--context", "8", "--weight-dtype", "fp8"}, `--weight-dtype "fp8"`},
		{[]string{"bench", "linear", "--n", "8", "--k", "8", "--kv-dtype", "garbage"}, `--kv-dtype "garbage"`},
	} {
		_, _, code, msg := runBench(t, tc.args...)
		if code != exitUsage || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: exit %d %q; want exit 2 naming %s", strings.Join(tc.args, " "), code, msg, tc.want)
		}
	}
}
