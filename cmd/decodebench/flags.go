package main

// The flag registry: a flag that several commands take is defined here once and reused by each
// (the timing rule, the model, --out, --gpu, --reserve, the batch and context lists); every
// flag gets its environment variable from one rule (attachEnvVars); durations, fractions and
// k/M quantities are read by bench/units' one parser each. parseLine (argparse.go) is the one
// reading of a command line.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/bench/units"
)

// durationValue is a flag value read by units.ParseDuration: a bare number is refused with an
// example instead of Go's "parse error". Its String is Go's form, which c.Duration reads back.
type durationValue struct{ d time.Duration }

func (v *durationValue) Set(s string) error {
	d, err := units.ParseDuration(s)
	if err != nil {
		return err
	}
	v.d = d
	return nil
}

func (v *durationValue) String() string {
	if v == nil {
		return "0s"
	}
	return v.d.String()
}

func (v *durationValue) Get() any { return v.d }

// durationFlag is a duration flag (--min-time 500ms).
func durationFlag(name string, value time.Duration, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Value: &durationValue{value}, Usage: usage}
}

// fractionValue is a flag value read by units.ParseFraction: 0.1 or 10%; within is the range
// its command accepts, for the error. Its String is the number, which c.Float64 reads back.
type fractionValue struct {
	f      float64
	within string
}

func (v *fractionValue) Set(s string) error {
	f, err := units.ParseFraction(s)
	if err != nil {
		return fmt.Errorf("%v, in %s", err, v.within)
	}
	v.f = f
	return nil
}

func (v *fractionValue) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatFloat(v.f, 'g', -1, 64)
}

func (v *fractionValue) Get() any { return v.f }

// fractionFlag is a fraction flag (--reserve 0.1 or 10%) accepting the range within ("[0, 1)").
func fractionFlag(name string, value float64, within, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Value: &fractionValue{value, within}, Usage: usage}
}

// inCategory puts a flag under a heading of --help.
func inCategory(f cli.Flag, category string) cli.Flag {
	switch v := f.(type) {
	case *cli.StringFlag:
		v.Category = category
	case *cli.IntFlag:
		v.Category = category
	case *cli.GenericFlag:
		v.Category = category
	case *cli.BoolFlag:
		v.Category = category
	}
	return f
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
	case *cli.GenericFlag:
		v.Hidden = true
	case *cli.StringFlag:
		v.Hidden = true
	case *cli.BoolFlag:
		v.Hidden = true
	}
	return f
}

// ---- the shared definitions -------------------------------------------------------------------

// timingOptions say which of the timing rule's flags a command shows.
type timingOptions struct {
	tuning     bool   // --warmup, --min-samples and --target-spread in --help (bench), else hidden
	maxSamples bool   // --max-samples, hidden (sweep)
	oldSeconds bool   // the old --min-seconds and --max-seconds (bench)
	suiteRule  bool   // only --min-time and --max-time, 0 = the suite's own rule (validate)
	category   string // a --help heading, or none
}

// timingFlags are the timing rule of bench, step, sweep and validate; parseTimingFlags reads them.
func timingFlags(o timingOptions) []cli.Flag {
	d := timing.Default
	minTime, maxTime, suffix := seconds(d.MinSeconds), seconds(d.MaxSeconds), ""
	if o.suiteRule {
		minTime, maxTime, suffix = 0, 0, "; default: the suite's"
	}
	flags := []cli.Flag{
		durationFlag("min-time", minTime, "sample each measurement for at least this long (a duration: 500ms, 2s"+suffix+")"),
		durationFlag("max-time", maxTime, "and stop once this long has passed (e.g. 2s; the record says it did not converge"+suffix+")"),
	}
	if o.suiteRule {
		return flags
	}
	tuning := []cli.Flag{
		&cli.IntFlag{Name: "warmup", Value: d.Warmup, Usage: "untimed samples before sampling"},
		&cli.IntFlag{Name: "min-samples", Value: d.MinSamples, Usage: "take at least this many samples"},
		&cli.Float64Flag{Name: "target-spread", Value: d.TargetSpread, Usage: "then stop once (Q3 - Q1) / median falls under this"},
	}
	if !o.tuning {
		for _, f := range tuning {
			hiddenFlag(f)
		}
	}
	flags = append(tuning, flags...)
	if o.maxSamples {
		flags = append(flags, hiddenFlag(&cli.IntFlag{Name: "max-samples"}))
	}
	if o.oldSeconds {
		flags = append(flags, oldName(&cli.Float64Flag{Name: "min-seconds"}, "min-time", secondsToDuration),
			oldName(&cli.Float64Flag{Name: "max-seconds"}, "max-time", secondsToDuration))
	}
	if o.category != "" {
		for _, f := range flags {
			inCategory(f, o.category)
		}
	}
	return flags
}

// seconds turns timing's float seconds into a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// modelFlagsIn are the flags that select a model shape: a preset or a Hugging Face
// config.json, optionally sharded by tensor parallelism and with its weight format (a list
// where formatList: one shape per format) and KV dtype overridden; under a --help heading
// where category is not empty.
func modelFlagsIn(category string, formatList bool) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"},
			Usage: "a preset model name, e.g. llama3-8b (decodebench model list shows them all)"},
		&cli.StringFlag{Name: "model-config", TakesFile: true,
			Usage: "a Hugging Face config.json, or the folder of a downloaded model; model_type one of " + strings.Join(model.SupportedModelTypes(), ", ")},
		&cli.IntFlag{Name: "tp", Value: 1,
			Usage: "tensor-parallel degree: one GPU's shard (must divide the heads, KV heads and FFN size)"},
		weightDTypeFlag(formatList),
		groupSizeFlag(),
		kvDTypeFlag(),
	}
	if category != "" {
		for _, f := range flags {
			inCategory(f, category)
		}
	}
	return flags
}

// modelFlags select one model shape (resolveModel).
func modelFlags() []cli.Flag { return modelFlagsIn("", false) }

// modelFormatsFlags are modelFlags with --weight-dtype a list (predict): one shape per format.
func modelFormatsFlags() []cli.Flag { return modelFlagsIn("", true) }

// outFlag is --out: what it names is the command's own (a file of bench, a run directory of
// sweep), so its environment variable is too (DECODEBENCH_SWEEP_OUT).
func outFlag(usage string, aliases ...string) *cli.StringFlag {
	return &cli.StringFlag{Name: "out", Aliases: aliases, TakesFile: true, Usage: usage}
}

// gpuFlag is --gpu, a spec row of the datasheet (h200, h100-sxm, ...).
func gpuFlag(value, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: "gpu", Value: value, Usage: usage}
}

// reserveFlag is --reserve, the fraction of GPU memory kept free (predict, plan, sweep).
func reserveFlag() cli.Flag {
	return fractionFlag("reserve", 0.1, "[0, 1)", "fraction of GPU memory kept free (activations, allocator) when asking whether a batch fits: in [0, 1), e.g. 0.1 or 10%")
}

// batchFlag and contextFlag are the --batch and --context lists.
func batchFlag(value, usage string) *cli.StringFlag {
	return listFlag(&cli.StringFlag{Name: "batch", Value: value, Usage: usage})
}

func contextFlag(value, usage string) *cli.StringFlag {
	return listFlag(&cli.StringFlag{Name: "context", Value: value, Usage: usage})
}

// seedFlag is --seed, the seed of the input hash; derived says what the command derives from it.
func seedFlag(derived string) cli.Flag {
	usage := "seed of the input hash"
	if derived != "" {
		usage += " (" + derived + ")"
	}
	return &cli.Uint64Flag{Name: "seed", Value: 1, Usage: usage}
}

// ---- environment variables --------------------------------------------------------------------

// envScope is the part of a flag's environment variable that names whose meaning it has: ""
// for a flag that means the same in every command (DECODEBENCH_MODEL), the command for one
// whose meaning is the command's own (--out: DECODEBENCH_SWEEP_OUT, DECODEBENCH_BENCH_OUT; fleet's
// thresholds and files: DECODEBENCH_FLEET_*; validate's old --json FILE), the kernel for
// --variant (DECODEBENCH_LINEAR_VARIANT, DECODEBENCH_ATTENTION_VARIANT: each names its kernels).
func envScope(command, leaf, flag string) string {
	switch {
	case flag == "out":
		return command
	case flag == "variant":
		return leaf
	case command == "fleet" && flag != "expect-nodes" && flag != "hostfile":
		return command
	case command == "validate" && flag == "json":
		return command
	}
	return ""
}

// envVar is the environment variable of a flag: DECODEBENCH_[SCOPE_]FLAG.
func envVar(scope, flag string) string {
	name := flag
	if scope != "" {
		name = scope + "_" + flag
	}
	return "DECODEBENCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// formerEnvVars are environment variables renamed so that each has one meaning; they still
// work, with a notice, where the new name is not set (parseLine). DECODEBENCH_OUT was predict's
// output directory and sweep's run directory.
var formerEnvVars = map[string]string{
	"DECODEBENCH_PREDICT_OUT":    "DECODEBENCH_OUT",
	"DECODEBENCH_SWEEP_OUT":      "DECODEBENCH_OUT",
	"DECODEBENCH_LINEAR_VARIANT": "DECODEBENCH_VARIANT",
}

// attachEnvVars gives every flag of cmd and its subcommands its environment variable (envVar).
// No flag sets its own.
func attachEnvVars(cmd *cli.Command, command string) {
	for _, f := range cmd.Flags {
		vars := []string{envVar(envScope(command, cmd.Name, f.Names()[0]), f.Names()[0])}
		switch v := f.(type) {
		case *cli.StringFlag:
			v.EnvVars = vars
		case *cli.IntFlag:
			v.EnvVars = vars
		case *cli.Uint64Flag:
			v.EnvVars = vars
		case *cli.Float64Flag:
			v.EnvVars = vars
		case *cli.BoolFlag:
			v.EnvVars = vars
		case *cli.GenericFlag:
			v.EnvVars = vars
		default:
			panic(fmt.Sprintf("attachEnvVars: --%s is a %T, which the registry does not know", f.Names()[0], f))
		}
	}
	for _, sub := range cmd.Subcommands {
		attachEnvVars(sub, command)
	}
}

// envName is the flag's environment variable.
func envName(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok && len(d.GetEnvVars()) > 0 {
		return d.GetEnvVars()[0]
	}
	return envVar("", f.Names()[0])
}
