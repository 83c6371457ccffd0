// Command decodebench measures how fast a GPU decodes with a large language model: the raw
// tokens per second of hand-written CUDA kernels, per request and per server, against the
// roofline of the card's memory bandwidth and arithmetic rate.
package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
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
			plotCommand(),
			reportCommand(),
			compareCommand(),
			validateCommand(),
			fleetCommand(),
		},
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return usageError("%v", err)
		},
		ExitErrHandler: func(c *cli.Context, err error) {}, // main prints and exits
	}
	for _, cmd := range app.Commands {
		addEnvVars(cmd)
	}
	return app
}

// addEnvVars gives every flag without one the environment variable DECODEBENCH_<FLAG>
// (--model-config reads DECODEBENCH_MODEL_CONFIG), so a fleet job can be configured without
// editing command lines.
func addEnvVars(cmd *cli.Command) {
	for _, f := range cmd.Flags {
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		env := v.Elem().FieldByName("EnvVars")
		if !env.IsValid() || env.Len() > 0 || !env.CanSet() {
			continue
		}
		name := "DECODEBENCH_" + strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
		env.Set(reflect.ValueOf([]string{name}))
	}
	for _, sub := range cmd.Subcommands {
		addEnvVars(sub)
	}
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

// failure is a run or check that failed: exit code 1.
func failure(format string, a ...any) error {
	return cli.Exit(fmt.Sprintf(format, a...), exitFailure)
}
