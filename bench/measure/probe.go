package measure

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// ProbeSpec is one bandwidth or compute probe: a measured ceiling of the roofline.
type ProbeSpec struct {
	Kind cgo.ProbeKind `json:"probe"`
	// Memory probes: bytes of each buffer, a multiple of 16; 0 = auto: max(32x L2, 1 GiB),
	// within half the free memory across the probe's buffers (1 MiB under the emulator).
	Bytes uint64 `json:"bytes,omitempty"`
	// Compute probes: loop trips per thread; 0 = auto (DefaultComputeIterations, 2 under the
	// emulator).
	Iterations int `json:"iterations,omitempty"`
	// Launch shape; 0 lets the kernel choose (enough bytes in flight, or every SM full).
	Blocks  int `json:"blocks,omitempty"`
	Threads int `json:"threads,omitempty"`
}

const (
	// DefaultComputeIterations makes one compute-probe launch last about a millisecond on an
	// H200: a full card of threads (132 SMs x 2048) does 256 FMA FLOPs or 1/8 of a warp's
	// 131k mma FLOPs per thread per trip, about 1 µs per trip at 67 and 990 TFLOP/s.
	DefaultComputeIterations = 1024
	// Under the emulator a probe only has to run: small sizes keep it to milliseconds.
	emuProbeBytes      = 1 << 20
	emuProbeIterations = 2
	// Compute probes are verified exactly at these iteration counts with the timed launch
	// shape (ref.MMAProbeResult is exact below 8 trips), then timed at the full count.
	verifyFMAIterations = 2
	verifyMMAIterations = 1
	probeTriadScalar    = 3 // not a power of two: the one rounding of fmaf shows
)

// probeBuffers is how many buffers of Bytes a memory probe uses.
func probeBuffers(k cgo.ProbeKind) uint64 {
	switch k {
	case cgo.ProbeCopy:
		return 2
	case cgo.ProbeTriad:
		return 3
	}
	return 1
}

// autoProbeBytes is the size of each buffer of a memory probe when the spec leaves it 0:
// 32x L2 and at least 1 GiB, so that L2 holds under 3% of what one call streams, but all the
// probe's buffers within half the free memory.
func autoProbeBytes(k cgo.ProbeKind, info deviceInfo) uint64 {
	if info.emulated {
		return emuProbeBytes
	}
	want := max(32*uint64(max(info.props.L2Bytes, 0)), 1<<30)
	limit := info.props.MemFreeBytes / 2 / probeBuffers(k)
	return min(want, limit) &^ (1<<20 - 1)
}

// Probe verifies, then times, one probe. Memory probes stream buffers far larger than L2, so
// one copy is enough; compute probes keep everything in registers.
func Probe(dev *cgo.Device, s ProbeSpec, o Options) Outcome {
	out, _ := probe(dev, s, o)
	return out
}

func probe(dev *cgo.Device, s ProbeSpec, o Options) (Outcome, Check) {
	out, c := probeRun(dev, s, o)
	out.Spec = s.Spec()
	return out, c
}

func probeRun(dev *cgo.Device, s ProbeSpec, o Options) (Outcome, Check) {
	kernel := "probe:" + s.Kind.String()
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return failed(kernel, "options: %v", err), noCheck
	}
	switch {
	case s.Kind < cgo.ProbeRead || s.Kind > cgo.ProbeMMABF16:
		return failed(kernel, "invalid probe kind %d", int32(s.Kind)), noCheck
	case s.Bytes%16 != 0:
		return failed(kernel, "invalid size %d bytes: want a multiple of 16 (the probes move 16-byte vectors)", s.Bytes), noCheck
	case s.Iterations < 0 || s.Blocks < 0 || s.Threads < 0:
		return failed(kernel, "invalid iterations %d, blocks %d or threads %d: want 0 (auto) or more", s.Iterations, s.Blocks, s.Threads), noCheck
	}
	info, err := readDevice(dev)
	if err != nil {
		return failed(kernel, "%v", err), noCheck
	}
	if s.Kind.Memory() {
		return memoryProbe(dev, s, o, info)
	}
	return computeProbe(dev, s, o, info)
}

func memoryProbe(dev *cgo.Device, s ProbeSpec, o Options, info deviceInfo) (Outcome, Check) {
	kernel := "probe:" + s.Kind.String()
	out := Outcome{Kernel: kernel, Emulated: info.emulated}
	bytes := s.Bytes
	if bytes == 0 {
		bytes = autoProbeBytes(s.Kind, info)
	}
	if bytes < 16 {
		return skipped(kernel, "does not fit: too little free memory for the probe's buffers"), noCheck
	}
	words := bytes / 4
	if ok, why := Fits(dev, probeBuffers(s.Kind)*bytes+4); !ok {
		return merge(out, skipped(kernel, "does not fit: %s", why)), noCheck
	}
	bufs := &buffers{dev: dev}
	defer bufs.close()
	seedA, seedB, seedC := o.Seed, ref.Hash64(o.Seed, 1), ref.Hash64(o.Seed, 2)
	p := cgo.ProbeParams{Kind: s.Kind, Words: words, Seed: seedA, Scalar: probeTriadScalar, Blocks: s.Blocks, Threads: s.Threads}
	var a, b, c, result *cgo.Buffer
	var err error
	alloc := func(dst **cgo.Buffer, what string, n uint64) {
		if err == nil {
			*dst, err = bufs.alloc(what, n)
		}
	}
	alloc(&a, "a", bytes)
	switch s.Kind {
	case cgo.ProbeRead:
		alloc(&result, "the result", 4)
	case cgo.ProbeCopy:
		alloc(&b, "b", bytes)
	case cgo.ProbeTriad:
		alloc(&b, "b", bytes)
		alloc(&c, "c", bytes)
	}
	if err != nil {
		return merge(out, fromError(kernel, "allocating", err)), noCheck
	}
	p.A, p.B, p.C, p.Result = ptrOf(a), ptrOf(b), ptrOf(c), ptrOf(result)
	switch s.Kind {
	case cgo.ProbeRead, cgo.ProbeCopy:
		err = a.FillHash(cgo.DTypeU32, words, seedA, 1)
	case cgo.ProbeTriad:
		if err = b.FillHash(cgo.DTypeF32, words, seedB, 1); err == nil {
			err = c.FillHash(cgo.DTypeF32, words, seedC, 1)
		}
	}
	if err != nil {
		return merge(out, failed(kernel, "filling the inputs: %v", err)), noCheck
	}
	plan, err := dev.ProbePlan(p)
	if err != nil {
		return merge(out, fromError(kernel, "planning", err)), noCheck
	}
	out.Bytes, out.FLOPs = plan.BytesMoved, plan.FLOPs
	out.Plan = Plan{BufferBytes: bytes, Words: words, Blocks: plan.BlocksUsed, Threads: plan.ThreadsUsed}
	out.Rotation = describeRotation(1, plan.BytesMoved, float64(info.props.L2Bytes), o.RotateFactor, 0)

	return verifyThenTime(dev, o, out, kernel,
		func() Check {
			written := map[cgo.ProbeKind]*cgo.Buffer{cgo.ProbeRead: result, cgo.ProbeWrite: a, cgo.ProbeCopy: b, cgo.ProbeTriad: a}[s.Kind]
			return verifyMemoryProbe(dev, p, written, seedA, seedB, seedC)
		},
		func(int) error { _, err := dev.Probe(p); return err })
}

func ptrOf(b *cgo.Buffer) uint64 {
	if b == nil {
		return 0
	}
	return b.Ptr
}

// verifyMemoryProbe poisons what the probe writes, runs it once and checks every word it
// wrote exactly (or the read probe's sum). RelError is the fraction of words that differ.
func verifyMemoryProbe(dev *cgo.Device, p cgo.ProbeParams, written *cgo.Buffer, seedA, seedB, seedC uint64) Check {
	c := checkOf(Verification{})
	v := &c.Verification
	if err := written.Memset(0xFF); err != nil {
		v.Reason = fmt.Sprintf("poisoning: %v", err)
		return c
	}
	if _, err := dev.Probe(p); err != nil {
		v.Reason = fmt.Sprintf("running: %v", err)
		return c
	}
	if err := dev.Synchronize(); err != nil {
		v.Reason = fmt.Sprintf("running: %v", err)
		return c
	}
	if p.Kind == cgo.ProbeRead {
		got := make([]uint32, 1)
		if err := cgo.Read(written, got); err != nil {
			v.Reason = fmt.Sprintf("copying the result back: %v", err)
			return c
		}
		want := readSum(seedA, p.Words)
		v.Checked, v.Passed = 1, got[0] == want
		if !v.Passed {
			v.RelError, c.OutOfBound = 1, 1
			v.Reason = fmt.Sprintf("sum of %d words is %#08x, want %#08x", p.Words, got[0], want)
		}
		return c
	}
	got := make([]uint32, p.Words)
	if err := cgo.Read(written, got); err != nil {
		v.Reason = fmt.Sprintf("copying the output back: %v", err)
		return c
	}
	var want func(i uint64) uint32
	switch p.Kind {
	case cgo.ProbeWrite:
		want = func(i uint64) uint32 { return ref.WriteWord(seedA, i) }
	case cgo.ProbeCopy:
		want = func(i uint64) uint32 { return ref.HashWord(seedA, i) }
	default: // triad
		want = func(i uint64) uint32 {
			return math.Float32bits(ref.TriadElement(ref.FillValue(ref.F32, seedB, 1, i), ref.FillValue(ref.F32, seedC, 1, i), p.Scalar))
		}
	}
	return compareWords(got, want)
}

// compareWords checks every word of got against want(i), on every core; OutOfBound counts the
// words that differ.
func compareWords(got []uint32, want func(i uint64) uint32) Check {
	n := uint64(len(got))
	var mismatches []uint64 // per range
	firsts := map[uint64]uint64{}
	type part struct{ lo, count, first uint64 }
	parts := make(chan part, 1024)
	done := make(chan struct{})
	go func() {
		for pt := range parts {
			mismatches = append(mismatches, pt.count)
			if pt.count > 0 {
				firsts[pt.lo] = pt.first
			}
		}
		close(done)
	}()
	parallelRanges(n, func(lo, hi uint64) {
		var count, first uint64
		for i := lo; i < hi; i++ {
			if got[i] != want(i) {
				if count == 0 {
					first = i
				}
				count++
			}
		}
		parts <- part{lo, count, first}
	})
	close(parts)
	<-done
	var total uint64
	for _, m := range mismatches {
		total += m
	}
	c := checkOf(Verification{Checked: len(got), Passed: total == 0})
	c.OutOfBound = int(total)
	v := &c.Verification
	if total > 0 {
		first := n
		for _, f := range firsts {
			first = min(first, f)
		}
		v.RelError = float64(total) / float64(n)
		v.Reason = fmt.Sprintf("%d of %d words differ (first: word %d = %#08x, want %#08x)", total, n, first, got[first], want(first))
	}
	return c
}

// readSum is ref.ReadSum on every core: a wrap-around sum is the same in any order.
func readSum(seed, words uint64) uint32 {
	sums := make(chan uint32, 1024)
	var total uint32
	done := make(chan struct{})
	go func() {
		for s := range sums {
			total += s
		}
		close(done)
	}()
	parallelRanges(words, func(lo, hi uint64) {
		var s uint32
		for i := lo; i < hi; i++ {
			s += ref.HashWord(seed, i)
		}
		sums <- s
	})
	close(sums)
	<-done
	return total
}

func computeProbe(dev *cgo.Device, s ProbeSpec, o Options, info deviceInfo) (Outcome, Check) {
	kernel := "probe:" + s.Kind.String()
	out := Outcome{Kernel: kernel, Emulated: info.emulated}
	iterations := s.Iterations
	if iterations == 0 {
		iterations = DefaultComputeIterations
		if info.emulated {
			iterations = emuProbeIterations
		}
	}
	p := cgo.ProbeParams{Kind: s.Kind, Result: planAddress, Blocks: s.Blocks, Threads: s.Threads, Iterations: iterations}
	plan, err := dev.ProbePlan(p)
	if err != nil {
		return merge(out, fromError(kernel, "planning", err)), noCheck
	}
	// Verify and time the same launch shape, whatever auto chose.
	p.Blocks, p.Threads = plan.BlocksUsed, plan.ThreadsUsed
	threads := uint64(plan.BlocksUsed) * uint64(plan.ThreadsUsed)
	out.Bytes, out.FLOPs = plan.BytesMoved, plan.FLOPs
	out.Plan = Plan{Iterations: iterations, Blocks: plan.BlocksUsed, Threads: plan.ThreadsUsed}
	out.Rotation = Rotation{Copies: 1, L2Bytes: float64(info.props.L2Bytes), Method: "no memory operands: every chain lives in registers"}
	if ok, why := Fits(dev, 4*threads); !ok {
		return merge(out, skipped(kernel, "does not fit: %s", why)), noCheck
	}
	bufs := &buffers{dev: dev}
	defer bufs.close()
	result, err := bufs.alloc("the result", 4*threads)
	if err != nil {
		return merge(out, fromError(kernel, "allocating", err)), noCheck
	}
	p.Result = result.Ptr

	return verifyThenTime(dev, o, out, kernel,
		func() Check { return verifyComputeProbe(dev, p, result) },
		func(int) error { _, err := dev.Probe(p); return err })
}

// verifyComputeProbe runs the timed launch shape at a few iterations, where every thread's
// chain has an exact reference, and compares every thread's value bit for bit.
func verifyComputeProbe(dev *cgo.Device, p cgo.ProbeParams, result *cgo.Buffer) Check {
	c := checkOf(Verification{})
	v := &c.Verification
	p.Iterations = verifyFMAIterations
	if p.Kind == cgo.ProbeMMABF16 {
		p.Iterations = verifyMMAIterations
	}
	if err := result.Memset(0xFF); err != nil {
		v.Reason = fmt.Sprintf("poisoning: %v", err)
		return c
	}
	res, err := dev.Probe(p)
	if err == nil {
		err = dev.Synchronize()
	}
	if err != nil {
		v.Reason = fmt.Sprintf("running: %v", err)
		return c
	}
	got := make([]uint32, uint64(res.BlocksUsed)*uint64(res.ThreadsUsed))
	if err := cgo.Read(result, got); err != nil {
		v.Reason = fmt.Sprintf("copying the result back: %v", err)
		return c
	}
	perThread := make([]uint32, res.ThreadsUsed) // a thread's value depends on threadIdx only
	for t := range perThread {
		var f float32
		if p.Kind == cgo.ProbeFMAF32 {
			f = ref.FMAProbeResult(t, p.Iterations)
		} else {
			f, _ = ref.MMAProbeResult(t, p.Iterations) // exact below 8 iterations
		}
		perThread[t] = math.Float32bits(f)
	}
	c = compareWords(got, func(i uint64) uint32 { return perThread[i%uint64(res.ThreadsUsed)] })
	if c.Passed {
		c.Reason = fmt.Sprintf("every thread's chains checked exactly at %d iterations, timed at more", p.Iterations)
	}
	return c
}
