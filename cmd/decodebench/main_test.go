package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every flag of every command reads an environment variable (fleet jobs configure runs that
// way), and flag names are unique within a command.
func TestEveryFlagHasAnEnvVar(t *testing.T) {
	var walk func(path string, cmd *cli.Command)
	walk = func(path string, cmd *cli.Command) {
		path += " " + cmd.Name
		seen := map[string]bool{}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if seen[name] {
				t.Errorf("%s: flag --%s defined twice", path, name)
			}
			seen[name] = true
			env := reflect.ValueOf(f).Elem().FieldByName("EnvVars")
			if !env.IsValid() || env.Len() == 0 {
				t.Errorf("%s --%s has no environment variable", path, name)
			}
		}
		for _, sub := range cmd.Subcommands {
			walk(path, sub)
		}
	}
	for _, cmd := range newApp().Commands {
		walk("decodebench", cmd)
	}
}

// urfave/cli turns `backquoted` text in a flag's usage into the value's placeholder name,
// which garbles --help; usage strings must not contain backquotes.
func TestNoBackquotesInFlagUsage(t *testing.T) {
	var walk func(cmd *cli.Command)
	walk = func(cmd *cli.Command) {
		for _, f := range cmd.Flags {
			if u := reflect.ValueOf(f).Elem().FieldByName("Usage"); u.IsValid() && strings.Contains(u.String(), "`") {
				t.Errorf("%s --%s: usage %q has a backquote", cmd.Name, f.Names()[0], u.String())
			}
		}
		for _, sub := range cmd.Subcommands {
			walk(sub)
		}
	}
	for _, cmd := range newApp().Commands {
		walk(cmd)
	}
}

// A bad flag, an unknown command or an unknown subcommand is a usage error in every command:
// exit 2 and one line naming what was wrong, never urfave/cli's help dump with exit 1 or 3.
func TestUsageErrorsExitTwoEverywhere(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--model", "llama3-8b", "--foo"}, "-foo"},
		{[]string{"model", "show", "--model", "llama3-8b", "--bogus"}, "-bogus"},
		{[]string{"model", "list", "--bogus"}, "-bogus"},
		{[]string{"info", "--bogus"}, "-bogus"},
		{[]string{"bogus"}, `unknown command "bogus": the commands are info, model, predict`},
		{[]string{"model", "bogus"}, `unknown subcommand "bogus": accepted are list, show`},
	}
	for _, tc := range tests {
		stdout, _, code, msg := runBench(t, tc.args...)
		if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Contains(stdout, "USAGE") {
			t.Errorf("%v: exit %d, message %q, stdout %q; want exit 2 and a message with %q", tc.args, code, msg, stdout, tc.want)
		}
	}
	for _, args := range [][]string{{}, {"model"}, {"help"}, {"model", "help", "show"}} {
		if stdout, _, code, msg := runBench(t, args...); code != 0 || !strings.Contains(stdout, "USAGE") {
			t.Errorf("%v: exit %d (%s), want 0 and the help", args, code, msg)
		}
	}
}

// A usage line shows the flags before the directories, one form for every command (parseLine
// reads flags after an argument too: plan DIR --min-request-rate 20).
func TestUsageTextFlagsBeforeArguments(t *testing.T) {
	var walk func(cmd *cli.Command)
	walk = func(cmd *cli.Command) {
		positional, prev := false, ""
		for _, tok := range strings.Fields(cmd.UsageText) {
			isFlag := strings.HasPrefix(strings.TrimLeft(prev, "[("), "-")
			prev = tok
			switch {
			case (tok == "DIR" || tok == "DIR_A" || tok == "DIR_B" || tok == "DIR...") && !isFlag:
				positional = true
			case positional && strings.HasPrefix(strings.TrimLeft(tok, "[("), "--"):
				t.Errorf("%s: usage %q shows %s after an argument", cmd.Name, cmd.UsageText, tok)
			}
		}
		for _, sub := range cmd.Subcommands {
			walk(sub)
		}
	}
	for _, cmd := range newApp().Commands {
		walk(cmd)
	}
}
