package sweep

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReadJSONLRepairs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.jsonl")
	tests := []struct {
		desc      string
		content   string
		wantKeys  []string
		wantTorn  bool
		wantBad   int
		wantAfter string
	}{
		{"clean", "{\"k\":1}\n{\"k\":2}\n", []string{"1", "2"}, false, 0, "{\"k\":1}\n{\"k\":2}\n"},
		{"torn tail", "{\"k\":1}\n{\"k\":", []string{"1"}, true, 0, "{\"k\":1}\n"},
		{"two bad tail lines", "{\"k\":1}\nxx\n{\"k\n", []string{"1"}, true, 0, "{\"k\":1}\n"},
		{"bad middle line", "{\"k\":1}\nxx\n{\"k\":3}\n", []string{"1", "3"}, false, 1, "{\"k\":1}\nxx\n{\"k\":3}\n"},
		{"whole last line without newline", "{\"k\":1}\n{\"k\":2}", []string{"1", "2"}, false, 0, "{\"k\":1}\n{\"k\":2}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			os.WriteFile(path, []byte(tc.content), 0o644)
			var keys []string
			torn, bad, err := readJSONL(path, true, func(line []byte) error {
				var v struct{ K json.Number }
				if err := json.Unmarshal(line, &v); err != nil {
					return err
				}
				keys = append(keys, v.K.String())
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(path)
			if !slices.Equal(keys, tc.wantKeys) || torn != tc.wantTorn || bad != tc.wantBad || string(after) != tc.wantAfter {
				t.Errorf("keys %v torn %v bad %d after %q", keys, torn, bad, after)
			}
		})
	}
}

func TestCreateRefusesARun(t *testing.T) {
	dir := t.TempDir()
	d, err := Create(dir, RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Create(dir, RunInfo{}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("second Create: %v", err)
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNotRunDir) {
		t.Fatalf("Load of an empty directory: %v", err)
	}
}

// The lock: a second holder is refused naming the first's PID; a PID left in a free lock is
// a stale lock, taken over and reported; a released lock leaves no PID behind.
func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	first, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	var locked *LockedError
	if _, err := Lock(dir); !errors.As(err, &locked) || locked.PID != os.Getpid() || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Lock: %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	if err := Holder(dir); !errors.As(err, &locked) {
		t.Errorf("Holder while held: %v", err)
	}
	if _, _, err := Resume(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("Resume while held: %v", err)
	}
	first.Release()
	if err := Holder(dir); err != nil {
		t.Errorf("Holder after release: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, LockFile)); len(data) != 0 {
		t.Errorf("released lock still holds %q", data)
	}
	// A holder killed with the lock held leaves its PID; the kernel dropped the flock.
	os.WriteFile(filepath.Join(dir, LockFile), []byte("999999\n"), 0o644)
	l, err := Lock(dir)
	if err != nil || l.StalePID != 999999 {
		t.Fatalf("Lock over a stale lock: %v, stale pid %d", err, l.StalePID)
	}
	l.Release()
}

// A resume holding the lock marks the sessions a dead process left "running".
func TestEndDeadSessions(t *testing.T) {
	updated := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	info := RunInfo{State: StateRunning, Updated: updated, Sessions: []Session{{State: StateInterrupted}, {State: StateRunning}}}
	if n := info.EndDeadSessions(); n != 1 || info.Sessions[1].State != StateDied || !info.Sessions[1].Ended.Equal(updated) ||
		info.Sessions[0].State != StateInterrupted || info.State != StateDied {
		t.Errorf("%d ended: %+v", n, info)
	}
}

// A kernels.jsonl line of an earlier version (rates in GB/s and TFLOP/s) reads with its rates.
func TestMeasurementReadsEarlierLines(t *testing.T) {
	line := `{"key":"probe read 1048576 B","spec":{"kind":"probe","probe":"read","probe_bytes":1048576},"status":"ok","achieved_gbps":2000,"achieved_tflops":0.5,"timing":{"median_seconds":5e-7}}`
	var m Measurement
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	if m.Key != "probe read 1048576 B" || m.AchievedBytesPerSec != 2e12 || m.AchievedFLOPsPerSec != 0.5e12 || !m.OK() {
		t.Errorf("%+v", m)
	}
}
