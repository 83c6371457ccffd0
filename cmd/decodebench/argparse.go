package main

// parseLine is the one reading of a command line: urfave/cli finds the command and leaves its
// line unread (SkipFlagParsing), and parseLine reads it once against the command's flags,
// applying the rules every command follows:
//   - arguments may come before, between or after the flags (plan DIR --min-request-rate 20);
//     "--" ends the flags;
//   - an unknown flag is refused with the nearest flag's name and a pointer to --help;
//   - a list flag given twice is one list (--batch 1,2 --batch 4 is 1,2,4); any other flag given
//     twice is a usage error, never the last value silently;
//   - an old name of a renamed flag, or its environment variable, still works and says its new
//     name on standard error;
//   - a bad value is a usage error naming the flag, the value and what is accepted.
// --format is one definition shared by every command that prints rows.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/format"
)

// flagRulesMu guards the three tables below: each app built (one a test) adds its flags.
var flagRulesMu sync.Mutex

// listFlags are the flags whose values are lists: given twice, their values are joined.
var listFlags = map[cli.Flag]bool{}

// listFlag marks f as a list.
func listFlag(f *cli.StringFlag) *cli.StringFlag {
	flagRulesMu.Lock()
	defer flagRulesMu.Unlock()
	listFlags[f] = true
	return f
}

// renamed is an old flag name that still works: its value goes to the flag named to,
// through convert when the two take values of different types.
type renamed struct {
	to      string
	convert func(value string) (string, error)
}

var renamedFlags = map[cli.Flag]renamed{}

// oldName is a hidden flag of the old name whose value parseLine moves to the flag named to.
// convert may be nil (the same value).
func oldName(f cli.Flag, to string, convert func(string) (string, error)) cli.Flag {
	hiddenFlag(f)
	flagRulesMu.Lock()
	defer flagRulesMu.Unlock()
	renamedFlags[f] = renamed{to: to, convert: convert}
	return f
}

// secondsToDuration turns the old float seconds of --min-seconds into a duration.
func secondsToDuration(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return v, nil
	}
	return strings.TrimSpace(v) + "s", nil
}

// formatAccepted is what each --format flag accepts.
var formatAccepted = map[cli.Flag][]string{}

// formatFlag is --format, accepting the formats named (the first is the default).
func formatFlag(accepted ...string) *cli.StringFlag {
	f := &cli.StringFlag{Name: "format", Value: accepted[0],
		Usage: "what to print on standard output: " + strings.Join(accepted, ", ") + " (md pastes into an issue; json is for programs)"}
	flagRulesMu.Lock()
	defer flagRulesMu.Unlock()
	formatAccepted[f] = accepted
	return f
}

// jsonAlias is the old --json switch of a command that now takes --format: it means
// --format to (json, or jsonl where the old output was JSON Lines).
func jsonAlias(to string) cli.Flag {
	return oldName(&cli.BoolFlag{Name: "json"}, "format", func(v string) (string, error) {
		if v == "false" {
			return format.Table, nil
		}
		return to, nil
	})
}

// parseFormat reads --format against the formats the command accepts.
func parseFormat(c *cli.Context) (string, error) {
	name := c.String("format")
	accepted := format.All
	flagRulesMu.Lock()
	defer flagRulesMu.Unlock()
	for _, f := range c.Command.Flags {
		if a, ok := formatAccepted[f]; ok {
			accepted = a
		}
	}
	if err := format.Check(name, accepted); err != nil {
		return "", usageError("%v", err)
	}
	return name, nil
}

// flagUse is one occurrence of a flag on the command line.
type flagUse struct {
	given string // the name as typed, without dashes
	value string
}

// readLine reads parseLine's flags into their values, in the order first given, the arguments
// and where the first of them stood in raw (-1: none); help is true when --help or -h was given.
func readLine(c *cli.Context, raw []string) (uses map[cli.Flag][]flagUse, order []cli.Flag, args []string, first int, help bool, err error) {
	first = -1
	cmd := c.Command
	byName := map[string]cli.Flag{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	uses = map[cli.Flag][]flagUse{}
	for i := 0; i < len(raw); i++ {
		tok := raw[i]
		if tok == "--" {
			if first < 0 && i+1 < len(raw) {
				first = i + 1
			}
			args = append(args, raw[i+1:]...)
			break
		}
		if len(tok) < 2 || tok[0] != '-' {
			if first < 0 {
				first = i
			}
			args = append(args, tok)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(tok, "-"), "=")
		if name == "help" || name == "h" {
			return nil, nil, nil, first, true, nil
		}
		f, ok := byName[name]
		if !ok {
			return nil, nil, nil, first, false, unknownFlag(c, name)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(raw) {
				return nil, nil, nil, first, false, usageError("--%s needs a value (decodebench %s --help says what it takes)", name, commandPath(c))
			}
			i++
			value = raw[i]
		}
		target := f
		if r, ok := renamedFlags[f]; ok {
			if value, err = convertOld(r, value); err != nil {
				return nil, nil, nil, first, false, usageError("--%s %q: %v", name, value, err)
			}
			now := "--" + r.to
			if _, isBool := f.(*cli.BoolFlag); isBool {
				now += " " + value
			}
			fmt.Fprintf(errWriter(c), "decodebench: --%s is %s now; the old name still works\n", name, now)
			target = byName[r.to]
		}
		if _, seen := uses[target]; !seen {
			order = append(order, target)
		}
		uses[target] = append(uses[target], flagUse{given: name, value: value})
	}
	return uses, order, args, first, false, nil
}

func convertOld(r renamed, value string) (string, error) {
	if r.convert == nil {
		return value, nil
	}
	return r.convert(value)
}

// parseLine reads the command line of c's command (urfave/cli left it unread) and runs action
// with a context holding the flags' values and the arguments.
func parseLine(c *cli.Context, action cli.ActionFunc) error {
	raw := c.Args().Slice()
	flagRulesMu.Lock()
	uses, order, args, first, help, err := readLine(c, raw)
	flagRulesMu.Unlock()
	if err != nil {
		return err
	}
	// A subcommand named after flags (bench probe --bytes 65536 read) runs with the whole line
	// but its name, as it would have named first.
	if sub := c.Command.Command(firstOf(args)); sub != nil && !help {
		line := append(append([]string{sub.Name}, raw[:first]...), raw[first+1:]...)
		subCtx := cli.NewContext(c.App, nil, c)
		subCtx.Command = sub
		return sub.Run(subCtx, line...)
	}
	if help {
		return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
	}
	if err := oldEnvVars(c, uses, &order); err != nil {
		return err
	}
	formerEnv(c, uses, &order)
	set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(set); err != nil {
			return usageError("%s", explainFlagError(c.Command.Flags, err))
		}
	}
	flagRulesMu.Lock()
	for _, f := range order {
		list, name := uses[f], f.Names()[0]
		var values []string
		for _, u := range list {
			values = append(values, u.value)
		}
		if len(list) > 1 && !listFlags[f] {
			flagRulesMu.Unlock()
			return usageError("--%s given %d times (%s): give it once", name, len(list), strings.Join(values, ", "))
		}
		value := strings.Join(values, ",")
		if err := set.Set(name, value); err != nil {
			flagRulesMu.Unlock()
			return usageError("--%s %s: %v", name, value, valueWant(f, err))
		}
	}
	flagRulesMu.Unlock()
	parsed := cli.NewContext(c.App, set, c)
	parsed.Command = c.Command
	if err := set.Parse(append([]string{"--"}, args...)); err != nil {
		return usageError("%v", err)
	}
	return action(parsed)
}

func firstOf(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// oldEnvVars moves an old name's environment variable (DECODEBENCH_EXPECT) to its flag, with a
// notice, where neither the line nor the new name's variable gives it.
func oldEnvVars(c *cli.Context, uses map[cli.Flag][]flagUse, order *[]cli.Flag) error {
	flagRulesMu.Lock()
	defer flagRulesMu.Unlock()
	for _, old := range c.Command.Flags {
		r, ok := renamedFlags[old]
		if !ok {
			continue
		}
		var target cli.Flag
		for _, f := range c.Command.Flags {
			if f.Names()[0] == r.to {
				target = f
			}
		}
		value, set := os.LookupEnv(envName(old))
		if target == nil || !set || len(uses[target]) > 0 {
			continue
		}
		if _, newSet := os.LookupEnv(envName(target)); newSet {
			continue
		}
		value, err := convertOld(r, value)
		if err != nil {
			return usageError("%s=%q: %v", envName(old), value, err)
		}
		fmt.Fprintf(errWriter(c), "decodebench: %s is %s now; the old name still works\n", envName(old), envName(target))
		*order = append(*order, target)
		uses[target] = []flagUse{{given: old.Names()[0], value: value}}
	}
	return nil
}

// formerEnv reads a renamed variable (DECODEBENCH_OUT, now DECODEBENCH_SWEEP_OUT in sweep) into
// its flag, with a notice, where neither the line nor the new name gives it.
func formerEnv(c *cli.Context, uses map[cli.Flag][]flagUse, order *[]cli.Flag) {
	for _, f := range c.Command.Flags {
		name := envName(f)
		old, renamed := formerEnvVars[name]
		if !renamed || len(uses[f]) > 0 {
			continue
		}
		if _, set := os.LookupEnv(name); set {
			continue
		}
		if value, set := os.LookupEnv(old); set {
			fmt.Fprintf(errWriter(c), "decodebench: %s is %s in decodebench %s now; the old name still works\n", old, name, commandPath(c))
			*order = append(*order, f)
			uses[f] = []flagUse{{given: old, value: value}}
		}
	}
}

// unknownFlag refuses a flag the command does not take, naming the nearest one it does.
func unknownFlag(c *cli.Context, name string) error {
	var names []string
	for _, f := range c.Command.Flags {
		if renamedFlags[f].to != "" {
			continue // an old name is not offered
		}
		names = append(names, f.Names()...)
	}
	dash := "--"
	if len(name) == 1 {
		dash = "-"
	}
	msg := fmt.Sprintf("%s: unknown flag %s%s", commandPath(c), dash, name)
	if near := axes.Nearest(name, names); near != "" {
		msg += fmt.Sprintf(": did you mean --%s?", near)
	}
	return usageError("%s (decodebench %s --help lists the flags)", msg, commandPath(c))
}

// commandPath is the command as typed after decodebench: "bench linear".
func commandPath(c *cli.Context) string {
	var names []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" && l.Command.Name != c.App.Name {
			if len(names) == 0 || names[0] != l.Command.Name {
				names = append([]string{l.Command.Name}, names...)
			}
		}
	}
	return strings.Join(names, " ")
}

// valueWant says what a flag of f's type accepts, where its parser said only "parse error".
func valueWant(f cli.Flag, err error) string {
	switch f.(type) {
	case *cli.IntFlag, *cli.Uint64Flag:
		return "want a whole number, e.g. 4"
	case *cli.Float64Flag:
		return "want a number, e.g. 0.5"
	case *cli.BoolFlag:
		return "want true or false"
	}
	return err.Error()
}

// urfave/cli's error for a bad value of an environment variable.
var envValueError = regexp.MustCompile(`^could not parse "(.*)" (?:as \S+ value )?from environment variable "(\S+)" (?:as value )?for flag (\S+): (.*)$`)

// explainFlagError turns urfave/cli's error for a bad environment variable into one line naming
// the variable, its value and what is accepted.
func explainFlagError(flags []cli.Flag, err error) string {
	m := envValueError.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	why := m[4]
	for _, f := range flags {
		if f.Names()[0] == m[3] {
			why = valueWant(f, errors.New(why))
		}
	}
	return fmt.Sprintf("%s=%s: %s", m[2], m[1], why)
}

func errWriter(c *cli.Context) io.Writer {
	if c.App != nil && c.App.ErrWriter != nil {
		return c.App.ErrWriter
	}
	return os.Stderr
}

// readOwnLine makes every command with flags read its line through parseLine.
func readOwnLine(cmd *cli.Command) {
	if len(cmd.Flags) > 0 && cmd.Action != nil && !cmd.SkipFlagParsing {
		action := cmd.Action
		cmd.SkipFlagParsing = true
		cmd.Action = func(c *cli.Context) error { return parseLine(c, action) }
	}
	for _, sub := range cmd.Subcommands {
		readOwnLine(sub)
	}
}
