package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Loop is the code between a backward branch's target and the last branch back to it.
type Loop struct {
	Head, End int // addresses: the target, and the last backward branch to it
	first     int // index of the head instruction
	last      int // index of the last branch
	Loads     int // 16-byte loads whose innermost loop this is
}

// Loops finds a function's loops in address order (by head). The branch-to-self that ends
// every function (a trap for a runaway warp) is no loop.
func Loops(f *Function) []Loop {
	index := map[int]int{}
	for i, in := range f.Insts {
		index[in.Addr] = i
	}
	byHead := map[int]*Loop{}
	for i, in := range f.Insts {
		if !in.isBranch() || in.Target < 0 || in.Target >= in.Addr {
			continue
		}
		head, ok := index[in.Target]
		if !ok {
			continue
		}
		if l := byHead[in.Target]; l != nil {
			if i > l.last {
				l.last, l.End = i, in.Addr
			}
			continue
		}
		byHead[in.Target] = &Loop{Head: in.Target, End: in.Addr, first: head, last: i}
	}
	loops := make([]Loop, 0, len(byHead))
	for _, l := range byHead {
		loops = append(loops, *l)
	}
	sort.Slice(loops, func(a, b int) bool { return loops[a].Head < loops[b].Head })
	// Each load counts for its innermost loop: the shortest one holding it.
	for i, in := range f.Insts {
		if in.loadKind() == loadNone {
			continue
		}
		best := -1
		for j, l := range loops {
			if l.first <= i && i <= l.last && (best < 0 || l.last-l.first < loops[best].last-loops[best].first) {
				best = j
			}
		}
		if best >= 0 {
			loops[best].Loads++
		}
	}
	return loops
}

// LoopSelector names a loop of a kernel in the manifest:
//
//	"most-loads"  the loop with the most 16-byte loads of its own (not counting nested loops'),
//	              the first of equals: the hot loop of a streaming kernel;
//	"pipeline"    the innermost loop that waits for cp.async groups with some left in flight
//	              (DEPBAR.LE SB0, n > 0): the tile loop of a cp.async pipeline, whose copies
//	              may sit in nested loops;
//	"#n"          the n-th loop by address, from 1.
type LoopSelector string

const (
	MostLoads LoopSelector = "most-loads"
	Pipeline  LoopSelector = "pipeline"
)

func (s LoopSelector) valid() error {
	if s == "" || s == MostLoads || s == Pipeline {
		return nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(string(s), "#")); err == nil && n >= 1 && strings.HasPrefix(string(s), "#") {
		return nil
	}
	return fmt.Errorf("loop %q is not %q, %q or #n (the n-th loop by address, from 1)", s, MostLoads, Pipeline)
}

// Select finds the selected loop among the loops of f.
func (s LoopSelector) Select(f *Function, loops []Loop) (Loop, error) {
	if len(loops) == 0 {
		return Loop{}, fmt.Errorf("the kernel has no loop")
	}
	if s == "" || s == MostLoads {
		best := 0
		for i, l := range loops {
			if l.Loads > loops[best].Loads {
				best = i
			}
		}
		return loops[best], nil
	}
	if err := s.valid(); err != nil {
		return Loop{}, err
	}
	if s == Pipeline {
		best := -1
		for i, l := range loops {
			for _, in := range f.Insts[l.first : l.last+1] {
				if bar, most, _, ok := in.depbar(); ok && bar == 0 && most > 0 {
					if best < 0 || l.last-l.first < loops[best].last-loops[best].first {
						best = i
					}
					break
				}
			}
		}
		if best < 0 {
			return Loop{}, fmt.Errorf("loop %q: no loop waits for cp.async groups with some left in flight (DEPBAR.LE SB0, n > 0)", s)
		}
		return loops[best], nil
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(string(s), "#"))
	if n > len(loops) {
		return Loop{}, fmt.Errorf("loop %q: the kernel has %d loop(s)", s, len(loops))
	}
	return loops[n-1], nil
}

// InFlight is what a loop keeps in flight.
type InFlight struct {
	// Loads is the number of 16-byte loads issued and not yet waited for when the warp first
	// waits for one of them in a steady-state trip: how many a warp has in flight at its first
	// stall. Loads issued in one trip and consumed in the next (a register double buffer, a
	// cp.async pipeline) count too.
	Loads int
	// MinLoads is the least of that count over every stall of the trip (the first stall's
	// figure when it is the only one), at MinAddr: a trip that stalls three times keeps the
	// memory system as busy as its emptiest stall allows. Loads issued with no wait between
	// them are a burst, and land together; a wait is a stall when it waits for a load of a later
	// burst than the last stall did, and costs next to nothing otherwise: a loop that issues four
	// loads and then consumes them one by one stalls once, with four in flight; a pipeline that
	// waits once a trip for the copies of two trips ago stalls every trip.
	MinLoads int
	MinAddr  int
	// Waits is how many stalls one trip makes.
	Waits int
	// PerTrip is the 16-byte loads one trip issues (the body read once, straight through).
	PerTrip int
	// ConsumerAddr is where that first wait is, -1 when no instruction of the loop waits for a
	// load (they are all consumed after it).
	ConsumerAddr int
	// Consumer says how that instruction waits: "scoreboard SBn", "DEPBAR", "reads Rn".
	Consumer string
	// ByOp counts the loads in flight there by opcode.
	ByOp map[string]int
}

type pendingLoad struct {
	epoch    int // waits the warp had made when it issued the load (its burst)
	op       string
	kind     int
	firstReg int // kind loadGlobal: the destination, 4 registers from here; else -1
	writeBar int // -1 when the listing has no control words or the load sets none
	group    int // kind loadAsync: its commit group (-1 until LDGDEPBAR commits it)
}

// passes is how many trips the model runs before the one it measures: enough for a pipeline
// of up to passes-1 stages to fill from an empty start (the quantized tensor-core kernel's
// rings are 7-8 slots deep at its batch tile of 16).
const passes = 10

// MeasureInFlight walks the loop body straight through, trip after trip (forward branches are
// taken as fall-through, so every instruction of the body runs each trip), tracking each
// 16-byte load until the warp must wait for it:
//   - a load into registers, at the first instruction whose wait mask holds the load's write
//     scoreboard (a scoreboard is a counter: the wait is for every load on it), or a DEPBAR.LE
//     on that scoreboard, or, where the listing carries no control words, the first
//     instruction that names one of its four destination registers;
//   - a cp.async (LDGSTS), at the DEPBAR.LE SB0, n (cp.async.wait_group n) that leaves at
//     most n of the commit groups (LDGDEPBAR) outstanding.
//
// It measures the last of several trips, so that loads carried from one trip into the next
// are in the count, and reports the loads in flight at that trip's first wait.
func MeasureInFlight(f *Function, l Loop) InFlight {
	body := f.Insts[l.first : l.last+1]
	var (
		outstanding []pendingLoad
		nextGroup   int
		waits       int
		lastStall   = -1 // the latest burst the last stall waited for
		result      = InFlight{ConsumerAddr: -1}
	)
	// A cp.async pipeline waits for n > 0 groups in its steady state and for none on its last
	// trip, behind a branch this straight-line walk does not take; that drain is skipped.
	steadyWait := false
	for _, in := range body {
		if in.loadKind() != loadNone {
			result.PerTrip++
		}
		if bar, most, _, ok := in.depbar(); ok && bar == 0 && most > 0 {
			steadyWait = true
		}
	}
	for pass := 0; pass < passes; pass++ {
		measuring := pass == passes-1
		for _, in := range body {
			retire := make([]bool, len(outstanding))
			how := ""
			mark := func(i int, why string) {
				if !retire[i] {
					retire[i] = true
					if how == "" {
						how = why
					}
				}
			}
			if in.Ctrl != nil && in.Ctrl.WaitMask != 0 {
				for i, p := range outstanding {
					if p.writeBar >= 0 && in.Ctrl.WaitMask>>p.writeBar&1 == 1 {
						mark(i, fmt.Sprintf("scoreboard SB%d", p.writeBar))
					}
				}
			}
			if bar, most, also, ok := in.depbar(); ok && !(steadyWait && bar == 0 && most == 0) {
				retireDepbar(outstanding, bar, most, also, func(i int) { mark(i, "DEPBAR") })
			}
			if in.Ctrl == nil { // no scoreboards in the listing: fall back to register dataflow
				regs := registers(in.Operands)
				for i, p := range outstanding {
					if p.firstReg < 0 {
						continue
					}
					for _, r := range regs {
						if r >= p.firstReg && r < p.firstReg+4 {
							mark(i, fmt.Sprintf("reads R%d", r))
							break
						}
					}
				}
			}
			stall, latest := false, lastStall
			for i, p := range outstanding {
				if retire[i] && p.epoch > lastStall {
					stall = true
					latest = max(latest, p.epoch)
				}
			}
			if stall {
				lastStall = latest
			}
			if how != "" {
				waits++ // a load this instruction issues is of the next burst
			}
			if how != "" && measuring {
				if result.ConsumerAddr < 0 {
					result.ConsumerAddr, result.Consumer = in.Addr, how
					result.Loads = len(outstanding)
					result.ByOp = map[string]int{}
					for _, p := range outstanding {
						result.ByOp[p.op]++
					}
				}
				if stall && (result.Waits == 0 || len(outstanding) < result.MinLoads) {
					result.MinLoads, result.MinAddr = len(outstanding), in.Addr
				}
				if stall {
					result.Waits++
				}
			}
			if how != "" {
				kept := outstanding[:0]
				for i, p := range outstanding {
					if !retire[i] {
						kept = append(kept, p)
					}
				}
				outstanding = kept
			}
			switch kind := in.loadKind(); {
			case kind == loadGlobal:
				p := pendingLoad{epoch: waits, op: in.Op, kind: kind, firstReg: in.destination(), writeBar: -1, group: -1}
				if in.Ctrl != nil {
					p.writeBar = in.Ctrl.WriteBar
				}
				outstanding = append(outstanding, p)
			case kind == loadAsync:
				outstanding = append(outstanding, pendingLoad{epoch: waits, op: in.Op, kind: kind, firstReg: -1, writeBar: -1, group: -1})
			case in.base() == "LDGDEPBAR":
				for i := range outstanding {
					if outstanding[i].kind == loadAsync && outstanding[i].group < 0 {
						outstanding[i].group = nextGroup
					}
				}
				nextGroup++
			}
		}
	}
	if result.ConsumerAddr >= 0 && result.Waits == 0 { // waits, but for loads already waited for
		result.MinLoads, result.MinAddr = result.Loads, result.ConsumerAddr
	}
	if result.ConsumerAddr < 0 {
		// Nothing in the loop waits: its loads are consumed after it, and all of one trip's
		// are in flight at once.
		result.Loads, result.MinLoads, result.MinAddr = result.PerTrip, result.PerTrip, -1
	}
	return result
}

// retireDepbar applies DEPBAR.LE SBbar, most: commit groups of cp.async on SB0 beyond the
// newest `most`, and loads into registers on that scoreboard beyond `most` (the oldest go first);
// every load on a scoreboard of also.
func retireDepbar(outstanding []pendingLoad, bar, most int, also []int, retire func(int)) {
	if bar == 0 {
		groups := map[int]bool{}
		for _, p := range outstanding {
			if p.kind == loadAsync && p.group >= 0 {
				groups[p.group] = true
			}
		}
		if extra := len(groups) - most; extra > 0 {
			ids := make([]int, 0, len(groups))
			for g := range groups {
				ids = append(ids, g)
			}
			sort.Ints(ids)
			old := map[int]bool{}
			for _, g := range ids[:extra] {
				old[g] = true
			}
			for i, p := range outstanding {
				if p.kind == loadAsync && old[p.group] {
					retire(i)
				}
			}
		}
	}
	var onBar []int
	for i, p := range outstanding {
		if p.kind == loadGlobal && p.writeBar == bar {
			onBar = append(onBar, i)
		}
	}
	for j := 0; j < len(onBar)-most; j++ {
		retire(onBar[j])
	}
	for _, b := range also {
		for i, p := range outstanding {
			if p.kind == loadGlobal && p.writeBar == b {
				retire(i)
			}
		}
	}
}
