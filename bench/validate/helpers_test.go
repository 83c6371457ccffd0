package validate

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// synthRunner "measures" a step at chosen rates: memory-bound kernels at a fraction of readBW,
// the tensor probe at tensorRate. failSteps makes the named steps fail verification; skipSteps
// makes them skipped, as a backend that cannot run their shape does.
type synthRunner struct {
	readBW     float64 // B/s of the read probe
	linearEff  float64 // linear layers' B/s as a fraction of readBW
	attnEff    float64 // attention's B/s as a fraction of readBW
	tensorRate float64 // FLOP/s of the mma probe
	emulated   bool
	failSteps  map[string]bool
	skipSteps  map[string]bool
	onRun      func(Step) // called as the step "runs"
}

// goodH100 runs every gate comfortably above its default threshold on an H100 SXM.
func goodH100() synthRunner {
	return synthRunner{readBW: 0.92 * 3.35e12, linearEff: 0.90, attnEff: 0.85, tensorRate: 0.80 * 989.4e12}
}

func stepCost(s Step) (bytes, flops float64) {
	sp := s.Spec
	switch {
	case sp.Probe != nil && sp.Probe.Kind == cgo.ProbeRead:
		b := float64(sp.Probe.Bytes)
		if b == 0 {
			b = 1 << 31
		}
		return b, 0
	case sp.Probe != nil:
		return 0, 1e12
	}
	return sp.Bytes(), sp.FLOPs()
}

func (r synthRunner) Run(s Step, cfg timing.Config) measure.Outcome {
	if r.onRun != nil {
		r.onRun(s)
	}
	bytes, flops := stepCost(s)
	var seconds float64
	switch {
	case s.Spec.Probe != nil && s.Spec.Probe.Kind == cgo.ProbeMMABF16:
		seconds = flops / r.tensorRate
	case s.Spec.Probe != nil:
		seconds = bytes / r.readBW
	case s.Spec.Linear != nil:
		seconds = bytes / (r.readBW * r.linearEff)
	default:
		seconds = bytes / (r.readBW * r.attnEff)
	}
	o := measure.Outcome{
		Spec: s.Spec, Kernel: s.Spec.Kind, Status: measure.StatusOK, Bytes: bytes, FLOPs: flops,
		Stats:               timing.Stats{Median: seconds, Min: seconds, Samples: make([]float64, 10), Converged: true},
		AchievedBytesPerSec: bytes / seconds, AchievedFLOPsPerSec: flops / seconds,
		Verification: measure.Verification{Passed: true, RelError: 1e-3, Tolerance: 2e-2, Checked: 64},
		Emulated:     r.emulated,
	}
	if r.failSteps[s.Name] {
		o.Status, o.Reason = measure.StatusFailed, "verification failed"
		o.Verification.Passed, o.Verification.RelError = false, 0.7
		o.Stats, o.AchievedBytesPerSec, o.AchievedFLOPsPerSec = timing.Stats{}, 0, 0
	}
	if r.skipSteps[s.Name] {
		o = measure.Outcome{Spec: s.Spec, Kernel: s.Spec.Kind, Status: measure.StatusSkipped, Reason: "not supported here", Emulated: r.emulated}
	}
	return o
}

// runSuite runs a suite's plan through r, as validateCard does.
func runSuite(t *testing.T, s Suite, r Runner) (Plan, map[string]Outcome) {
	t.Helper()
	plan, err := s.Plan()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Outcome{}
	for _, st := range plan.Steps {
		out[st.Name] = newOutcome(st, r.Run(st, s.Timing))
	}
	return plan, out
}

func standard(t *testing.T) Suite {
	t.Helper()
	s, err := StandardSuite()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func gpuRow(t *testing.T, key string) *roofline.GPU {
	t.Helper()
	g, err := roofline.LookupGPU(key)
	if err != nil {
		t.Fatal(err)
	}
	return &g
}

// find returns the check with this id.
func find(t *testing.T, checks []Check, id string) Check {
	t.Helper()
	for _, c := range checks {
		if c.ID == id {
			return c
		}
	}
	var ids []string
	for _, c := range checks {
		ids = append(ids, c.ID)
	}
	t.Fatalf("no check %q among %s", id, strings.Join(ids, ", "))
	return Check{}
}

// expect asserts a check's verdict and that its message holds every fragment.
func expect(t *testing.T, c Check, v Verdict, fragments ...string) {
	t.Helper()
	if c.Verdict != v {
		t.Errorf("%s: verdict %s, want %s (%s)", c.ID, c.Verdict, v, c.Message)
	}
	for _, f := range fragments {
		if !strings.Contains(c.Message, f) {
			t.Errorf("%s: message %q lacks %q", c.ID, c.Message, f)
		}
	}
}
