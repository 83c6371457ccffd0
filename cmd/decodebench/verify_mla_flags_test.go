package main

import (
	"strings"
	"testing"
)

// verify attention --mla refuses, by name, the GQA flags its kernel cannot honour, where it
// once ignored them and reported PASS on a bf16 cache of every token.
func TestVerifyMLARefusesFlagsItCannotHonour(t *testing.T) {
	useEmu(t)
	base := []string{"verify", "attention", "--mla", "--backend", "emu", "--batch", "1", "--q-heads", "16", "--context", "8", "--scale", "0.1"}
	for _, tc := range []struct {
		args []string
		text string
	}{
		{[]string{"--kv-dtype", "fp8"}, "--kv-dtype fp8"},
		{[]string{"--kv-scales", "head"}, "--kv-scales does not apply"},
		{[]string{"--window", "4"}, "--window does not apply"},
		{[]string{"--chunk", "4"}, "--chunk does not apply"},
		{[]string{"--sinks"}, "--sinks does not apply"},
	} {
		args := append(base[:len(base):len(base)], tc.args...)
		out, code, msg := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(msg, tc.text) || strings.Contains(out, "PASS") {
			t.Errorf("%v: exit %d %q\n%s\nwant exit 2 naming %q", tc.args, code, msg, out, tc.text)
		}
	}
}
