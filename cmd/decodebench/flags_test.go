package main

// Tests of the flag registry and the one parser (flags.go, argparse.go): each item a new user
// met in issue 19, as a table.

import (
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every refusal of the flags' values and names: one line, exit 2, naming the flag, the value
// and what is accepted.
func TestFlagValueErrors(t *testing.T) {
	testEnv(t, "")
	writePlanRun(t, "run", nil)
	predict := []string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1", "--context", "1k"}
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"a typo names the nearest flag", []string{"plan", "run", "--modle", "llama3-8b"}, "plan: unknown flag --modle: did you mean --model? (decodebench plan --help lists the flags)"},
		{"a typo in a subcommand", []string{"bench", "linear", "--n", "8", "--k", "8", "--min-tme", "1s"}, "bench linear: unknown flag --min-tme: did you mean --min-time?"},
		{"a typo of a command without flags", []string{"bench", "--bakend", "emu"}, "bench: unknown flag --bakend"},
		{"a flag far from every name", []string{"predict", "--zzzzzzzz"}, "predict: unknown flag --zzzzzzzz (decodebench predict --help"},
		{"a duration without a unit", []string{"bench", "linear", "--n", "8", "--k", "8", "--min-time", "5"}, "--min-time 5: want a duration with a unit, e.g. 500ms or 2s"},
		{"the same in sweep", []string{"sweep", "--model", "llama3-8b", "--max-time", "2"}, "--max-time 2: want a duration with a unit, e.g. 500ms or 2s"},
		{"and in validate", []string{"validate", "--min-time", "1"}, "--min-time 1: want a duration with a unit"},
		{"a bad percentage in --reserve", append(predict, "--reserve", "ten%"), "--reserve ten%: want a fraction such as 0.03 or a percentage such as 3%"},
		{"a percentage out of --reserve's range", append(predict, "--reserve", "100%"), "--reserve 1: give the fraction of GPU memory kept free, in [0, 1)"},
		{"a bad --headroom", []string{"plan", "run", "--context", "8k", "--min-request-rate", "20", "--headroom", "120%"}, "--headroom 120%: give the fraction of each server's rate kept spare"},
		{"a bad --threshold", []string{"compare", "--threshold", "3 percent", "run", "run"}, "--threshold 3 percent: want a fraction such as 0.03 or a percentage such as 3%"},
		{"a bad quantity", []string{"plan", "run", "--context", "8k", "--min-request-rate", "20", "--tokens-per-s", "5kb"}, "--tokens-per-s 5kb: want a number, optionally with k (x1000) or M"},
		{"a whole number", append(predict, "--tp", "two"), "--tp two: want a whole number"},
		{"a flag without its value", []string{"plan", "run", "--min-request-rate"}, "--min-request-rate needs a value"},
	} {
		_, code, msg := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %v: exit %d %q, want 2 and one line with %q", tc.desc, tc.args, code, msg, tc.want)
		}
	}
}

// The forms each value takes read the same as their plain forms: 3% is 0.03, 5k is 5000, and an
// argument may come before the flags.
func TestFlagValueForms(t *testing.T) {
	testEnv(t, "")
	writePlanRun(t, "run", nil)
	plan := []string{"plan", "--model", "llama3-8b", "--gpu", "h200", "--context", "8k", "--min-request-rate", "20", "--format", "json"}
	predict := []string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1,512", "--context", "32k", "--format", "json"}
	for _, tc := range []struct {
		desc         string
		given, plain []string
	}{
		{"--tokens-per-s 5k", append(plan, "--tokens-per-s", "5k"), append(plan, "--tokens-per-s", "5000")},
		{"--headroom 20%", append(plan, "--tokens-per-s", "5000", "--headroom", "20%"), append(plan, "--tokens-per-s", "5000", "--headroom", "0.2")},
		{"--reserve 30% in plan", append(plan, "--reserve", "30%"), append(plan, "--reserve", "0.3")},
		{"--reserve 30% in predict", append(predict, "--reserve", "30%"), append(predict, "--reserve", "0.3")},
		{"plan DIR before its flags", []string{"plan", "run", "--context", "8k", "--min-request-rate", "20", "--format", "json"},
			[]string{"plan", "--context", "8k", "--min-request-rate", "20", "--format", "json", "run"}},
		{"plan DIR between its flags", []string{"plan", "--context", "8k", "run", "--min-request-rate", "20", "--format", "json"},
			[]string{"plan", "--context", "8k", "--min-request-rate", "20", "--format", "json", "run"}},
		{"compare A B --threshold", []string{"compare", "run", "run", "--threshold", "5%", "--format", "json", "--out", "c1"},
			[]string{"compare", "--threshold", "0.05", "--format", "json", "--out", "c1", "run", "run"}},
	} {
		out, code, msg := runCLI(t, tc.given...)
		want, wantCode, wantMsg := runCLI(t, tc.plain...)
		if code != 0 || wantCode != 0 || out != want {
			t.Errorf("%s: exit %d %q, the plain form's %d %q; stdout equal: %v\n%s\n---\n%s", tc.desc, code, msg, wantCode, wantMsg, out == want, out, want)
		}
	}
	// The change a percentage makes is there: Llama-3-8B at batch 16 x 32k fits an H200 with
	// 10% kept free (the default), not with 50%.
	fits := []string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "16", "--context", "32k", "--format", "csv"}
	if def := mustRun(t, fits...); !strings.Contains(def, "true") || mustRun(t, append(fits, "--reserve", "50%")...) == def {
		t.Errorf("--reserve 50%% printed what the default prints: the value was not read\n%s", def)
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, code, msg := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d %s", args, code, msg)
	}
	return out
}

// Every environment variable has one meaning: one variable a flag, the same name in every
// command for a flag that means the same, a command's own name for --out (a file of bench, a
// directory of sweep); the renamed DECODEBENCH_OUT still works, with a notice.
func TestEnvironmentVariablesHaveOneMeaning(t *testing.T) {
	meaning := map[string]string{} // variable -> command path and flag that reads it, by the flag's meaning
	for _, cmd := range newApp().Commands {
		forEachFlag(cmd, cmd.Name, func(path, flag, env string) {
			key := flag // a shared flag: one meaning everywhere
			if flag == "out" {
				key = strings.Fields(path)[0] + " --out" // the command's own
			}
			if env != envVar(envScope(strings.Fields(path)[0], strings.Fields(path)[len(strings.Fields(path))-1], flag), flag) {
				t.Errorf("%s --%s reads %s, not the registry's name for it", path, flag, env)
			}
			if prev, ok := meaning[env]; ok && prev != key && strings.HasSuffix(env, "_OUT") {
				t.Errorf("%s means %q and %q", env, prev, key)
			}
			meaning[env] = key
		})
	}
	for _, want := range []string{"DECODEBENCH_SWEEP_OUT", "DECODEBENCH_PREDICT_OUT", "DECODEBENCH_BENCH_OUT", "DECODEBENCH_PLAN_OUT", "DECODEBENCH_MIN_TIME", "DECODEBENCH_MODEL"} {
		if _, ok := meaning[want]; !ok {
			t.Errorf("no flag reads %s", want)
		}
	}
	if _, ok := meaning["DECODEBENCH_OUT"]; ok {
		t.Errorf("DECODEBENCH_OUT is some flag's own variable again: it meant predict's and sweep's --out")
	}

	testEnv(t, "")
	predict := []string{"predict", "--model", "llama3-8b", "--gpu", "h200", "--batch", "1", "--context", "1k", "--format", "csv"}
	t.Setenv("DECODEBENCH_OUT", "old-out")
	_, stderr, code, msg := runApp(t, predict...)
	if code != 0 || !strings.Contains(stderr, "DECODEBENCH_OUT is DECODEBENCH_PREDICT_OUT in decodebench predict now") || !dirExists("old-out") {
		t.Errorf("DECODEBENCH_OUT in predict: exit %d %s, stderr %q; want it read as --out with a notice", code, msg, stderr)
	}
	t.Setenv("DECODEBENCH_PREDICT_OUT", "new-out")
	if _, stderr, code, _ = runApp(t, predict...); code != 0 || strings.Contains(stderr, "DECODEBENCH_OUT") || !dirExists("new-out") {
		t.Errorf("DECODEBENCH_PREDICT_OUT beside the old name: exit %d, stderr %q; want the new name read, no notice", code, stderr)
	}
	t.Setenv("DECODEBENCH_MIN_TIME", "5")
	if _, code, msg = runCLI(t, "bench", "linear", "--n", "8", "--k", "8"); code != exitUsage || msg != "DECODEBENCH_MIN_TIME=5: want a duration with a unit, e.g. 500ms or 2s" {
		t.Errorf("DECODEBENCH_MIN_TIME=5: exit %d %q, want 2 naming the variable and an example", code, msg)
	}
}

// forEachFlag calls fn with every flag of cmd and its subcommands and the variable it reads.
func forEachFlag(cmd *cli.Command, path string, fn func(path, flag, env string)) {
	for _, f := range cmd.Flags {
		fn(path, f.Names()[0], envName(f))
	}
	for _, sub := range cmd.Subcommands {
		forEachFlag(sub, path+" "+sub.Name, fn)
	}
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// A subcommand named after the flags runs as if named first: bench probe --bytes N read measures
// the read probe alone (the launch baseline and one probe), not every probe.
func TestSubcommandAfterFlags(t *testing.T) {
	emuEnv(t)
	stdout, _, code, msg := runBench(t, append([]string{"bench", "probe", "--backend", "emu", "--bytes", "65536", "--format", "csv", "read"}, fastTiming...)...)
	if code != 0 {
		t.Fatalf("bench probe --bytes 65536 read: exit %d %s", code, msg)
	}
	checkFormat(t, "bench probe FLAGS read", "csv", stdout, 2, "kind", "probe")
}
