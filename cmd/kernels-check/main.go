// Command kernels-check is the static performance gate of the CUDA kernels (`make
// kernels-check`). It reads the sm_90 SASS of the built objects (cuobjdump) and ptxas's
// resource report, and for every hot loop of kernels/perf-manifest.json counts the 16-byte
// global or cp.async loads a warp has in flight at every wait of the loop's trip (the least of
// them is what the manifest's minimum holds; the first stall's count is a column beside it),
// with the kernel's registers, shared memory, blocks and warps per SM. It then plans the
// launches of every linear and attention call of a Llama-3-8B and -70B decode step through the
// kernels library (db_linear_launches, db_attention_launches) as a 132-SM H200 would, and gives
// each launch's waves. It prints both tables, writes them as JSON, and exits 1 when a loop falls
// below its minimum (or the manifest names a kernel or loop the SASS lacks) or a linear launch
// fails the wave rule (WaveRule).
//
//	kernels-check [flags] build/cuda/*.o
//	kernels-check -sass listing.sass [flags]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/decodebench/decodebench/cgo"
)

// Report is build/kernels-check.json.
type Report struct {
	Arch     string       `json:"arch"`
	Manifest string       `json:"manifest"`
	OK       bool         `json:"ok"` // every loop at or above its minimum
	Loops    []LoopResult `json:"loops"`
	Unlisted []string     `json:"unlisted_kernels,omitempty"` // 16-byte loads in a loop, not in the manifest
	// Waves: every launch of the decode-step calls, planned by Library for SMCount SMs.
	Library      string `json:"library,omitempty"`
	SMCount      int    `json:"sm_count"`
	PlannerSMs   int    `json:"planner_sm_count,omitempty"` // what the library's planner saw
	Waves        []Wave `json:"waves,omitempty"`
	WavesSkipped string `json:"waves_skipped,omitempty"`
	// WaveFailures names the linear and attention launches the wave rule fails (see WaveRule).
	WavesOK      bool     `json:"waves_ok"`
	WaveFailures []string `json:"wave_failures,omitempty"`
}

// EnvEmuSMCount is the emulator's SM count setting (kernels/emu): the planner then splits work
// as it would on a card of that many SMs.
const EnvEmuSMCount = "DB_EMU_SM_COUNT"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kernels-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	manifestPath := fs.String("manifest", "kernels/perf-manifest.json", "the hot loops and their minimums")
	sassPath := fs.String("sass", "", "a cuobjdump -sass listing to read instead of running cuobjdump on the objects")
	ptxasPath := fs.String("ptxas", "build/kernels-ptxas.log", "nvcc -Xptxas -v output of the same build")
	jsonPath := fs.String("json", "build/kernels-check.json", "where to write the results (\"\" for nowhere)")
	library := fs.String("library", "lib/libdecodebench_emu.so", "kernels library whose planner lists the launches for the waves (\"none\" to skip them)")
	smCount := fs.Int("sm-count", 132, "SMs of the card the waves are for (an H200 has 132)")
	list := fs.Bool("list", false, "list every loop with 16-byte loads of every kernel (to write the manifest) and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: kernels-check [flags] OBJECT.o...  |  kernels-check -sass LISTING [flags]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kernels-check: %v\n", err)
		return 2
	}
	if *smCount < 1 {
		return fail(fmt.Errorf("-sm-count %d is not >= 1", *smCount))
	}
	if (*sassPath == "") == (fs.NArg() == 0) {
		fs.Usage()
		return fail(errors.New("give either object files or -sass, not both or neither"))
	}
	m, err := LoadManifest(*manifestPath)
	if err != nil {
		return fail(err)
	}
	listing, err := readSASS(*sassPath, fs.Args(), m.Arch)
	if err != nil {
		return fail(err)
	}
	funcs, err := ParseSASS(bytes.NewReader(listing))
	if err != nil {
		return fail(err)
	}
	if len(funcs) == 0 {
		return fail(fmt.Errorf("no %s functions in the SASS (built without -gencode arch=compute_90,code=sm_90?)", m.Arch))
	}
	logFile, err := os.Open(*ptxasPath)
	if err != nil {
		return fail(fmt.Errorf("%v (run `make kernels` first: it writes the ptxas log)", err))
	}
	res, err := ParsePtxasLog(logFile, m.Arch)
	logFile.Close()
	if err != nil {
		return fail(fmt.Errorf("%s: %v", *ptxasPath, err))
	}
	mangled := make([]string, 0, len(funcs)+len(res))
	seen := map[string]bool{}
	for _, f := range funcs {
		if !seen[f.Mangled] {
			seen[f.Mangled] = true
			mangled = append(mangled, f.Mangled)
		}
	}
	for name := range res {
		if !seen[name] {
			seen[name] = true
			mangled = append(mangled, name)
		}
	}
	sort.Strings(mangled)
	names, err := demangle(mangled)
	if err != nil {
		return fail(err)
	}
	kernels := NewKernels(funcs, res, names)
	if *list {
		listLoops(stdout, kernels)
		return 0
	}

	rep := Report{Arch: m.Arch, Manifest: *manifestPath, SMCount: *smCount}
	rep.Loops = CheckLoops(m, kernels, SM90)
	rep.Unlisted = Unlisted(m, kernels)
	rep.OK = true
	for _, r := range rep.Loops {
		rep.OK = rep.OK && r.OK
	}
	printLoops(stdout, rep)

	if *library == "none" {
		rep.WavesSkipped = "-library none"
	} else {
		rep.Library = *library
		rep.PlannerSMs, rep.Waves, err = planWithLibrary(*library, *smCount, kernels)
		if err != nil {
			rep.WavesSkipped = err.Error()
		}
	}
	rep.WavesOK = true
	for _, v := range rep.Waves {
		if v.Rule == RuleFail {
			rep.WavesOK = false
			what := fmt.Sprintf("batch %d", v.Batch)
			if v.Weight != cgo.WeightDense {
				what += " " + v.Weight.String()
			}
			if v.Kind != "linear" {
				what = fmt.Sprintf("batch %d ctx %d", v.Batch, v.Context)
			}
			rep.WaveFailures = append(rep.WaveFailures, fmt.Sprintf("%s %s %s: %s %.0f%%", v.Model, v.Name, what, shortKernel(v.Kernel), 100*v.Fill))
		}
	}
	printWaves(stdout, rep)

	if *jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fail(err)
		}
		if err := os.MkdirAll(filepath.Dir(*jsonPath), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(*jsonPath, append(data, '\n'), 0o644); err != nil {
			return fail(err)
		}
	}
	if !rep.OK {
		fmt.Fprintf(stdout, "kernels-check: FAIL: a loop is below its minimum or missing (see %s)\n", *manifestPath)
	}
	if !rep.WavesOK {
		fmt.Fprintf(stdout, "kernels-check: FAIL: %d launches of the decode steps fill under %.0f%% of the card's block slots (wave rule)\n", len(rep.WaveFailures), 100*WholeWaves)
	}
	if !rep.OK || !rep.WavesOK {
		return 1
	}
	fmt.Fprintf(stdout, "kernels-check: ok: %d loops at or above their minimums; every linear and attention launch of the decode steps fills whole waves or is exempt\n", len(rep.Loops))
	return 0
}

// readSASS reads the listing file, or runs cuobjdump on each object (it takes one file at a
// time) for arch.
func readSASS(path string, objects []string, arch string) ([]byte, error) {
	if path != "" {
		return os.ReadFile(path)
	}
	tool, err := exec.LookPath("cuobjdump")
	if err != nil {
		return nil, fmt.Errorf("cuobjdump (CUDA toolkit) not found: %v", err)
	}
	var listing bytes.Buffer
	for _, obj := range objects {
		cmd := exec.Command(tool, "-sass", "-arch", arch, obj)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &listing, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("cuobjdump -sass -arch %s %s: %v: %s", arch, obj, err, strings.TrimSpace(stderr.String()))
		}
	}
	return listing.Bytes(), nil
}

// planWithLibrary opens the kernels library (the emulator plans as a card of sms SMs would
// when it honours DB_EMU_SM_COUNT) and plans the waves of every decode-step call.
func planWithLibrary(path string, sms int, kernels *Kernels) (int, []Wave, error) {
	if os.Getenv(EnvEmuSMCount) == "" {
		os.Setenv(EnvEmuSMCount, fmt.Sprint(sms))
	}
	lib, err := cgo.OpenPath(path)
	if err != nil {
		return 0, nil, err
	}
	for _, fn := range []string{"db_linear_launches", "db_attention_launches"} {
		if !lib.HasFunction(fn) {
			return 0, nil, fmt.Errorf("%s does not export %s yet: the planners do not list their launches, so no waves", path, fn)
		}
	}
	props, err := lib.DeviceProps(0)
	if err != nil {
		return 0, nil, err
	}
	dev, err := lib.OpenDevice(0)
	if err != nil {
		return 0, nil, err
	}
	defer dev.Close()
	calls, err := StepCalls()
	if err != nil {
		return 0, nil, err
	}
	waves, err := PlanWaves(dev, calls, kernels, SM90, sms)
	return props.SMCount, waves, err
}

func printLoops(w io.Writer, rep Report) {
	fmt.Fprintf(w, "Static gate (%s): 16-byte loads a warp has in flight at the emptiest wait of each hot loop's trip\n", rep.Arch)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kernel\tloop\tin flight\tmin\tok\tat\twaits\tfirst stall\tper trip\tregs\tsmem\tthreads\tblocks/SM\twarps/SM\tKiB/SM\tfirst wait")
	for _, r := range rep.Loops {
		ok := "ok"
		if !r.OK {
			ok = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d (%s)\t%d\t%.0f\t%s\n", r.Kernel, r.Loop, r.LoopHead,
			r.LoadsInFlight, r.Minimum, ok, r.LeastWait, r.Waits, r.FirstStallLoads, r.LoadsPerTrip, r.Registers, r.Smem, r.BlockThreads,
			r.BlocksPerSM, r.Limit, r.WarpsPerSM, r.KiBInFlightPerSM, r.FirstWait)
	}
	tw.Flush()
	for _, r := range rep.Loops {
		if r.Error != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Kernel, r.Error)
		}
	}
	if n := len(rep.Unlisted); n > 0 {
		shown := rep.Unlisted[:min(n, 3)]
		fmt.Fprintf(w, "  %d kernels with 16-byte loads in a loop are not in the manifest (all in the JSON; -list measures them): %s", n, strings.Join(shown, "; "))
		if n > len(shown) {
			fmt.Fprint(w, "; ...")
		}
		fmt.Fprintln(w)
	}
}

func printWaves(w io.Writer, rep Report) {
	if rep.WavesSkipped != "" {
		fmt.Fprintf(w, "Waves: skipped: %s\n", rep.WavesSkipped)
		return
	}
	fmt.Fprintf(w, "Waves on %d SMs (planned by %s", rep.SMCount, rep.Library)
	if rep.PlannerSMs != rep.SMCount {
		fmt.Fprintf(w, ", whose planner saw %d SMs: set %s or use a library that honours it", rep.PlannerSMs, EnvEmuSMCount)
	}
	fmt.Fprintln(w, ")")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tcall\tbatch\tshape\tkernel\tblocks\tunits\tthreads\tblocks/SM\twaves\tlast wave\tfill\trule")
	for _, v := range rep.Waves {
		shape := fmt.Sprintf("n=%d k=%d", v.N, v.K)
		if v.Weight != cgo.WeightDense {
			shape += " " + v.Weight.String()
			if v.Weight.Grouped() {
				shape += fmt.Sprintf(" g%d", v.Group)
			}
		}
		if v.Kind != "linear" {
			shape = fmt.Sprintf("ctx=%d splits=%d", v.Context, v.Splits)
		}
		if v.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t\t\t\t\t%s\n", v.Model, v.Name, v.Batch, shape, v.Kernel, v.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%.2f\t%.0f%%\t%.0f%%\t%s\n", v.Model, v.Name, v.Batch, shape, v.Kernel,
			v.Blocks, v.Units, v.BlockThreads, v.BlocksPerSM, v.Waves, 100*v.LastWave, 100*v.Fill, v.Rule)
	}
	tw.Flush()
	if n := len(rep.WaveFailures); n > 0 {
		fmt.Fprintf(w, "  %d launches fill under %.0f%% of the card (wave rule): %s\n", n, 100*WholeWaves, strings.Join(rep.WaveFailures, "; "))
	}
}

// listLoops prints every loop holding 16-byte loads, kernel by kernel.
func listLoops(w io.Writer, k *Kernels) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kernel\tloop\thead\tloads (own)\tin flight (least)\tfirst stall\tper trip\tregs\tfirst wait")
	for _, name := range k.names {
		f, _ := k.Function(name)
		res, _ := k.Resources(name)
		for i, l := range Loops(f) {
			if l.Loads == 0 {
				continue
			}
			fl := MeasureInFlight(f, l)
			fmt.Fprintf(tw, "%s\t#%d\t0x%04x\t%d\t%d\t%d\t%d\t%d\t0x%04x %s\n", name, i+1, l.Head, l.Loads, fl.MinLoads, fl.Loads, fl.PerTrip,
				res.Registers, fl.ConsumerAddr, fl.Consumer)
		}
	}
	tw.Flush()
}
