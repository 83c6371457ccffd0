// Command decodebench measures how fast a GPU decodes with a large language model: the raw
// tokens per second of hand-written CUDA kernels, per request and per server, against the
// roofline of the card's memory bandwidth and arithmetic rate.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes: 0 success, 1 a failed check or run, 2 a usage error (bad flag, bad value),
// 130 interrupted.
const (
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func newApp() *cli.App {
	app := &cli.App{
		Name:    "decodebench",
		Usage:   "measure how fast a GPU decodes with a large language model",
		Version: version,
		Description: "decodebench times hand-written CUDA kernels for the matrix products and the attention of\n" +
			"one decode step, and reports tokens/s at two levels: per request (1 / step time, what one\n" +
			"user sees stream) and per server (batch / step time, the card's total rate), against the\n" +
			"roofline of the card's memory bandwidth and arithmetic rate. Units are decimal\n" +
			"(1 GB/s = 1e9 B/s).",
		Commands: []*cli.Command{
			infoCommand(),
			modelCommand(),
			predictCommand(),
			verifyCommand(),
			benchCommand(),
			sweepCommand(),
			stepCommand(),
			plotCommand(),
			reportCommand(),
			compareCommand(),
			planCommand(),
			validateCommand(),
			fleetCommand(),
		},
		OnUsageError:   onUsageError,
		ExitErrHandler: func(c *cli.Context, err error) {}, // main prints and exits
	}
	// An unknown command is a usage error (exit 2) that names it and the commands there are,
	// instead of urfave/cli's "No help topic" and exit 3.
	app.CommandNotFound = func(c *cli.Context, name string) {}
	app.Action = func(c *cli.Context) error {
		if c.NArg() == 0 {
			return cli.ShowAppHelp(c)
		}
		return usageError("unknown command %q: the commands are %s (decodebench --help)", c.Args().First(), commandNames(app.Commands))
	}
	for _, cmd := range app.Commands {
		attachEnvVars(cmd, cmd.Name)
		addUsageErrors(cmd)
		readOwnLine(cmd)
	}
	return app
}

// addUsageErrors makes a bad flag or flag value of every command and subcommand a usage error
// (exit 2, one line) rather than urfave/cli's help dump and exit 1; a command with subcommands
// and no action of its own refuses an unknown subcommand the same way.
func addUsageErrors(cmd *cli.Command) {
	cmd.OnUsageError = onUsageError
	if len(cmd.Subcommands) > 0 && cmd.Action == nil {
		parent := cmd
		cmd.Action = func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.ShowSubcommandHelp(c)
			}
			return usageError("%s: unknown subcommand %q: accepted are %s", parent.Name, c.Args().First(), commandNames(parent.Subcommands))
		}
	}
	for _, sub := range cmd.Subcommands {
		addUsageErrors(sub)
	}
}

// onUsageError is urfave/cli's parse error of a command that parseLine does not read (one
// without flags of its own, or a bad environment variable) as one line, exit 2.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		return unknownFlag(c, name)
	}
	return usageError("%s", explainFlagError(c.Command.Flags, err))
}

func commandNames(cmds []*cli.Command) string {
	var names []string
	for _, c := range cmds {
		if c.Name != "help" && !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}

func main() {
	os.Exit(run(os.Args))
}

// run executes the command line and returns the process exit code.
func run(args []string) int {
	err := newApp().Run(args)
	if err == nil {
		return 0
	}
	code := exitFailure
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		code = coder.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(os.Stderr, "decodebench: "+msg)
	}
	return code
}

// usageError is a bad flag or value: exit code 2, nothing written.
func usageError(format string, a ...any) error {
	return cli.Exit(fmt.Sprintf(format, a...), exitUsage)
}

// checkOutDir refuses an --out that names an existing file where a directory is wanted, as a
// usage error before any work, not as mkdir's "not a directory" after the work is done.
func checkOutDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return usageError("--out %s is a file: this command writes a directory of files there; give a new or existing directory", dir)
	}
	return nil
}

// failure is a run or check that failed: exit code 1.
func failure(format string, a ...any) error {
	return cli.Exit(fmt.Sprintf(format, a...), exitFailure)
}
