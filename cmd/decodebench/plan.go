package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/plan"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/units"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "capacity and cost: the largest batch that meets a per-request streaming target, the GPUs a traffic needs there and the cost per million output tokens",
		UsageText: "decodebench plan [DIR] --min-request-rate TOK/S [--context S] [--model NAME] [--requests-per-s R --output-tokens N | --tokens-per-s T]\n" +
			"                 [--headroom F] [--price-per-gpu-hour P] [--format table|md|json] [--out DIR]\n" +
			"   DIR: a run directory of decodebench sweep (measured); without it, --model (or --model-config) and --gpu (predicted)",
		Description: "Reads per-request and per-server tokens/s by batch at one context, measured (a sweep's records; between\n" +
			"measured batches interpolated in log batch and log rate, never beyond them) or predicted (the roofline bound\n" +
			"of a spec row, as predict gives it), and finds the largest batch whose per-request rate meets --min-request-rate.\n" +
			"With a traffic: servers = ceil(traffic / (per-server x (1 - headroom))), GPUs = servers x tp; with a price:\n" +
			"cost per million output tokens = GPUs x price / (traffic x 3600) x 1e6. The batches beside it are shown too.",
		Flags: append(modelFlags(),
			gpuFlag("", "predicted: a GPU spec row (h200, h100-sxm, ...), or auto: the first GPU NVML sees, else h200 (default auto)"),
			reserveFlag(),
			&cli.StringFlag{Name: "context", Usage: "context length in tokens (k = 1024), e.g. 8k; with DIR optional when the run measured one context"},
			&cli.StringFlag{Name: "min-request-rate", Usage: "the streaming target: tokens/s every request must get, e.g. 20"},
			&cli.StringFlag{Name: "requests-per-s", Usage: "traffic: requests per second (with --output-tokens)"},
			&cli.StringFlag{Name: "output-tokens", Usage: "traffic: output tokens per request (with --requests-per-s)"},
			&cli.StringFlag{Name: "tokens-per-s", Usage: "traffic: output tokens per second, e.g. 5000 or 5k (instead of --requests-per-s and --output-tokens)"},
			&cli.StringFlag{Name: "headroom", Value: "0", Usage: "fraction of each server's rate kept spare, in [0, 1): 0.2 or 20% (servers run at 80%)"},
			&cli.StringFlag{Name: "price-per-gpu-hour", Usage: "price of one GPU for an hour (any currency): gives the cost per million output tokens"},
			formatFlag(plan.Formats...),
			outFlag("also write plan.json, plan.md and the frontier chart (PNG and SVG) into this directory"),
		),
		Action: planAction,
	}
}

// planNumber reads a positive number flag; absent is 0. what says what is accepted.
func planNumber(c *cli.Context, flag, what string) (float64, error) {
	if !c.IsSet(flag) {
		return 0, nil
	}
	s := c.String(flag)
	v, err := units.ParseQuantity(s)
	switch {
	case err != nil:
		return 0, usageError("--%s %s: %v (%s)", flag, s, err, what)
	case !(v > 0) || math.IsInf(v, 1):
		return 0, usageError("--%s %s: must be more than 0: give %s", flag, s, what)
	}
	return v, nil
}

// planRequest reads the flags of what a plan is asked; every error names its flag.
func planRequest(c *cli.Context) (plan.Request, error) {
	var r plan.Request
	var err error
	if !c.IsSet("min-request-rate") {
		return r, usageError("--min-request-rate is required: the tokens/s each request must stream at, e.g. --min-request-rate 20")
	}
	if r.MinRequestRate, err = planNumber(c, "min-request-rate", "tokens/s per request, such as 20"); err != nil {
		return r, err
	}
	if r.RequestsPerSec, err = planNumber(c, "requests-per-s", "requests per second, such as 10"); err != nil {
		return r, err
	}
	if r.OutputTokens, err = planNumber(c, "output-tokens", "output tokens per request, such as 500"); err != nil {
		return r, err
	}
	if r.TokensPerSec, err = planNumber(c, "tokens-per-s", "output tokens per second, such as 5000 or 5k"); err != nil {
		return r, err
	}
	if r.PricePerGPUHour, err = planNumber(c, "price-per-gpu-hour", "the price of one GPU-hour, such as 2.50"); err != nil {
		return r, err
	}
	switch {
	case r.TokensPerSec > 0 && (r.RequestsPerSec > 0 || r.OutputTokens > 0):
		return r, usageError("--tokens-per-s and --requests-per-s/--output-tokens both give the traffic: give one of them")
	case r.RequestsPerSec > 0 && r.OutputTokens == 0:
		return r, usageError("--requests-per-s needs --output-tokens (output tokens per request), or give --tokens-per-s instead")
	case r.OutputTokens > 0 && r.RequestsPerSec == 0:
		return r, usageError("--output-tokens needs --requests-per-s (requests per second), or give --tokens-per-s instead")
	}
	h := c.String("headroom")
	if r.Headroom, err = units.ParseFraction(h); err != nil || !(r.Headroom >= 0 && r.Headroom < 1) {
		return r, usageError("--headroom %s: give the fraction of each server's rate kept spare, in [0, 1), such as 0.2 or 20%%", h)
	}
	if d, ok := r.Demand(); ok && !(d <= plan.MaxTokensPerSec) {
		given := "--tokens-per-s " + c.String("tokens-per-s")
		if r.TokensPerSec == 0 {
			given = fmt.Sprintf("--requests-per-s %s x --output-tokens %s = %g tokens/s", c.String("requests-per-s"), c.String("output-tokens"), d)
		}
		return r, usageError("%s: more than the %g output tokens/s a plan takes", given, float64(plan.MaxTokensPerSec))
	}
	if err := r.Validate(); err != nil {
		return r, usageError("%v", err)
	}
	return r, nil
}

// planContext reads --context: one length, 0 when absent.
func planContext(c *cli.Context) (int, error) {
	if !c.IsSet("context") {
		return 0, nil
	}
	values, err := axes.ParseIntList(c.String("context"))
	switch {
	case err != nil:
		return 0, usageError("--context: %v", err)
	case len(values) != 1:
		return 0, usageError("--context %q: a plan is for one context length, such as 8k (got %d)", c.String("context"), len(values))
	}
	return values[0], nil
}

func planAction(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageError("plan takes at most one run directory (got %d arguments: %s)", c.NArg(), strings.Join(c.Args().Slice(), " "))
	}
	format, err := parseFormat(c)
	if err != nil {
		return err
	}
	req, err := planRequest(c)
	if err != nil {
		return err
	}
	context, err := planContext(c)
	if err != nil {
		return err
	}
	out := c.String("out")
	if out != "" {
		if err := checkOutDir(out); err != nil {
			return err
		}
	}
	var f plan.Frontier
	var notes []string
	if dir := c.Args().First(); dir != "" {
		for _, flag := range []string{"model-config", "tp", "weight-dtype", "group-size", "kv-dtype", "gpu", "reserve"} {
			if c.IsSet(flag) {
				return usageError("--%s describes a prediction, but %s is a measured run: give one or the other (with DIR, --model picks one of its models)", flag, dir)
			}
		}
		if !isRunDir(dir) {
			return usageError("%s is not a run directory of decodebench sweep (no run.json)", dir)
		}
		run, err := sweep.Load(dir)
		if err != nil {
			return usageError("%v", err)
		}
		for _, why := range run.Implausible {
			fmt.Fprintf(c.App.ErrWriter, "decodebench: %s: left out, not a speed: %s\n", dir, why)
		}
		if f, notes, err = plan.Measured(dir, run.Records, run.Info.Card.Name, c.String("model"), context); err != nil {
			return usageError("%v", err)
		}
	} else {
		if context == 0 {
			return usageError("--context is required for a prediction: the context length to plan at, such as 8k")
		}
		shape, err := resolveModel(c)
		if err != nil {
			return err
		}
		reserve, err := parseReserve(c)
		if err != nil {
			return err
		}
		gpuName := c.String("gpu")
		if gpuName == "" {
			gpuName = "auto"
		}
		gpu, note, err := resolveGPU(gpuName)
		if err != nil {
			return err
		}
		if note != "" {
			notes = append(notes, note)
		}
		if f, err = plan.Predicted(shape, gpu, context, reserve); err != nil {
			return usageError("%v", err)
		}
	}
	p, err := plan.Make(f, req)
	if unreachable := (plan.UnreachableError{}); errors.As(err, &unreachable) {
		return usageError("--min-request-rate %s: %v", c.String("min-request-rate"), err)
	} else if err != nil {
		return usageError("%v", err)
	}
	p.Notes = notes
	var text bytes.Buffer
	if err := plan.Write(&text, p, format); err != nil {
		return failure("%v", err)
	}
	if out != "" {
		if err := writePlanFiles(p, out); err != nil {
			return failure("writing %s: %v", out, err)
		}
	}
	c.App.Writer.Write(text.Bytes())
	if out != "" {
		where := c.App.Writer
		if format == plan.FormatJSON {
			where = c.App.ErrWriter
		}
		fmt.Fprintf(where, "wrote %s, %s and %s.png/.svg to %s\n", plan.JSONFile, plan.MarkdownFile, plan.ChartBase, out)
	}
	return nil
}

func writePlanFiles(p plan.Plan, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, format := range map[string]string{plan.JSONFile: plan.FormatJSON, plan.MarkdownFile: plan.FormatMarkdown} {
		var b bytes.Buffer
		if err := plan.Write(&b, p, format); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, name), b.Bytes()); err != nil {
			return err
		}
	}
	_, err := plan.Chart(p, dir)
	return err
}
