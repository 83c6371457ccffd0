package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Resources are what ptxas reports for one kernel on one architecture.
type Resources struct {
	Registers   int // per thread
	SmemBytes   int // static shared memory per block
	StackBytes  int
	SpillStores int
	SpillLoads  int
}

var (
	reCompiling = regexp.MustCompile(`Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)'`)
	reProps     = regexp.MustCompile(`Function properties for (\S+)`)
	reStack     = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed      = regexp.MustCompile(`Used (\d+) registers`)
	reSmem      = regexp.MustCompile(`(\d+) bytes smem`)
)

// ParsePtxasLog reads `nvcc -Xptxas -v` output and returns each entry function's resources on
// arch (e.g. "sm_90"), by mangled name.
func ParsePtxasLog(r io.Reader, arch string) (map[string]Resources, error) {
	out := map[string]Resources{}
	var entry, entryArch, propsFor string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := reCompiling.FindStringSubmatch(line); m != nil {
			entry, entryArch, propsFor = m[1], m[2], ""
			continue
		}
		if m := reProps.FindStringSubmatch(line); m != nil {
			propsFor = m[1]
			continue
		}
		if m := reStack.FindStringSubmatch(line); m != nil && propsFor == entry && entryArch == arch {
			res := out[entry]
			res.StackBytes, _ = strconv.Atoi(m[1])
			res.SpillStores, _ = strconv.Atoi(m[2])
			res.SpillLoads, _ = strconv.Atoi(m[3])
			out[entry] = res
			continue
		}
		if m := reUsed.FindStringSubmatch(line); m != nil && entry != "" && entryArch == arch {
			res := out[entry]
			res.Registers, _ = strconv.Atoi(m[1])
			if s := reSmem.FindStringSubmatch(line); s != nil {
				res.SmemBytes, _ = strconv.Atoi(s[1])
			}
			out[entry] = res
			entry = "" // a device function's "Used" line that may follow belongs to no entry
		}
	}
	return out, sc.Err()
}

// SM90 is what limits residency on an sm_90 SM (H100, H200).
var SM90 = SMLimits{
	Registers:           65536,
	RegisterGranularity: 256, // registers are allocated per warp in units of 256
	SmemBytes:           228 * 1024,
	SmemPerBlockBytes:   227 * 1024,
	SmemReservedBytes:   1024, // the runtime's share of every block
	SmemGranularity:     128,
	Threads:             2048,
	Blocks:              32,
	Warps:               64,
}

// SMLimits are one architecture's per-SM residency limits.
type SMLimits struct {
	Registers, RegisterGranularity                                   int
	SmemBytes, SmemPerBlockBytes, SmemReservedBytes, SmemGranularity int
	Threads, Blocks, Warps                                           int
}

// Occupancy is how many blocks of a launch fit on one SM, and what limits them.
type Occupancy struct {
	BlocksPerSM int
	WarpsPerSM  int
	Limit       string // "registers", "shared memory", "threads", "warps", "blocks"
}

func roundUp(v, unit int) int { return (v + unit - 1) / unit * unit }

// Occupancy computes the resident blocks per SM of a kernel using registers per thread, with
// blockThreads threads and smemBytes of shared memory (static + dynamic) per block.
func (s SMLimits) Occupancy(registers, blockThreads, smemBytes int) (Occupancy, error) {
	if blockThreads < 1 || blockThreads > 1024 {
		return Occupancy{}, fmt.Errorf("block of %d threads is not in 1..1024", blockThreads)
	}
	if smemBytes > s.SmemPerBlockBytes {
		return Occupancy{}, fmt.Errorf("%d bytes of shared memory per block are over the %d an SM allows", smemBytes, s.SmemPerBlockBytes)
	}
	warps := (blockThreads + 31) / 32
	best, limit := s.Blocks, "blocks"
	try := func(n int, why string) {
		if n < best {
			best, limit = n, why
		}
	}
	// The hardware's own limits first, so that a tie names them rather than the kernel.
	try(s.Threads/(warps*32), "threads")
	try(s.Warps/warps, "warps")
	if registers > 0 {
		perWarp := roundUp(registers*32, s.RegisterGranularity)
		try(s.Registers/perWarp/warps, "registers")
	}
	try(s.SmemBytes/roundUp(smemBytes+s.SmemReservedBytes, s.SmemGranularity), "shared memory")
	return Occupancy{BlocksPerSM: best, WarpsPerSM: best * warps, Limit: limit}, nil
}

// demangle turns mangled names into normalized readable ones with c++filt -p (binutils; any
// machine with g++ has it), else cu++filt -p (the CUDA toolkit's).
func demangle(mangled []string) (map[string]string, error) {
	if len(mangled) == 0 {
		return map[string]string{}, nil
	}
	var lastErr error
	for _, tool := range []string{"c++filt", "cu++filt"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			lastErr = err
			continue
		}
		cmd := exec.Command(path, "-p")
		cmd.Stdin = strings.NewReader(strings.Join(mangled, "\n") + "\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			lastErr = fmt.Errorf("%s: %v: %s", tool, err, strings.TrimSpace(stderr.String()))
			continue
		}
		lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
		if len(lines) != len(mangled) {
			lastErr = fmt.Errorf("%s gave %d names for %d", tool, len(lines), len(mangled))
			continue
		}
		out := make(map[string]string, len(mangled))
		for i, m := range mangled {
			out[m] = readableName(lines[i])
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot demangle kernel names (need c++filt from binutils, or cu++filt): %v", lastErr)
}

var (
	reAnon    = regexp.MustCompile(`\(anonymous namespace\)::|<unnamed>::`)
	reIntCast = regexp.MustCompile(`\((?:int|unsigned int|long|bool)\)(-?[0-9]+)`)
)

// readableName is a demangled kernel name as the table shows it: without the return type and
// the anonymous namespace every kernel of ours sits in.
func readableName(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "void ")
	return reAnon.ReplaceAllString(s, "")
}

// normalizeName makes c++filt's and cu++filt's spellings of a kernel one string, the form the
// manifest and db_launch_info use: no anonymous namespace, no return type, no spaces after
// commas: "linear_gemv_kernel<__nv_bfloat16,1>".
func normalizeName(s string) string {
	s = readableName(s)
	s = reIntCast.ReplaceAllString(s, "$1")
	return strings.Join(strings.Fields(s), "")
}
