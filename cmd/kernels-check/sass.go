package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Function is one kernel of `cuobjdump -sass` output.
type Function struct {
	Mangled string
	Name    string // demangled and normalized (see normalizeName)
	Insts   []Inst
}

// Inst is one SASS instruction.
type Inst struct {
	Addr     int
	Pred     string // "@P0", "@!UP1", or ""
	Op       string // the opcode with its modifiers: "LDG.E.NA.128.CONSTANT"
	Operands string
	Target   int      // a branch's target address; -1 when none or unresolved
	Ctrl     *Control // nil when the output did not carry the instruction's second word
	label    string   // a branch target given as a label, resolved after the function is read
}

// Control is the scheduling part of a Volta-to-Hopper instruction: bits 105-125 of its 128
// bits, that is bits 41-61 of the second 64-bit word cuobjdump prints under the instruction.
// A variable-latency instruction (a global load, a shared load, a shuffle) may set a write
// scoreboard, counted until its result lands; a later instruction that needs the result waits
// on that scoreboard through its wait mask. So the wait mask is where a warp stalls for a load.
type Control struct {
	Stall    int // cycles before the next instruction issues
	Yield    bool
	WriteBar int // scoreboard the result decrements, -1 for none
	ReadBar  int // scoreboard released when the source registers are read, -1 for none
	WaitMask int // bit b: wait until scoreboard b is zero before issuing
	Reuse    int
}

func decodeControl(hi uint64) *Control {
	bar := func(v uint64) int {
		if v == 7 {
			return -1
		}
		return int(v)
	}
	return &Control{
		Stall:    int(hi >> 41 & 0xf),
		Yield:    hi>>45&1 == 1,
		WriteBar: bar(hi >> 46 & 7),
		ReadBar:  bar(hi >> 49 & 7),
		WaitMask: int(hi >> 52 & 0x3f),
		Reuse:    int(hi >> 58 & 0xf),
	}
}

var (
	reFunction = regexp.MustCompile(`^\s*Function\s*:\s*(\S+)`)
	reInst     = regexp.MustCompile(`^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*;\s*/\*\s*0x([0-9a-fA-F]{16})\s*\*/\s*$`)
	reHexOnly  = regexp.MustCompile(`^\s*/\*\s*0x([0-9a-fA-F]{16})\s*\*/\s*$`)
	reLabel    = regexp.MustCompile(`^\s*(\.L_[A-Za-z0-9_]+):\s*$`)
	rePred     = regexp.MustCompile(`^(@!?U?P[0-9T])\s+`)
	reBraLabel = regexp.MustCompile("`?\\(?(\\.L_[A-Za-z0-9_]+)\\)?\\s*$")
	reBraAddr  = regexp.MustCompile(`(0x[0-9a-fA-F]+)\s*$`)
)

// ParseSASS reads `cuobjdump -sass` output: every function's instructions, with the second
// encoding word decoded where it is printed. Names are left mangled; see demangleFunctions.
func ParseSASS(r io.Reader) ([]*Function, error) {
	var (
		funcs   []*Function
		cur     *Function
		labels  map[string]int
		pending []string // labels waiting for the next instruction's address
		awaitHi bool     // the last line was an instruction whose second word comes next
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		for i := range cur.Insts {
			in := &cur.Insts[i]
			if in.label == "" {
				continue
			}
			addr, ok := labels[in.label]
			if !ok {
				return fmt.Errorf("%s: branch at /*%04x*/ to unknown label %s", cur.Mangled, in.Addr, in.label)
			}
			in.Target = addr
		}
		funcs = append(funcs, cur)
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if m := reFunction.FindStringSubmatch(text); m != nil {
			if err := finish(); err != nil {
				return nil, err
			}
			cur, labels, pending, awaitHi = &Function{Mangled: m[1]}, map[string]int{}, nil, false
			continue
		}
		if cur == nil {
			continue
		}
		if m := reLabel.FindStringSubmatch(text); m != nil {
			pending = append(pending, m[1])
			awaitHi = false
			continue
		}
		if m := reInst.FindStringSubmatch(text); m != nil {
			addr, err := strconv.ParseInt(m[1], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: address %q: %v", line, m[1], err)
			}
			for _, l := range pending {
				labels[l] = int(addr)
			}
			pending = nil
			cur.Insts = append(cur.Insts, parseInst(int(addr), m[2]))
			awaitHi = true
			continue
		}
		if m := reHexOnly.FindStringSubmatch(text); m != nil {
			if awaitHi {
				hi, err := strconv.ParseUint(m[1], 16, 64)
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", line, err)
				}
				cur.Insts[len(cur.Insts)-1].Ctrl = decodeControl(hi)
			}
			// A word pair with no text is an instruction cuobjdump could not print (CUDA 11.8
			// does this for a few sm_90 opcodes); it is neither a load nor a branch here.
			awaitHi = false
			continue
		}
		awaitHi = false
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return funcs, nil
}

func parseInst(addr int, text string) Inst {
	in := Inst{Addr: addr, Target: -1}
	text = strings.TrimSpace(text)
	if m := rePred.FindStringSubmatch(text); m != nil {
		in.Pred = m[1]
		text = text[len(m[0]):]
	}
	op, rest, _ := strings.Cut(text, " ")
	in.Op, in.Operands = op, strings.TrimSpace(rest)
	if in.isBranch() {
		if m := reBraLabel.FindStringSubmatch(in.Operands); m != nil {
			in.label = m[1]
		} else if m := reBraAddr.FindStringSubmatch(in.Operands); m != nil {
			if v, err := strconv.ParseInt(m[1][2:], 16, 64); err == nil {
				in.Target = int(v)
			}
		}
	}
	return in
}

// base is the opcode without modifiers: "LDG" for "LDG.E.128".
func (in Inst) base() string {
	b, _, _ := strings.Cut(in.Op, ".")
	return b
}

func (in Inst) isBranch() bool { return in.base() == "BRA" }

func (in Inst) has(modifier string) bool {
	for _, m := range strings.Split(in.Op, ".")[1:] {
		if m == modifier {
			return true
		}
	}
	return false
}

// Kinds of 16-byte loads the gate counts.
const (
	loadNone   = iota
	loadGlobal // LDG.*.128 (and LD.*.128, a generic load ptxas could not prove global): into registers
	loadAsync  // LDGSTS.*.128: cp.async, global to shared, completion tracked by commit groups
)

func (in Inst) loadKind() int {
	if !in.has("128") {
		return loadNone
	}
	switch in.base() {
	case "LDG", "LD":
		return loadGlobal
	case "LDGSTS":
		return loadAsync
	}
	return loadNone
}

var reReg = regexp.MustCompile(`\bR([0-9]+)(\.64)?`)

// registers lists the general registers an operand list names; R2.64 names R2 and R3.
func registers(operands string) []int {
	var regs []int
	for _, m := range reReg.FindAllStringSubmatch(operands, -1) {
		r, _ := strconv.Atoi(m[1])
		regs = append(regs, r)
		if m[2] != "" {
			regs = append(regs, r+1)
		}
	}
	return regs
}

// destination is the first register of a load's destination: LDG.E.128 R28, [R40.64] -> 28.
func (in Inst) destination() int {
	first, _, _ := strings.Cut(in.Operands, ",")
	if regs := registers(first); len(regs) > 0 && !strings.Contains(first, "[") {
		return regs[0]
	}
	return -1
}

var reDepbar = regexp.MustCompile(`^SB([0-9])\s*,\s*(0x[0-9a-fA-F]+|[0-9]+)(?:\s*,\s*\{([0-9,\s]*)\})?`)

// depbar parses DEPBAR.LE SBk, n[, {b,...}]: wait until scoreboard k counts at most n, and
// until the listed scoreboards are zero.
func (in Inst) depbar() (bar, most int, also []int, ok bool) {
	if in.base() != "DEPBAR" {
		return 0, 0, nil, false
	}
	m := reDepbar.FindStringSubmatch(in.Operands)
	if m == nil {
		return 0, 0, nil, false
	}
	bar, _ = strconv.Atoi(m[1])
	n, err := strconv.ParseInt(m[2], 0, 64)
	if err != nil {
		return 0, 0, nil, false
	}
	for _, f := range strings.FieldsFunc(m[3], func(r rune) bool { return r == ',' || r == ' ' }) {
		if b, err := strconv.Atoi(f); err == nil {
			also = append(also, b)
		}
	}
	return bar, int(n), also, true
}
