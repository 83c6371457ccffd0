package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A value no computation can use is a usage error (exit 2) that names it and what is accepted,
// before any work: no output, nothing written, no device or library looked for (testEnv finds
// none, so reaching the device would exit 1).
func TestBadValuesAreUsageErrorsBeforeAnyWork(t *testing.T) {
	testEnv(t, "")
	predict := []string{"predict", "--model", "llama3-8b", "--gpu", "h200"}
	sweepArgs := []string{"sweep", "--backend", "emu", "--model", "llama3-8b", "--batch", "1", "--context", "1k"}
	custom := []string{"sweep", "--backend", "emu", "--ffn", "256", "--layers", "1", "--vocab", "512", "--batch", "1", "--context", "64"}
	with := func(base []string, more ...string) []string { return append(append([]string(nil), base...), more...) }
	cases := []struct {
		desc string
		args []string
		want []string // in the message
	}{
		{"predict reserve NaN", with(predict, "--reserve", "NaN"), []string{"--reserve NaN", "[0, 1)"}},
		{"predict reserve Inf", with(predict, "--reserve", "Inf"), []string{"--reserve Inf", "[0, 1)"}},
		{"predict reserve -Inf", with(predict, "--reserve", "-Inf"), []string{"--reserve -Inf", "[0, 1)"}},
		{"predict reserve negative", with(predict, "--reserve", "-0.1"), []string{"--reserve -0.1", "[0, 1)"}},
		{"predict reserve one", with(predict, "--reserve", "1"), []string{"--reserve 1", "[0, 1)"}},
		{"sweep reserve NaN", with(sweepArgs, "--reserve", "NaN"), []string{"--reserve NaN", "[0, 1)"}},
		{"sweep reserve 1.5", with(sweepArgs, "--reserve", "1.5"), []string{"--reserve 1.5", "[0, 1)"}},

		// Each list within its own cap of 10000 values, the product past 100000 points.
		{"predict batch x context", with(predict, "--batch", "1-1000", "--context", "1-200"),
			[]string{"--batch (1000 values)", "--context (200 values)", "= 200000 rows", "100000"}},
		{"predict a list too long", with(predict, "--context", "1-10001"), []string{"--context", "10001 values, more than 10000"}},
		{"sweep batch x context", []string{"sweep", "--backend", "emu", "--model", "llama3-8b", "--batch", "1-256", "--context", "1-1000"},
			[]string{"--batch (256 values)", "--context (1000 values)", "= 256000 configurations", "100000"}},
		{"sweep models x batch x context", with(custom[:len(custom)-4], "--hidden", "1024,2048", "--heads", "8,16", "--batch", "1-256", "--context", "1-100"),
			[]string{"models (4 values)", "--batch (256 values)", "--context (100 values)", "= 102400 configurations"}},
		{"sweep model dimensions", with(custom, "--hidden", "1-100", "--heads", "1-100"),
			[]string{"--hidden (100 values)", "--heads (100 values)", "= 10000 models", "more than the 64"}},

		{"sweep hidden not a multiple of heads", with(custom, "--hidden", "4100", "--heads", "32"),
			[]string{"--hidden 4100", "--heads 32", "--head-dim"}},
		{"sweep one of the hidden sizes", with(custom, "--hidden", "4096,4100", "--heads", "32"),
			[]string{"--hidden 4100", "--heads 32", "--head-dim"}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			out, code, msg := runCLI(t, append(c.args, "--out", dir)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d (usage); message %q", code, exitUsage, msg)
			}
			for _, want := range c.want {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			if out != "" {
				t.Errorf("a usage error printed %q", out)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("a usage error wrote %s", dir)
			}
		})
	}
}

// Lists whose product would need terabytes are refused as fast as any other usage error: the
// product is checked before any row or model is built.
func TestHugeAxesRefusedWithoutBuildingThem(t *testing.T) {
	testEnv(t, "")
	for _, args := range [][]string{
		{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1-10000", "--context", "1-10000"},
		{"sweep", "--backend", "emu", "--hidden", "1-10000", "--ffn", "1-10000", "--heads", "1-10000", "--layers", "1-10000", "--vocab", "512"},
	} {
		_, code, msg := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(msg, "more than the") {
			t.Errorf("%s: exit %d, message %q; want exit 2 naming the product and the cap", args[0], code, msg)
		}
	}
}

// With --head-dim the hidden size need not be a multiple of the heads (Gemma-7B: 16 heads of
// 256 on a 3072-wide model); without it, hidden / heads is the head size when it divides.
func TestHeadDimFromHiddenAndHeads(t *testing.T) {
	for _, c := range []struct {
		hidden, heads, headDim int
		headDimGiven           bool
		want                   int
		wantErr                bool
	}{
		{4096, 32, 0, false, 128, false},
		{3072, 16, 256, true, 256, false},
		{4100, 32, 0, false, 0, true},
		{4100, 32, 128, true, 128, false},
	} {
		got, err := headDimOf(c.hidden, c.heads, c.headDim, c.headDimGiven)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("headDimOf(%d, %d, %d, %v) = %d, %v; want %d, error %v", c.hidden, c.heads, c.headDim, c.headDimGiven, got, err, c.want, c.wantErr)
		}
	}
}
