package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file within the limit is read whole; a larger one, a device and a directory are refused by
// name, with the size or the kind and the limit; ReadInput reads a device, bounded.
func TestReadIsBounded(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "config.json"), filepath.Join(dir, "weights.safetensors")
	os.WriteFile(small, []byte(`{"a": 1}`), 0o644)
	os.WriteFile(big, make([]byte, 2048), 0o644)
	if data, err := Read(small, 1024); err != nil || string(data) != `{"a": 1}` {
		t.Errorf("small file: %q %v", data, err)
	}
	// A pipe or device named on the command line is read, bounded.
	if data, err := ReadInput("/dev/null", 1024); err != nil || len(data) != 0 {
		t.Errorf("ReadInput /dev/null: %q %v", data, err)
	}
	tests := []struct {
		path  string
		limit int64
		want  []string
	}{
		{big, 1024, []string{big, "2048 bytes", "more than the 1.0 kB"}},
		{"/dev/zero", 1024, []string{"/dev/zero", "not a regular file", "a device"}},
		{dir, 1024, []string{"a directory"}},
	}
	for _, tc := range tests {
		if _, err := ReadInput(tc.path, tc.limit); err == nil || tc.path == "/dev/zero" && !strings.Contains(err.Error(), "more than the 1.0 kB") {
			t.Errorf("ReadInput %s: %v; want it refused", tc.path, err)
		}
		_, err := Read(tc.path, tc.limit)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want an error naming %q", tc.path, err, w)
			}
		}
	}
}
