package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Manifest is kernels/perf-manifest.json: the hot loops the gate holds to a minimum.
type Manifest struct {
	Arch  string          `json:"arch"` // the architecture whose SASS and ptxas figures are read: "sm_90"
	Loops []ManifestEntry `json:"loops"`
}

// ManifestEntry is one hot loop and the least it must keep in flight.
type ManifestEntry struct {
	Kernel string       `json:"kernel"` // demangled, without arguments: "linear_gemv_kernel<__nv_bfloat16, 1>"
	Loop   LoopSelector `json:"loop"`   // "most-loads" (the default) or "#n"
	// Minimum is the fewest 16-byte loads a warp may have in flight at any wait of the loop's
	// trip (the least over its waits).
	Minimum int `json:"minimum"`
	// BlockThreads and DynamicSmemBytes are the block the planner launches the kernel with at
	// the shapes that matter (for occupancy; the waves section reads each launch's own).
	BlockThreads     int    `json:"block_threads"`
	DynamicSmemBytes int    `json:"dynamic_smem_bytes"`
	Why              string `json:"why,omitempty"`
}

// LoadManifest reads and checks a manifest.
func LoadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if m.Arch == "" {
		m.Arch = "sm_90"
	}
	if len(m.Loops) == 0 {
		return nil, fmt.Errorf("%s lists no loops", path)
	}
	for i, e := range m.Loops {
		switch {
		case e.Kernel == "":
			return nil, fmt.Errorf("%s: loop %d has no kernel", path, i+1)
		case e.Minimum < 1:
			return nil, fmt.Errorf("%s: %s: minimum %d is not >= 1", path, e.Kernel, e.Minimum)
		case e.BlockThreads < 1 || e.BlockThreads > 1024:
			return nil, fmt.Errorf("%s: %s: block_threads %d is not in 1..1024", path, e.Kernel, e.BlockThreads)
		case e.DynamicSmemBytes < 0:
			return nil, fmt.Errorf("%s: %s: dynamic_smem_bytes %d is negative", path, e.Kernel, e.DynamicSmemBytes)
		}
		if err := e.Loop.valid(); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, e.Kernel, err)
		}
	}
	return &m, nil
}

// LoopResult is one manifest loop as the gate measured it: an object of kernels-check.json.
type LoopResult struct {
	Kernel   string       `json:"kernel"`
	Loop     LoopSelector `json:"loop"`
	LoopHead string       `json:"loop_head,omitempty"` // SASS address of the loop's first instruction
	LoopEnd  string       `json:"loop_end,omitempty"`  // and of its backward branch
	// LoadsInFlight is the least over the trip's waits of the 16-byte loads in flight there
	// (what the minimum holds); FirstStallLoads is the count at the first wait alone.
	LoadsInFlight   int            `json:"loads_in_flight"`
	LeastWait       string         `json:"least_wait,omitempty"` // where that least is: "0x1c00"
	Waits           int            `json:"waits"`                // instructions of the trip that wait for a load
	FirstStallLoads int            `json:"first_stall_loads"`
	LoadsPerTrip    int            `json:"loads_per_trip"`
	FirstWait       string         `json:"first_wait,omitempty"` // "0x0780 scoreboard SB4"
	LoadsByOp       map[string]int `json:"loads_by_opcode,omitempty"`
	Minimum         int            `json:"minimum"`
	OK              bool           `json:"ok"`
	Registers       int            `json:"registers"`
	Smem            int            `json:"smem"` // static + the manifest's dynamic bytes per block
	SpillBytes      int            `json:"spill_bytes"`
	BlockThreads    int            `json:"block_threads"`
	BlocksPerSM     int            `json:"blocks_per_sm"`
	WarpsPerSM      int            `json:"warps_per_sm"`
	Limit           string         `json:"occupancy_limit,omitempty"`
	// KiBInFlightPerSM is LoadsInFlight x 16 B x 32 lanes x WarpsPerSM / 1024: what the SM has
	// requested from memory at the loops' emptiest waits (an H200 SM wants about 40-48 KiB).
	KiBInFlightPerSM float64 `json:"kib_in_flight_per_sm"`
	Error            string  `json:"error,omitempty"`
}

// Kernels is what the gate knows of every kernel: its SASS and its ptxas resources.
type Kernels struct {
	byKey map[string]*Function
	res   map[string]Resources // by normalized name
	names []string             // readable names, sorted
}

// NewKernels joins the functions of the SASS with ptxas's resources (by mangled name) and
// names them with names (mangled -> readable).
func NewKernels(funcs []*Function, res map[string]Resources, names map[string]string) *Kernels {
	k := &Kernels{byKey: map[string]*Function{}, res: map[string]Resources{}}
	for _, f := range funcs {
		if n, ok := names[f.Mangled]; ok {
			f.Name = n
		} else if f.Name == "" {
			f.Name = f.Mangled
		}
		k.byKey[normalizeName(f.Name)] = f
		k.names = append(k.names, f.Name)
	}
	for mangled, r := range res {
		n, ok := names[mangled]
		if !ok {
			n = mangled
		}
		k.res[normalizeName(n)] = r
	}
	sort.Strings(k.names)
	return k
}

// Function finds a kernel by its demangled name (spaces and int casts do not matter).
func (k *Kernels) Function(name string) (*Function, bool) {
	f, ok := k.byKey[normalizeName(name)]
	return f, ok
}

// Resources finds a kernel's ptxas figures by its demangled name.
func (k *Kernels) Resources(name string) (Resources, bool) {
	r, ok := k.res[normalizeName(name)]
	return r, ok
}

// similar lists known kernels sharing name's template name, to help fix a stale manifest.
func (k *Kernels) similar(name string) []string {
	stem, _, _ := strings.Cut(normalizeName(name), "<")
	var out []string
	for _, n := range k.names {
		if s, _, _ := strings.Cut(normalizeName(n), "<"); s == stem {
			out = append(out, n)
		}
	}
	return out
}

// CheckLoops measures every manifest loop. A kernel or loop the SASS lacks is a failed result
// with the reason: a stale manifest fails the gate as loudly as a slow loop.
func CheckLoops(m *Manifest, k *Kernels, limits SMLimits) []LoopResult {
	var results []LoopResult
	for _, e := range m.Loops {
		loop := e.Loop
		if loop == "" {
			loop = MostLoads
		}
		r := LoopResult{Kernel: e.Kernel, Loop: loop, Minimum: e.Minimum, BlockThreads: e.BlockThreads}
		f, ok := k.Function(e.Kernel)
		if !ok {
			r.Error = fmt.Sprintf("no kernel %q in the %s SASS", e.Kernel, m.Arch)
			if s := k.similar(e.Kernel); len(s) > 0 {
				r.Error += " (there are: " + strings.Join(s, "; ") + ")"
			}
			results = append(results, r)
			continue
		}
		if res, ok := k.Resources(e.Kernel); ok {
			r.Registers, r.SpillBytes = res.Registers, res.SpillStores+res.SpillLoads
			r.Smem = res.SmemBytes + e.DynamicSmemBytes
			occ, err := limits.Occupancy(res.Registers, e.BlockThreads, r.Smem)
			if err != nil {
				r.Error = err.Error()
			}
			r.BlocksPerSM, r.WarpsPerSM, r.Limit = occ.BlocksPerSM, occ.WarpsPerSM, occ.Limit
		} else {
			r.Error = fmt.Sprintf("ptxas reported nothing for %q on %s", e.Kernel, m.Arch)
		}
		l, err := loop.Select(f, Loops(f))
		if err != nil {
			r.Error = err.Error()
			results = append(results, r)
			continue
		}
		fl := MeasureInFlight(f, l)
		r.LoopHead, r.LoopEnd = fmt.Sprintf("0x%04x", l.Head), fmt.Sprintf("0x%04x", l.End)
		r.LoadsInFlight, r.FirstStallLoads, r.LoadsPerTrip, r.LoadsByOp = fl.MinLoads, fl.Loads, fl.PerTrip, fl.ByOp
		r.Waits = fl.Waits
		if fl.ConsumerAddr >= 0 {
			r.FirstWait = fmt.Sprintf("0x%04x %s", fl.ConsumerAddr, fl.Consumer)
			r.LeastWait = fmt.Sprintf("0x%04x", fl.MinAddr)
		} else {
			r.FirstWait = "none in the loop"
		}
		r.KiBInFlightPerSM = float64(fl.MinLoads*16*32*r.WarpsPerSM) / 1024
		r.OK = r.Error == "" && fl.MinLoads >= e.Minimum
		results = append(results, r)
	}
	return results
}

// Unlisted names the kernels with 16-byte loads in a loop that the manifest does not list:
// new hot loops the gate does not hold yet.
func Unlisted(m *Manifest, k *Kernels) []string {
	listed := map[string]bool{}
	for _, e := range m.Loops {
		listed[normalizeName(e.Kernel)] = true
	}
	var out []string
	for key, f := range k.byKey {
		if listed[key] {
			continue
		}
		for _, l := range Loops(f) {
			if l.Loads > 0 {
				out = append(out, f.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
