package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
)

// checkAnythingFits refuses a sweep of which no configuration would run on this backend,
// before the probes spend their time: it names why the first one cannot and the presets that
// would fit. pending are the configurations the run has yet to measure (none: nothing to say).
func checkAnythingFits(r *sweep.Runner, pending []sweep.Config, emulated bool) error {
	if len(pending) == 0 {
		return nil
	}
	var first string
	for _, cfg := range pending {
		ok, why := r.StepFits(cfg)
		if ok {
			return nil
		}
		if first == "" {
			first = fmt.Sprintf("%s batch %d context %d: %s", cfg.Model.Name, cfg.Batch, cfg.Context, why)
		}
	}
	where := "this card"
	if emulated {
		where = "the CPU emulator"
	}
	msg := fmt.Sprintf("nothing in this sweep can run on %s (%d configuration(s)); the first: %s", where, len(pending), first)
	if s := smallerPresets(r, pending, emulated); s != "" {
		msg += "; " + s
	}
	return usageError("%s", msg)
}

// smallerPresets suggests presets whose smallest configuration of the sweep fits, the
// largest first; on the emulator only the tiny one, the others taking minutes a kernel.
func smallerPresets(r *sweep.Runner, pending []sweep.Config, emulated bool) string {
	batch := slices.MinFunc(pending, func(a, b sweep.Config) int { return a.Batch - b.Batch }).Batch
	ctx := slices.MinFunc(pending, func(a, b sweep.Config) int { return a.Context - b.Context }).Context
	if emulated {
		return fmt.Sprintf("try a smaller model: --model tiny-emu (a toy that the emulator runs in seconds) with --batch %d --context %d", batch, ctx)
	}
	var fits []model.Shape
	for _, s := range model.Presets() {
		if ok, _ := r.StepFits(sweep.Config{Model: s, Batch: batch, Context: ctx}); ok && s.Name != "tiny-emu" {
			fits = append(fits, s)
		}
	}
	if len(fits) == 0 {
		return ""
	}
	slices.SortFunc(fits, func(a, b model.Shape) int {
		return int(b.WeightBytesTotal()/1e6) - int(a.WeightBytesTotal()/1e6)
	})
	var names []string
	for _, s := range fits[:min(3, len(fits))] {
		names = append(names, "--model "+strings.ToLower(s.Name))
	}
	return fmt.Sprintf("a smaller model fits at batch %d context %d: %s", batch, ctx, strings.Join(names, ", "))
}

// pendingConfigs are the configurations of configs that prior has no record of (or a failed
// one, with retry), as Runner.Run counts them.
func pendingConfigs(configs []sweep.Config, prior sweep.Prior, retry bool) []sweep.Config {
	done := map[string]bool{}
	for _, rec := range prior.Records {
		if !(retry && rec.Status == measure.StatusFailed) {
			done[rec.Key] = true
		}
	}
	var out []sweep.Config
	for _, cfg := range configs {
		if !done[cfg.Key()] {
			out = append(out, cfg)
		}
	}
	return out
}
