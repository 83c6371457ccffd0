package step

import (
	"errors"
	"fmt"

	"github.com/decodebench/decodebench/bench/units"
	"github.com/decodebench/decodebench/cgo"
)

// Device is what an Engine needs of a device: the launches and plans of a step, memory, and
// the stream's graphs. cgo.Device satisfies it.
type Device interface {
	Launcher
	Planner
	Alloc(bytes uint64) (*cgo.Buffer, error)
	Props() (cgo.DeviceProps, error)
	Synchronize() error
	BeginGraph() error
	EndGraph() (*cgo.Graph, error)
	Do(f func() error) error
}

// Mode is how a step is launched.
type Mode string

const (
	Eager Mode = "eager" // every op launched in turn
	Graph Mode = "graph" // one step captured once and replayed
)

// Modes lists the modes in the order a record gives them.
var Modes = []Mode{Graph, Eager}

// ParseMode reads graph, eager or both.
func ParseMode(s string) ([]Mode, error) {
	switch s {
	case "both":
		return Modes, nil
	case string(Graph):
		return []Mode{Graph}, nil
	case string(Eager):
		return []Mode{Eager}, nil
	}
	return nil, fmt.Errorf("mode %q: want graph, eager or both", s)
}

// planAddress stands for every buffer while the calls are planned before allocation: the
// plans check addresses for null and alignment but read no memory.
const planAddress = 1 << 20

// Workspaces are the scratch memory of a step's calls, each the largest any call of its kind
// needs (the calls run one after another on one stream, so they share it). The attention has
// its own: its split counters must not be overwritten by a linear's split-K partials between
// two attention calls.
type Workspaces struct {
	Shared    uint64 // linear split-K partials, the argmax's slices
	Attention uint64 // attention split partials and counters
}

// Total is both.
func (w Workspaces) Total() uint64 { return w.Shared + w.Attention }

// Plan sizes the workspaces of p's calls on pl without allocating anything.
func (p *Program) Plan(pl Planner) (Workspaces, error) {
	var w Workspaces
	ops := p.Ops(func(string) uint64 { return planAddress })
	for i := range ops {
		need, err := ops[i].Plan(pl, 0, 0)
		if err != nil {
			return w, err
		}
		if ops[i].UsesAttentionWorkspace() {
			w.Attention = max(w.Attention, need)
		} else {
			w.Shared = max(w.Shared, need)
		}
	}
	return w, nil
}

// memoryReserve is kept free beyond what a step allocates, as bench/measure keeps it for a
// kernel: 512 MiB, or 1/32 of a smaller device's memory.
func memoryReserve(props cgo.DeviceProps) uint64 { return min(512<<20, props.MemTotalBytes/32) }

// ErrDoesNotFit marks a step whose buffers do not fit in free device memory with the reserve.
var ErrDoesNotFit = errors.New("does not fit")

// Fits says whether bytes fit in the device's free memory with the reserve kept, and if not,
// why (an error matching ErrDoesNotFit).
func Fits(dev interface {
	Props() (cgo.DeviceProps, error)
}, p *Program, bytes uint64) error {
	props, err := dev.Props()
	if err != nil {
		return fmt.Errorf("reading the device's free memory: %w", err)
	}
	free, reserve := props.MemFreeBytes, memoryReserve(props)
	if free < reserve || bytes > free-reserve {
		return fmt.Errorf("%w: the step needs %s of device memory (weights %s, KV caches %s for %d x %d tokens, activations and workspace), %s free (%s kept in reserve)",
			ErrDoesNotFit, units.Bytes(float64(bytes)), units.Bytes(float64(p.WeightBytes())), units.Bytes(float64(p.CacheBytes())),
			p.Batch, p.Capacity(), units.Bytes(float64(free)), units.Bytes(float64(reserve)))
	}
	return nil
}

// Engine is a program on a device: its buffers allocated and filled, its calls planned.
type Engine struct {
	Program *Program
	Ops     []Op
	dev     Device
	bufs    map[string]*cgo.Buffer
	graph   *cgo.Graph
	// hostAdvance: the library has no db_add_i32, so an eager step's positions and lengths
	// are written from the host after it (each step then waits for the host); graph mode
	// needs the device-side advance.
	hostAdvance bool
	steps       int // steps since the last reset
	// DeviceBytes is what the engine allocated.
	DeviceBytes uint64
}

// Open plans p on dev, checks that it fits (before allocating anything), allocates and fills
// every buffer, poisons the activations with NaN and writes the first step's state.
func Open(dev Device, p *Program) (*Engine, error) {
	workspaces, err := p.Plan(dev)
	if err != nil {
		return nil, err
	}
	total := p.BufferBytes() + workspaces.Total()
	if err := Fits(dev, p, total); err != nil {
		return nil, err
	}
	e := &Engine{Program: p, dev: dev, bufs: map[string]*cgo.Buffer{}, DeviceBytes: total}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	for _, b := range p.Buffers {
		buf, err := dev.Alloc(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("allocating %s (%s): %w", b.Name, units.Bytes(float64(b.Bytes)), err)
		}
		e.bufs[b.Name] = buf
		switch {
		case b.Fill != nil && b.Fill.Quant != nil:
			err = fillQuantized(dev, buf, b)
		case b.Fill != nil:
			err = buf.FillHash(b.Fill.DType, b.Fill.Count, b.Fill.Seed, b.Fill.Scale)
		case !b.State:
			err = buf.Memset(0xFF)
		}
		if err != nil {
			return nil, fmt.Errorf("filling %s: %w", b.Name, err)
		}
	}
	type scratch struct {
		ptr, bytes uint64
	}
	var shared, attention scratch
	for _, w := range []struct {
		name  string
		bytes uint64
		into  *scratch
	}{{bufWorkspace, workspaces.Shared, &shared}, {bufAttnWorkspace, workspaces.Attention, &attention}} {
		if w.bytes == 0 {
			continue
		}
		buf, err := dev.Alloc(w.bytes)
		if err != nil {
			return nil, fmt.Errorf("allocating the %s (%s): %w", w.name, units.Bytes(float64(w.bytes)), err)
		}
		e.bufs[w.name] = buf
		*w.into = scratch{buf.Ptr, w.bytes}
	}
	e.Ops = p.Ops(func(name string) uint64 { return e.bufs[name].Ptr })
	for i := range e.Ops {
		ws := shared
		if e.Ops[i].UsesAttentionWorkspace() {
			ws = attention
		}
		if _, err := e.Ops[i].Plan(dev, ws.ptr, ws.bytes); err != nil {
			return nil, err
		}
	}
	if err := e.Reset(); err != nil {
		return nil, err
	}
	if err := dev.AddInt32(e.bufs[bufPosLens].Ptr, 2*p.Batch, 0); errors.Is(err, cgo.ErrNotExported) {
		e.hostAdvance = true
		p.Notes = append(p.Notes, "positions advanced from the host after each eager step: "+err.Error())
	} else if err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// Close frees the graph and every buffer.
func (e *Engine) Close() {
	if e.graph != nil {
		e.graph.Close()
		e.graph = nil
	}
	for _, b := range e.bufs {
		b.Close()
	}
	e.bufs = nil
}

// Reset writes the first step's token ids, positions and lengths (on the stream, waiting for
// it): the cache before position Context is never written, so every run from a reset decodes
// the same tokens at the same positions.
func (e *Engine) Reset() error {
	e.steps = 0
	ids, posLens := e.Program.InitialState()
	if err := cgo.Write(e.bufs[bufIDs], ids); err != nil {
		return fmt.Errorf("writing the token ids: %w", err)
	}
	if err := cgo.Write(e.bufs[bufPosLens], posLens); err != nil {
		return fmt.Errorf("writing the positions: %w", err)
	}
	return nil
}

// Step queues one step in mode (capturing the graph on first use).
func (e *Engine) Step(mode Mode) error {
	if mode == Graph {
		if e.hostAdvance {
			return fmt.Errorf("graph mode: the step advances its positions on the device (db_add_i32): %w", cgo.ErrNotExported)
		}
		if e.graph == nil {
			if err := e.capture(); err != nil {
				return err
			}
		}
		e.steps++
		return e.graph.Launch()
	}
	return e.eager(nil)
}

// eager launches one step's ops in turn; after, when not nil, runs after each op (a trace reads
// the routing there, which the next layer overwrites).
func (e *Engine) eager(after func(Op) error) error {
	return e.dev.Do(func() error {
		ops := e.Ops
		if e.hostAdvance {
			ops = ops[:len(ops)-1]
		}
		for _, o := range ops {
			if err := o.Launch(e.dev); err != nil {
				return err
			}
			if after != nil {
				if err := after(o); err != nil {
					return err
				}
			}
		}
		e.steps++
		if e.hostAdvance {
			_, posLens := e.Program.InitialState()
			for i := range posLens {
				posLens[i] += int32(e.steps)
			}
			return cgo.Write(e.bufs[bufPosLens], posLens)
		}
		return nil
	})
}

// capture records one step's launches as a graph; nothing runs while it captures. One eager
// step runs first: whatever a kernel does on its first launch (loading its module, setting
// its shared-memory limit) then happens outside the capture. It is called at a reset (the
// first graph step of a trace, or before the samples) and leaves the state reset.
func (e *Engine) capture() error {
	if e.steps != 0 {
		return fmt.Errorf("capturing the step: %d steps since the reset, want 0 (an internal error)", e.steps)
	}
	if err := e.Step(Eager); err != nil {
		return fmt.Errorf("the eager step before the capture: %w", err)
	}
	if err := e.Reset(); err != nil {
		return err
	}
	if err := e.dev.BeginGraph(); err != nil {
		return fmt.Errorf("capturing the step: %w", err)
	}
	var launchErr error
	for _, o := range e.Ops {
		if launchErr = o.Launch(e.dev); launchErr != nil {
			break
		}
	}
	g, err := e.dev.EndGraph()
	if launchErr != nil {
		if g != nil {
			g.Close()
		}
		return fmt.Errorf("capturing the step: %w", launchErr)
	}
	if err != nil {
		return fmt.Errorf("capturing the step: %w", err)
	}
	e.graph = g
	return nil
}

// Trace is an untimed run of Steps steps from a reset, every step's inputs and outputs
// copied back: what the forward pass of bench/ref is compared with. The forward pass is
// teacher-forced: feed it Tokens[i] at step i (ref.NewForward(shape, Seed, Batch, Context,
// Steps), then Step(Tokens[i])) and compare its logits with LogitsOf(Program.DType, Logits[i]);
// Next[i] is the argmax the device chose from them.
type Trace struct {
	Mode Mode
	// Tokens[i] are the ids step i was fed ([batch]); Next[i] the ids its argmax chose
	// (Tokens[i+1]).
	Tokens [][]int32
	Next   [][]int32
	// Logits[i] is step i's [batch x vocab] logits as the activation dtype's bits.
	Logits [][]uint16
	// PosLens are the positions and then the context lengths after the last step.
	PosLens []int32
	// Routes[i] (eager traces of a mixture of experts) maps each MoE layer to the experts step
	// i routed each sequence to ([batch x top_k], best first), as the reference's StepRouted
	// takes them.
	Routes []map[int][]int32
}

// RunTrace builds c's program, opens it on dev, traces its steps in mode and frees it: what a
// comparison with the forward pass needs in one call.
func RunTrace(dev Device, c Config, mode Mode) (Trace, *Program, error) {
	p, err := New(c)
	if err != nil {
		return Trace{}, nil, err
	}
	e, err := Open(dev, p)
	if err != nil {
		return Trace{}, p, err
	}
	defer e.Close()
	t, err := e.Trace(mode)
	return t, p, err
}

// Trace runs the steps one at a time from a reset and copies each one's logits and ids back.
func (e *Engine) Trace(mode Mode) (Trace, error) {
	p := e.Program
	t := Trace{Mode: mode}
	if err := e.Reset(); err != nil {
		return t, err
	}
	ids := make([]int32, p.Batch)
	if err := cgo.Read(e.bufs[bufIDs], ids); err != nil {
		return t, err
	}
	for i := 0; i < p.Steps; i++ {
		t.Tokens = append(t.Tokens, ids)
		var err error
		if mode == Eager && p.Model.IsMoE() {
			routes := map[int][]int32{}
			err = e.eager(func(o Op) error {
				if o.MoERoute == nil {
					return nil
				}
				r := make([]int32, o.MoERoute.Batch*o.MoERoute.TopK)
				routes[o.Layer] = r
				return cgo.Read(e.bufs[bufTopKIDs], r)
			})
			t.Routes = append(t.Routes, routes)
		} else {
			err = e.Step(mode)
		}
		if err != nil {
			return t, fmt.Errorf("step %d: %w", i, err)
		}
		logits := make([]uint16, p.Batch*p.Model.Vocab)
		if err := cgo.Read(e.bufs[bufLogits], logits); err != nil {
			return t, fmt.Errorf("step %d: reading the logits: %w", i, err)
		}
		next := make([]int32, p.Batch)
		if err := cgo.Read(e.bufs[bufIDs], next); err != nil {
			return t, fmt.Errorf("step %d: reading the ids: %w", i, err)
		}
		t.Logits, t.Next = append(t.Logits, logits), append(t.Next, next)
		ids = next
	}
	t.PosLens = make([]int32, 2*p.Batch)
	if err := cgo.Read(e.bufs[bufPosLens], t.PosLens); err != nil {
		return t, fmt.Errorf("reading the positions: %w", err)
	}
	return t, e.Reset()
}
