package sweep

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	d, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Create(dir); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("second Create: %v", err)
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNotRunDir) {
		t.Fatalf("Load of an empty directory: %v", err)
	}
}
