package sweep

import "fmt"

// MaxStepCalls is the most kernel calls one decode step may make: every real model makes a
// few thousand (DeepSeek-V3's 61 layers about 900), and a config of 1e7 layers would build a
// program of tens of millions of calls before any memory check. sweep, step and step --plan
// hold every configuration to it (StepCallsWithin) before they build anything.
const MaxStepCalls = 1_000_000

// StepCallsWithin says why cfg's step makes more than MaxStepCalls kernel calls ("" if not).
func StepCallsWithin(cfg Config) string {
	calls := 0.0
	for _, k := range cfg.Model.Kernels(cfg.Batch, cfg.Context) {
		calls += k.Repeat
	}
	if calls <= MaxStepCalls {
		return ""
	}
	return fmt.Sprintf("a step of %.4g kernel calls (%d layers): more than the %d a step may make", calls, cfg.Model.Layers, MaxStepCalls)
}

// StepFits reports whether the configuration can run on the runner's card (at most
// MaxStepCalls calls, its kernels exist and its weights and KV caches fit in MemoryBytes with
// ReserveFraction kept free) and, when not, why. Run asks the same of every configuration
// after the probes; the command line asks before them, to refuse a sweep of which nothing
// would run.
func (r *Runner) StepFits(cfg Config) (bool, string) {
	return (&state{Runner: r}).stepFits(cfg)
}
