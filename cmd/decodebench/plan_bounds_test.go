package main

import (
	"os"
	"strings"
	"testing"
)

// Traffic past what a plan can count is a usage error naming the flags, never "1 server" (an
// int overflowed) nor +Inf in the JSON; nothing is written to --out.
func TestPlanBoundsTheTraffic(t *testing.T) {
	testEnv(t, "")
	predicted := []string{"plan", "--model", "llama3-8b", "--gpu", "h200", "--context", "8k", "--min-request-rate", "20", "--format", "json", "--out", "plan-out"}
	tests := []struct {
		desc    string
		traffic []string
		want    string
	}{
		{"3.6e22 tokens/s", []string{"--tokens-per-s", "3.6e22"}, "--tokens-per-s 3.6e22: more than the 1e+12"},
		{"requests x tokens overflowing to +Inf", []string{"--requests-per-s", "1e300", "--output-tokens", "1e300"}, "= +Inf tokens/s: more than"},
		{"a headroom that leaves no server usable", []string{"--tokens-per-s", "1e12", "--headroom", "0.99999999999"}, "more than the 1e+09 a plan counts"},
	}
	for _, tc := range tests {
		out, _, code, msg := runApp(t, append(predicted[:len(predicted):len(predicted)], tc.traffic...)...)
		if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(out, "Inf") {
			t.Errorf("%s: exit %d %q\n%s\nwant exit 2 naming %q", tc.desc, code, msg, out, tc.want)
		}
		if _, err := os.Stat("plan-out"); err == nil {
			t.Errorf("%s: wrote plan-out", tc.desc)
		}
	}
	// At the limit the plan is made, every count a whole number.
	if _, _, code, msg := runApp(t, append(predicted[:len(predicted):len(predicted)], "--tokens-per-s", "1e12")...); code != 0 {
		t.Errorf("1e12 tokens/s: exit %d %q", code, msg)
	}
}
