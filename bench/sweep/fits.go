package sweep

// StepFits reports whether the configuration can run on the runner's card (its kernels exist
// and its weights and KV caches fit in MemoryBytes with ReserveFraction kept free) and, when
// not, why. Run asks the same of every configuration after the probes; the command line asks
// before them, to refuse a sweep of which nothing would run.
func (r *Runner) StepFits(cfg Config) (bool, string) {
	return (&state{Runner: r}).stepFits(cfg)
}
