package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestVerifySmallOp(t *testing.T) {
	useEmu(t)
	for _, args := range [][]string{
		{"embedding", "--vocab", "1003", "--hidden", "136", "--batch", "7"},
		{"rmsnorm", "--residual", "--unit-offset", "--hidden", "4104", "--batch", "3", "--dtype", "fp16"},
		{"rope", "--rope", "llama3", "--position", "20000", "--q-heads", "4", "--kv-heads", "1", "--batch", "2"},
		{"rope", "--rope", "dynamic", "--head-dim", "80", "--rotary-dim", "20", "--position", "3000", "--q-heads", "3", "--kv-heads", "3"},
		{"act", "--activation", "gelu_tanh", "--hidden", "136", "--batch", "17"},
		{"bias", "--hidden", "4104", "--batch", "2", "--dtype", "fp16"},
		{"argmax", "--vocab", "151936", "--batch", "1"},
		{"moe", "--experts", "60", "--top-k", "4", "--renormalize", "--hidden", "136", "--batch", "17"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, code, msg := runCLI(t, append([]string{"verify", "smallop", args[0], "--backend", "emu", "--json"}, args[1:]...)...)
			var rep smallOpReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("exit %d (%s); output is not one JSON object: %v\n%s", code, msg, err, out)
			}
			if code != 0 || !rep.Passed || len(rep.Checks) == 0 || rep.Op != args[0] {
				t.Fatalf("exit %d (%s): %s", code, msg, out)
			}
		})
	}
}

func TestVerifySmallOpBadInput(t *testing.T) {
	useEmu(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"softmax"}, "needs an op: embedding"},
		{[]string{"rope", "--rotary-dim", "5"}, "rotary_dim 5"},
		{[]string{"moe", "--experts", "8", "--top-k", "9"}, "top_k 9"},
		{[]string{"rmsnorm", "--hidden", "4100"}, "hidden 4100"},
		{[]string{"act", "--activation", "relu"}, "--activation \"relu\""},
		{[]string{"rmsnorm", "--batch", "1025", "--hidden", "8"}, "batch 1025 out of range 1..1024"},
	} {
		_, code, msg := runCLI(t, append(append([]string{"verify", "smallop"}, tc.args...), "--backend", "emu")...)
		if code != 2 || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: exit %d (%s), want exit 2 naming %q", tc.args, code, msg, tc.want)
		}
	}
}
