package main

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestVerifyMLA(t *testing.T) {
	useEmu(t)
	for _, args := range [][]string{
		{"--batch", "3", "--q-heads", "16", "--context", "1,70,33", "--scale", "0.094"},
		{"--batch", "2", "--q-heads", "128", "--context", "40,9", "--page-size", "16", "--splits", "3", "--dtype", "fp16", "--scale", "0.1", "--append"},
		{"--batch", "1", "--q-heads", "3", "--context", "100", "--page-size", "32", "--splits", "9", "--scale", "0.12"},
		{"--batch", "4", "--q-heads", "8", "--context", "25", "--scale", "0.1"}, // one length for every sequence
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, code, msg := runCLI(t, append([]string{"verify", "attention", "--mla", "--backend", "emu", "--json"}, args...)...)
			var rep attentionReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("exit %d (%s); output is not one JSON object: %v\n%s", code, msg, err, out)
			}
			if code != 0 || !rep.Passed || rep.Kernel != "attention_mla" || rep.KVHeads != 1 || rep.HeadDim != 576 || rep.Variant != "mma" {
				t.Fatalf("exit %d (%s): %s", code, msg, out)
			}
			if batch, _ := strconv.Atoi(args[1]); len(rep.Context) != batch {
				t.Errorf("contexts %v for a batch of %d", rep.Context, batch)
			}
			if i := slices.Index(args, "--splits"); i >= 0 && strconv.Itoa(rep.Splits) != args[i+1] {
				t.Errorf("%d splits, want %s", rep.Splits, args[i+1])
			}
		})
	}
}

func TestVerifyMLAUsage(t *testing.T) {
	useEmu(t)
	for _, tc := range []struct {
		args []string
		text string
	}{
		{[]string{"--batch", "1", "--q-heads", "16", "--context", "8"}, "needs --scale"},
		{[]string{"--batch", "1", "--q-heads", "16", "--context", "8", "--scale", "0.1", "--head-dim", "128"}, "--head-dim does not apply"},
		{[]string{"--batch", "1", "--q-heads", "129", "--context", "8", "--scale", "0.1"}, "q_heads 129 out of range 1..128"},
		{[]string{"--batch", "1", "--q-heads", "16", "--context", "8", "--scale", "-1"}, "scale -1 must be finite and > 0"},
	} {
		_, code, msg := runCLI(t, append([]string{"verify", "attention", "--mla", "--backend", "emu"}, tc.args...)...)
		if code != 2 || !strings.Contains(msg, tc.text) {
			t.Errorf("%v: exit %d, %q; want 2 naming %q", tc.args, code, msg, tc.text)
		}
	}
}
