package main

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/validate"
)

// A hostname with a newline cannot forge a line of the verdict, nor an escape sequence reach
// the terminal: report text that is not printable is printed Go-quoted.
func TestFleetPrintsHostnamesEscaped(t *testing.T) {
	fleetEnv(t)
	forged := "node02\nfleet verdict: PASS\x1b[2J"
	faultBox(t, "run", "node01", nil)
	faultBox(t, "run", "node02", func(r *validate.Report) {
		r.Hostname = forged
		r.Cards[1].Checks = append(r.Cards[1].Checks, validate.Check{ID: "health.row_remapping", Category: validate.CategoryHealth,
			Verdict: validate.Fail, Message: "pending\x1b]0;owned\a"})
	})
	stdout, _, code, _ := runFleetCLI(t, "fleet", "--out", "", "run")
	if code != 1 {
		t.Errorf("exit %d, want 1 (a failing card)", code)
	}
	if strings.Contains(stdout, "\nfleet verdict: PASS") || strings.ContainsAny(stdout, "\x1b\a") {
		t.Errorf("the report's text reached the terminal raw:\n%q", stdout)
	}
	if !strings.Contains(stdout, `"node02\nfleet verdict: PASS\x1b[2J"`) {
		t.Errorf("the host is not named, quoted:\n%s", stdout)
	}
}
