package main

// The rules every command's flags follow, applied in one place (checkFlagRules, run before
// every command's action): a list flag given twice is merged (--batch 1,2 --batch 4 is
// 1,2,4); any other flag given twice is a usage error, because urfave/cli would keep the last
// value without a word; an old name of a renamed flag still works and says its new name on
// standard error. --format is one definition shared by every command that prints rows.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

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

// oldName is a hidden flag of the old name whose value checkFlagRules moves to the flag named
// to. convert may be nil (the same value).
func oldName(f cli.Flag, to string, convert func(string) (string, error)) cli.Flag {
	switch v := f.(type) {
	case *cli.StringFlag:
		v.Hidden = true
	case *cli.BoolFlag:
		v.Hidden = true
	case *cli.Float64Flag:
		v.Hidden = true
	case *cli.IntFlag:
		v.Hidden = true
	}
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

// checkFlagRules merges repeated list flags, refuses other repeats and moves old names' values
// to their new flags, reading the command line as typed (urfave/cli keeps only the last value
// of a flag given twice).
func checkFlagRules(c *cli.Context) error {
	flagRulesMu.Lock()
	defer flagRulesMu.Unlock()
	if c.Args().Present() && c.Command.Command(c.Args().First()) != nil {
		return nil // the subcommand's own check reads the line
	}
	// The parent's unparsed arguments are this command's name and its line as typed.
	lineage := c.Lineage()
	if len(lineage) < 2 || lineage[1].Args().Len() == 0 {
		return nil
	}
	raw := lineage[1].Args().Slice()[1:]
	byName := map[string]cli.Flag{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	uses := map[cli.Flag][]flagUse{}
	var order []cli.Flag
	for i := 0; i < len(raw); i++ {
		tok := raw[i]
		if tok == "--" {
			break
		}
		if len(tok) < 2 || tok[0] != '-' {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(tok, "-"), "=")
		f, ok := byName[name]
		if !ok {
			continue
		}
		if !hasValue {
			if _, isBool := f.(*cli.BoolFlag); isBool {
				value = "true"
			} else if i+1 < len(raw) {
				i++
				value = raw[i]
			}
		}
		target := f
		if r, ok := renamedFlags[f]; ok {
			if r.convert != nil {
				converted, err := r.convert(value)
				if err != nil {
					return usageError("--%s %q: %v", name, value, err)
				}
				value = converted
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
	// An old name's environment variable (DECODEBENCH_GPUS) still works where the line gives
	// neither name.
	for _, old := range c.Command.Flags {
		r, ok := renamedFlags[old]
		oldName := old.Names()[0]
		target := byName[r.to]
		if !ok || target == nil || len(uses[target]) > 0 || !c.IsSet(oldName) {
			continue
		}
		value := fmt.Sprint(c.Value(oldName))
		if r.convert != nil {
			converted, err := r.convert(value)
			if err != nil {
				return usageError("%s=%q: %v", envName(old), value, err)
			}
			value = converted
		}
		fmt.Fprintf(errWriter(c), "decodebench: %s is %s now; the old name still works\n", envName(old), envName(target))
		order = append(order, target)
		uses[target] = []flagUse{{given: oldName, value: value}}
	}
	for _, f := range order {
		list := uses[f]
		name := f.Names()[0]
		if len(list) > 1 && !listFlags[f] {
			var values []string
			for _, u := range list {
				values = append(values, u.value)
			}
			return usageError("--%s given %d times (%s): give it once", name, len(list), strings.Join(values, ", "))
		}
		var values []string
		moved := false // the parser set an old name's flag, not f
		for _, u := range list {
			values = append(values, u.value)
			moved = moved || byName[u.given] != f
		}
		if len(list) > 1 || moved {
			if err := c.Set(name, strings.Join(values, ",")); err != nil {
				return usageError("--%s %q: %v", name, strings.Join(values, ","), err)
			}
		}
	}
	return nil
}

// envName is the flag's environment variable (addEnvVars gives one to every flag).
func envName(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok && len(d.GetEnvVars()) > 0 {
		return d.GetEnvVars()[0]
	}
	return "DECODEBENCH_" + strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
}

func errWriter(c *cli.Context) io.Writer {
	if c.App != nil && c.App.ErrWriter != nil {
		return c.App.ErrWriter
	}
	return os.Stderr
}

// addFlagRules runs checkFlagRules before the action of every command and subcommand.
func addFlagRules(cmd *cli.Command) {
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if err := checkFlagRules(c); err != nil {
			return err
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	for _, sub := range cmd.Subcommands {
		addFlagRules(sub)
	}
}

// hiddenFlag keeps a tuning flag out of --help (the method's knobs a user rarely turns).
func hiddenFlag(f cli.Flag) cli.Flag {
	switch v := f.(type) {
	case *cli.IntFlag:
		v.Hidden = true
	case *cli.Float64Flag:
		v.Hidden = true
	case *cli.Uint64Flag:
		v.Hidden = true
	case *cli.DurationFlag:
		v.Hidden = true
	}
	return f
}
