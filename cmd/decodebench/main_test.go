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
