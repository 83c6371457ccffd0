package report

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"

	"github.com/decodebench/decodebench/bench/timing"
)

// The confidence interval of a ratio of medians is a percentile bootstrap over the kept
// samples. A rank test (Mann-Whitney, with its Hodges-Lehmann interval) gives an interval for
// one kernel's shift, but a step's time is a sum over kernels of calls x median, each kernel
// with its own samples; the bootstrap gives that sum's interval by resampling every kernel and
// adding up, and the same code serves the per-kernel ratios. gonum/stat has neither a bootstrap
// nor a Hodges-Lehmann interval, so the resampling is written here, over math/rand/v2's PCG
// with a fixed seed (a comparison prints the same interval every time), and the percentiles
// are timing.Quantile's, the type-7 quantile every median of decodebench uses.

// Verdicts of a comparison, B against A.
const (
	VerdictSame   = "SAME"   // the whole interval lies within the threshold of 1
	VerdictFaster = "FASTER" // the whole interval lies above 1 + threshold
	VerdictSlower = "SLOWER" // the whole interval lies below 1 - threshold
	VerdictUnsure = "UNSURE" // the interval holds 1 - threshold or 1 + threshold (or there is none)
)

// Gate is how a comparison judges each ratio B / A of tokens/s.
type Gate struct {
	Threshold  float64 // fraction: 0.03 means a ratio within [0.97, 1.03] is the same speed
	Confidence float64 // of the interval, e.g. 0.95
	Resamples  int     // bootstrap resamples of each kernel's samples
	Seed       uint64
}

// DefaultGate: 3%, a 95% interval, 2000 resamples (each 2.5% tail then holds 50 of them, the
// usual count for a percentile interval). A kernel of 2500 samples takes about 12 ms of CPU to
// resample (measured on a shared 2-core box, 2026-12-01); kernels are resampled in parallel.
var DefaultGate = Gate{Threshold: 0.03, Confidence: 0.95, Resamples: 2000, Seed: 0x6465636f6465}

// Validate refuses a gate that cannot judge.
func (g Gate) Validate() error {
	switch {
	case !(g.Threshold > 0 && g.Threshold < 1):
		return fmt.Errorf("threshold %g: must be a fraction in (0, 1), such as 0.03 or 3%%", g.Threshold)
	case !(g.Confidence >= 0.5 && g.Confidence < 1):
		return fmt.Errorf("confidence %g: must be in [0.5, 1), such as 0.95 or 95%%", g.Confidence)
	case g.Resamples < 100:
		return fmt.Errorf("resamples %d: must be at least 100", g.Resamples)
	}
	return nil
}

// Interval is a confidence interval of a ratio B / A of tokens/s (above 1: B is faster).
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Verdict places iv against the threshold band [1 - t, 1 + t]: SLOWER when the whole interval
// is below the band, FASTER when the whole of it is above, SAME when the whole of it is inside,
// and UNSURE otherwise, that is when the interval holds one of the band's edges: the samples
// cannot tell whether B differs by more than the threshold. No interval (ok false) is UNSURE.
func (g Gate) Verdict(iv Interval, ok bool) string {
	lo, hi := 1-g.Threshold, 1+g.Threshold
	switch {
	case !ok || !(iv.Lo <= iv.Hi):
		return VerdictUnsure
	case iv.Hi < lo:
		return VerdictSlower
	case iv.Lo > hi:
		return VerdictFaster
	case iv.Lo >= lo && iv.Hi <= hi:
		return VerdictSame
	}
	return VerdictUnsure
}

// bootstrapStream is the random stream of one measurement's resamples.
func (g Gate) bootstrapStream(key string, side uint64) *indexStream {
	h := fnv.New64a()
	h.Write([]byte(key))
	return &indexStream{pcg: rand.NewPCG(g.Seed, h.Sum64()^side)}
}

// indexStream draws indices in [0, n) two per 64-bit PCG output by multiply-shift (Lemire):
// about four times faster than rand.Rand.IntN, which a resample of thousands of samples, times
// thousands of resamples, times every kernel of a sweep, needs. Its bias, under n / 2^32, is
// far below the bootstrap's own noise.
type indexStream struct {
	pcg  *rand.PCG
	buf  uint64
	have bool
}

func (s *indexStream) next(n int) int {
	if s.have {
		s.have = false
		return int((s.buf >> 32) * uint64(n) >> 32)
	}
	s.buf, s.have = s.pcg.Uint64(), true
	return int((s.buf & 0xffffffff) * uint64(n) >> 32)
}

// percentiles is the central g.Confidence interval of values (sorted in place).
func (g Gate) percentiles(values []float64) Interval {
	slices.Sort(values)
	tail := (1 - g.Confidence) / 2
	return Interval{Lo: timing.Quantile(values, tail), Hi: timing.Quantile(values, 1-tail)}
}

// bootstrapMedians are g.Resamples medians of resamples (with replacement, of the same size)
// of samples, in the order drawn. The stream is seeded by the gate's seed, the measurement's
// key and the side of the comparison, so that it does not depend on what else is compared,
// and a run compared with itself still draws two independent sets.
func (g Gate) bootstrapMedians(samples []float64, key string, side uint64) []float64 {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	n := len(sorted)
	rng := g.bootstrapStream(key, side)
	// The type-7 median of n values sits at rank (n-1)/2: between ranks lo and lo+1 for even n.
	pos := 0.5 * float64(n-1)
	lo := int(math.Floor(pos))
	frac := pos - float64(lo)
	counts := make([]int32, n)
	out := make([]float64, g.Resamples)
	for r := range out {
		clear(counts)
		for range n {
			counts[rng.next(n)]++
		}
		// A resample of indices into the sorted samples is sorted by index: walk the counts to
		// the values at ranks lo and lo+1.
		below, atLo, atHi := 0, -1, -1
		for i, c := range counts {
			below += int(c)
			if atLo < 0 && below > lo {
				atLo = i
			}
			if below > lo+1 || (frac == 0 && atLo >= 0) {
				atHi = i
				break
			}
		}
		if atHi < 0 {
			atHi = atLo
		}
		out[r] = sorted[atLo] + frac*(sorted[atHi]-sorted[atLo])
	}
	return out
}

// judge gives every pair and kernel pair its interval and verdict.
func (c *Comparison) judge(ra, rb *resampler) {
	var entriesA, entriesB []sweep.KernelEntry
	for _, p := range c.Pairs {
		entriesA, entriesB = append(entriesA, p.A.Kernels...), append(entriesB, p.B.Kernels...)
	}
	ra.prefetch(entriesA)
	rb.prefetch(entriesB)
	kernelIndex := map[string]int{}
	for i := range c.Pairs {
		p := &c.Pairs[i]
		stepA, whyA := ra.step(p.A)
		stepB, whyB := rb.step(p.B)
		switch {
		case whyA != "":
			p.NoInterval = "A: " + whyA
		case whyB != "":
			p.NoInterval = "B: " + whyB
		default:
			p.Interval, p.HasInterval = c.Gate.ratioInterval(stepA, stepB)
		}
		p.Verdict = c.Gate.Verdict(p.Interval, p.HasInterval)

		if len(p.A.Kernels) != len(p.B.Kernels) {
			continue // different step structures: no kernel is the counterpart of another
		}
		for j, ka := range p.A.Kernels {
			kb := p.B.Kernels[j]
			if ka.Name != kb.Name || ka.Status != measure.StatusOK || kb.Status != measure.StatusOK {
				continue
			}
			id := ka.Key + "\x00" + kb.Key
			if at, ok := kernelIndex[id]; ok {
				k := &c.Kernels[at]
				if !slices.Contains(k.Names, ka.Name) {
					k.Names = append(k.Names, ka.Name)
				}
				k.Configurations++
				continue
			}
			k := KernelPair{Names: []string{ka.Name}, Label: ra.label(ka), KeyA: ka.Key, KeyB: kb.Key,
				MedianA: ka.MedianSeconds, MedianB: kb.MedianSeconds, SamplesA: ka.Samples, SamplesB: kb.Samples, Configurations: 1}
			medA, whyA := ra.medians(ka)
			medB, whyB := rb.medians(kb)
			switch {
			case whyA != "":
				k.NoInterval = "A: " + whyA
			case whyB != "":
				k.NoInterval = "B: " + whyB
			default:
				k.Interval, k.HasInterval = c.Gate.ratioInterval(medA, medB)
			}
			k.Verdict = c.Gate.Verdict(k.Interval, k.HasInterval)
			kernelIndex[id] = len(c.Kernels)
			c.Kernels = append(c.Kernels, k)
		}
	}
}

// ratioInterval is the interval of B's speed over A's from resampled times of each: the ratio
// of A's time to B's, resample by resample.
func (g Gate) ratioInterval(secondsA, secondsB []float64) (Interval, bool) {
	ratios := make([]float64, len(secondsA))
	for i := range ratios {
		ratios[i] = secondsA[i] / secondsB[i]
	}
	iv := g.percentiles(ratios)
	return iv, iv.Lo > 0 && iv.Hi < math.Inf(1)
}

// resampler draws, once per measurement, the bootstrap medians of one run's kernels.
type resampler struct {
	gate     Gate
	side     uint64
	measured map[string][]sweep.Measurement // by key, in file order
	drawn    map[string][]float64
}

func newResampler(g Gate, kernels []sweep.Measurement, side uint64) *resampler {
	r := &resampler{gate: g, side: side, measured: map[string][]sweep.Measurement{}, drawn: map[string][]float64{}}
	for _, m := range kernels {
		r.measured[m.Key] = append(r.measured[m.Key], m)
	}
	return r
}

// measurement is the one a record's kernel entry was composed from: of its key, the ok one
// whose median is the entry's (a resume may have measured a key again). None: the record and
// kernels.jsonl disagree (one of them was edited or damaged), and its samples say nothing of it.
func (r *resampler) measurement(e sweep.KernelEntry) (sweep.Measurement, bool) {
	ms := r.measured[e.Key]
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].OK() && ms[i].Stats.Median == e.MedianSeconds {
			return ms[i], true
		}
	}
	return sweep.Measurement{}, false
}

// badSamples says why samples cannot be resampled ("" if they can): a time that is not a
// positive, finite number of seconds, or a median that is not theirs.
func badSamples(m sweep.Measurement) string {
	for _, s := range m.Stats.Samples {
		if !(s > 0) || math.IsInf(s, 1) {
			return fmt.Sprintf("%s kept a sample of %g s: a time must be a positive number", m.Key, s)
		}
	}
	return ""
}

func (r *resampler) label(e sweep.KernelEntry) string {
	if m, ok := r.measurement(e); ok && m.Spec.Kind != "" {
		return m.Spec.Label()
	}
	return e.Key
}

// prefetch draws the bootstrap medians of every measurement of entries, one goroutine per core:
// each measurement has its own seeded stream, so the order they are drawn in changes nothing.
func (r *resampler) prefetch(entries []sweep.KernelEntry) {
	var todo []sweep.KernelEntry
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Status == measure.StatusOK && !seen[e.Key] {
			seen[e.Key] = true
			todo = append(todo, e)
		}
	}
	drawn := make([][]float64, len(todo))
	jobs := make(chan int, len(todo))
	for i := range todo {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if m, ok := r.measurement(todo[i]); ok && len(m.Stats.Samples) >= 2 && badSamples(m) == "" {
					drawn[i] = r.gate.bootstrapMedians(m.Stats.Samples, todo[i].Key, r.side)
				}
			}
		}()
	}
	wg.Wait()
	for i, e := range todo {
		if drawn[i] != nil {
			r.drawn[e.Key] = drawn[i]
		}
	}
}

// medians are the bootstrap medians of e's measurement, or why there are none.
func (r *resampler) medians(e sweep.KernelEntry) ([]float64, string) {
	if d, ok := r.drawn[e.Key]; ok {
		return d, ""
	}
	m, ok := r.measurement(e)
	switch {
	case !ok && len(r.measured[e.Key]) > 0:
		return nil, fmt.Sprintf("the record's median of %.4g s for %s is in no ok measurement of %s: the two files disagree", e.MedianSeconds, e.Key, sweep.KernelsFile)
	case !ok:
		return nil, fmt.Sprintf("no measurement of %s in %s", e.Key, sweep.KernelsFile)
	case badSamples(m) != "":
		return nil, badSamples(m)
	case len(m.Stats.Samples) < 2:
		return nil, fmt.Sprintf("%s kept %d sample(s)", e.Key, len(m.Stats.Samples))
	}
	d := r.gate.bootstrapMedians(m.Stats.Samples, e.Key, r.side)
	r.drawn[e.Key] = d
	return d, ""
}

// step is the resampled step time of an ok record: its small ops (bounded, not measured: the
// same in every resample) plus each kernel's calls x its resampled median. Kernels of one
// measurement (two layers of one shape) share its resamples.
func (r *resampler) step(rec sweep.Record) ([]float64, string) {
	step := make([]float64, r.gate.Resamples)
	for i := range step {
		step[i] = rec.SmallOpsSeconds
	}
	for _, e := range rec.Kernels {
		med, why := r.medians(e)
		if why != "" {
			return nil, why
		}
		for i := range step {
			step[i] += e.Repeat * med[i]
		}
	}
	return step, ""
}
