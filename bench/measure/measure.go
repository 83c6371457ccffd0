// Package measure is the one vocabulary of a measurement: a Spec says which kernel call (linear,
// attention or a probe), Measure verifies and times it into an Outcome, Verify checks it alone
// into a Check, and the status words are StatusOK, StatusFailed, StatusSkipped (and
// StatusNotMeasured for what a composition never ran). sweep, validate, bench and verify all
// speak it.
//
// A measurement validates the spec, allocates, fills the inputs with the device hash, verifies
// the output against bench/ref before any timing, then times with device events after warm-up,
// with the operands rotated through enough copies that every sample reads them from HBM, not L2.
//
// Every entry point returns an Outcome and never panics on a bad spec: a shape the kernels
// cannot run or the card cannot hold is "skipped", a wrong result or a kernel error "failed",
// and only an "ok" Outcome carries times as a result. A time faster than the card's datasheet
// allows (PlausibleMargin) is "failed" with ImplausibleReason: the timer or the kernel is at
// fault, and the times are kept only to show what the timer said. Under the emulator
// (Outcome.Emulated) the times are the CPU's and must never be reported as speed.
package measure

import (
	"errors"
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"math"

	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// Options are the measurement method's knobs. Start from DefaultOptions: the zero value does
// not verify.
type Options struct {
	Timing         timing.Config // the sampling rule; the zero Config means timing.Default
	RotateFactor   float64       // rotated copies' working set >= RotateFactor x L2 (0 means 4)
	MaxRotateBytes uint64        // cap on the rotated copies' memory (0 means 1/4 of free device memory)
	Verify         bool          // verify before timing (the CLI always does)
	Seed           uint64        // seed of the input hash
	// Datasheet bounds what a measurement may claim (see PlausibleMargin); zero means the
	// device's own spec row, found by its name.
	Datasheet Datasheet

	// checkOnly (Verify): one copy of the operands, every output compared, nothing timed.
	checkOnly bool
}

// DefaultRotateFactor: 4x L2 leaves under 1/4 of any copy's lines resident when the next call
// on it comes round, for an LRU-like L2.
const DefaultRotateFactor = 4

// DefaultOptions is the method every command uses unless told otherwise: timing.Default,
// working sets of 4x L2 (so every sample reads HBM), verify before timing.
func DefaultOptions() Options {
	return Options{Timing: timing.Default, RotateFactor: DefaultRotateFactor, Verify: true, Seed: 1}
}

// withDefaults fills the zero fields that have a default.
func (o Options) withDefaults() Options {
	if o.Timing == (timing.Config{}) {
		o.Timing = timing.Default
	}
	if o.RotateFactor == 0 {
		o.RotateFactor = DefaultRotateFactor
	}
	return o
}

func (o Options) validate() error {
	if err := o.Timing.Validate(); err != nil {
		return fmt.Errorf("timing: %w", err)
	}
	if !(o.RotateFactor > 0) || math.IsInf(o.RotateFactor, 0) {
		return fmt.Errorf("rotate factor %g: want a finite number > 0", o.RotateFactor)
	}
	return nil
}

func skipped(kernel, format string, a ...any) Outcome {
	return Outcome{Kernel: kernel, Status: StatusSkipped, Reason: fmt.Sprintf(format, a...)}
}

func failed(kernel, format string, a ...any) Outcome {
	return Outcome{Kernel: kernel, Status: StatusFailed, Reason: fmt.Sprintf(format, a...)}
}

// fromError classifies an error of the seam: a shape the kernel refuses or memory the card
// lacks is skipped; anything else failed.
func fromError(kernel, what string, err error) Outcome {
	if errors.Is(err, cgo.ErrUnsupportedShape) || errors.Is(err, cgo.ErrOutOfMemory) {
		return skipped(kernel, "%s: %v", what, err)
	}
	return failed(kernel, "%s: %v", what, err)
}

// finish fills the rates from the median.
func (o *Outcome) finish(stats timing.Stats, reps int) {
	o.Status, o.Stats, o.RepsPerSample = StatusOK, stats, reps
	if stats.Median > 0 {
		o.AchievedBytesPerSec = o.Bytes / stats.Median
		o.AchievedFLOPsPerSec = o.FLOPs / stats.Median
	}
}

// memoryReserve is kept free beyond what a measurement allocates, for the library's own
// buffers and allocation granularity: 512 MiB, or 1/32 of a smaller device's memory.
func memoryReserve(props cgo.DeviceProps) uint64 { return min(512<<20, props.MemTotalBytes/32) }

// Fits reports whether bytes of buffers can be allocated on dev now, and if not, why. Sweeps
// call it to skip a shape before allocating anything.
func Fits(dev *cgo.Device, bytes uint64) (bool, string) {
	if dev == nil {
		return false, "no device"
	}
	props, err := dev.Props()
	if err != nil {
		return false, fmt.Sprintf("reading the device's free memory: %v", err)
	}
	free, reserve := props.MemFreeBytes, memoryReserve(props)
	if free < reserve || bytes > free-reserve {
		return false, fmt.Sprintf("needs %s of device memory, %s free (%s kept in reserve)",
			units.Bytes(float64(bytes)), units.Bytes(float64(free)), units.Bytes(float64(reserve)))
	}
	return true, ""
}

// buffers owns what one measurement allocated.
type buffers struct {
	dev  *cgo.Device
	bufs []*cgo.Buffer
}

func (b *buffers) alloc(what string, bytes uint64) (*cgo.Buffer, error) {
	buf, err := b.dev.Alloc(bytes)
	if err != nil {
		return nil, fmt.Errorf("allocating %s (%s): %w", what, units.Bytes(float64(bytes)), err)
	}
	b.bufs = append(b.bufs, buf)
	return buf, nil
}

// bufferAlloc is one buffer of a measurement: where its pointer goes, what it holds (for the
// error) and its size.
type bufferAlloc struct {
	dst   **cgo.Buffer
	what  string
	bytes uint64
}

// allocEach allocates the buffers in order; a failure names the buffer it stopped at.
func (b *buffers) allocEach(list ...bufferAlloc) (what string, err error) {
	for _, a := range list {
		buf, err := b.alloc(a.what, a.bytes)
		if err != nil {
			return a.what, err
		}
		*a.dst = buf
	}
	return "", nil
}

// pageTable puts a paged cache's table on the device and returns its address; a failure
// comes back as kernel's outcome.
func (b *buffers) pageTable(kernel string, table []int32) (uint64, *Outcome) {
	pages, err := b.alloc("the page table", uint64(4*len(table)))
	if err != nil {
		fail := fromError(kernel, "page table", err)
		return 0, &fail
	}
	if err := cgo.Write(pages, table); err != nil {
		fail := failed(kernel, "copying the page table: %v", err)
		return 0, &fail
	}
	return pages.Ptr, nil
}

func (b *buffers) close() {
	for _, buf := range b.bufs {
		buf.Close()
	}
	b.bufs = nil
}

// device reads what every measurement needs to know about dev.
type deviceInfo struct {
	props    cgo.DeviceProps
	emulated bool
}

func readDevice(dev *cgo.Device) (deviceInfo, error) {
	if dev == nil {
		return deviceInfo{}, errors.New("no device")
	}
	props, err := dev.Props()
	if err != nil {
		return deviceInfo{}, fmt.Errorf("reading the device properties: %w", err)
	}
	return deviceInfo{props: props, emulated: dev.Library().Emulated()}, nil
}

// rotateCap is the memory the rotated copies may take: Options.MaxRotateBytes, or 1/4 of the
// free memory; never more than what is free once the rest of the measurement is allocated.
func rotateCap(o Options, info deviceInfo, otherBytes uint64) uint64 {
	limit := o.MaxRotateBytes
	if limit == 0 {
		limit = info.props.MemFreeBytes / 4
	}
	free, reserve := info.props.MemFreeBytes, memoryReserve(info.props)
	if free > reserve+otherBytes {
		limit = min(limit, free-reserve-otherBytes)
	} else {
		limit = 0
	}
	return limit
}

// roundUp rounds n up to a multiple of align (a power of two).
func roundUp(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }

// copyAlign separates rotated copies: 256 bytes keeps every copy aligned for any vector load
// and in its own cache lines.
const copyAlign = 256

// planAddress stands for a buffer in a plan made before allocating (to size the workspace and
// check the shape first): the plan calls check addresses for null and alignment but read no
// memory, and the launches get the real ones.
const planAddress = 1 << 16

// verifyThenTime ends every measurement: verification first (with Options.Verify; a failed
// kernel is recorded and never timed), then timeCalls, where call(i) launches the i-th timed
// call (on the i-th rotated copy). Under Verify (checkOnly) it stops after the verification.
func verifyThenTime(dev *cgo.Device, o Options, out Outcome, kernel string, verify func() Check, call func(int) error) (Outcome, Check) {
	c := Check{Worst: noElement}
	if o.Verify || o.checkOnly {
		c = verify()
		out.Verification = c.Verification
		if !out.Verification.Passed {
			return merge(out, failed(kernel, "verification: %s", out.Verification.Reason)), c
		}
	} else {
		out.Verification.Reason = "not verified (Options.Verify is false)"
	}
	if o.checkOnly {
		out.Status = StatusOK
		return out, c
	}
	var ds Datasheet
	if info, err := readDevice(dev); err == nil {
		ds = o.datasheet(info)
	}
	inL2 := mayHitL2(out.Rotation)
	bound := func(secondsPerCall float64) string {
		return implausible(out.Bytes, out.FLOPs, secondsPerCall, ds, inL2)
	}
	stats, reps, note, err := timeCalls(dev, o.Timing, call, bound)
	var unreal errImplausible
	if errors.As(err, &unreal) {
		return merge(out, failed(kernel, "%s", string(unreal))), c
	}
	if err != nil {
		return merge(out, failed(kernel, "timing: %v", err)), c
	}
	out.finish(stats, reps)
	out.Plan.Timer = note
	if why := bound(stats.Median); why != "" {
		out.Status, out.Reason = StatusFailed, why // the times stay, to show what the timer said
	}
	return out, c
}

// kernelSpec is a kernel's measure spec as measureSpec sees it.
type kernelSpec interface {
	Spec() Spec
	Bytes() float64
	FLOPs() float64
	check() (status, reason string)
}

// measureSpec is the start every kernel's measurement shares: it defaults and validates o,
// skips what s.check refuses and reads the device, all before any GPU work, then hands run
// the outcome so far (kernel, emulated, bytes and FLOPs). The outcome names s, however it ends.
func measureSpec(dev *cgo.Device, kernel string, s kernelSpec, o Options,
	run func(o Options, info deviceInfo, out Outcome) (Outcome, Check)) (Outcome, Check) {
	out, c := startSpec(dev, kernel, s, o, run)
	out.Spec = s.Spec()
	return out, c
}

func startSpec(dev *cgo.Device, kernel string, s kernelSpec, o Options,
	run func(o Options, info deviceInfo, out Outcome) (Outcome, Check)) (Outcome, Check) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return failed(kernel, "options: %v", err), noCheck
	}
	if status, why := s.check(); status != "" {
		return Outcome{Kernel: kernel, Status: status, Reason: why}, noCheck
	}
	info, err := readDevice(dev)
	if err != nil {
		return failed(kernel, "%v", err), noCheck
	}
	return run(o, info, Outcome{Kernel: kernel, Emulated: info.emulated, Bytes: s.Bytes(), FLOPs: s.FLOPs()})
}
