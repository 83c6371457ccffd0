package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run directory whose records claim 7x the card's datasheet roofline (a forged or faulty
// results.jsonl) is no speed in any command that reads it back: report names the value and
// the bound and leaves it out, plan refuses to plan on it, compare does not call it FASTER.
func TestImplausibleRecordsReadBack(t *testing.T) {
	testEnv(t, "")
	writeSynthRun(t, "base", 1, 0.003, 1)
	writeSynthRun(t, "forged", 1.0/7, 0.003, 2)

	_, stderr, code, msg := runApp(t, "report", "forged")
	if !strings.Contains(stderr, "implausible") || !strings.Contains(stderr, "datasheet bound of") {
		t.Errorf("report of a 7x run: exit %d %q; stderr does not name the implausible records:\n%s", code, msg, stderr)
	}

	_, stderr, code, msg = runApp(t, "plan", "--min-request-rate", "20", "--tokens-per-s", "1000", "forged")
	if code != exitUsage || !strings.Contains(stderr+msg, "datasheet bound of") {
		t.Errorf("plan on a 7x run: exit %d %q (stderr %q); want it refused, the value and the bound named", code, msg, stderr)
	}

	out, _, code, msg := runApp(t, "compare", "--out", "cmp", "base", "forged")
	if code == 0 || strings.Contains(out, "FASTER") || !strings.Contains(out+msg, "datasheet bound of") {
		t.Errorf("compare with a 7x run: exit %d %q\n%s\nwant no FASTER verdict and the implausible records named", code, msg, out)
	}
}

// compare that judged the runs but cannot write the comparison exits 3, not SLOWER's 1.
func TestCompareWriteFailureHasItsOwnCode(t *testing.T) {
	testEnv(t, "")
	writeSynthRun(t, "base", 1, 0.003, 1)
	if err := os.WriteFile("afile", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, code, msg := runApp(t, "compare", "--out", filepath.Join("afile", "cmp"), "base", "base")
	if code != exitCompareWrite || !strings.Contains(msg, "afile") {
		t.Errorf("--out under a file: exit %d %q; want %d naming it", code, msg, exitCompareWrite)
	}
}
