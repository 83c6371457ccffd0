package main

import (
	"os"
	"strings"
	"testing"
)

// Every file a flag names is read bounded (bench/fileio): /dev/zero, a 6 GB file given as a
// config and a directory are one usage error naming the file and the limit, read no further.
func TestFlagFilesAreBounded(t *testing.T) {
	testEnv(t, "")
	os.Mkdir("reports", 0o755)
	weights, err := os.Create("model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	weights.Truncate(6 << 30) // sparse: no disk, but 6 GB to os.ReadFile
	weights.Close()
	tests := [][]string{
		{"predict", "--model-config", "/dev/zero"},
		{"predict", "--model-config", "model.safetensors"},
		{"validate", "--thresholds", "/dev/zero", "--out", "v.json"},
		{"fleet", "--hostfile", "/dev/zero", "reports"},
		{"fleet", "--baseline", "/dev/zero", "reports"},
		{"fleet", "--baseline", "reports", "reports"},
	}
	for _, args := range tests {
		_, _, code, msg := runApp(t, args...)
		if code != exitUsage || !strings.Contains(msg, args[2]) || !(strings.Contains(msg, "more than the") || strings.Contains(msg, "not a regular file")) {
			t.Errorf("%s: exit %d %q; want exit 2 naming the file and the limit", strings.Join(args, " "), code, msg)
		}
	}
}
