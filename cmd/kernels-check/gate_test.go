package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

func parseFixture(t *testing.T, name string, dropControl bool) *Function {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if dropControl { // a listing with the first encoding word only: no scoreboards to read
		data = regexp.MustCompile(`(?m)^\s*/\* 0x[0-9a-f]{16} \*/\s*$\n`).ReplaceAll(data, nil)
	}
	funcs, err := ParseSASS(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) != 1 {
		t.Fatalf("%s: %d functions, want 1", name, len(funcs))
	}
	return funcs[0]
}

func inst(t *testing.T, f *Function, addr int) Inst {
	t.Helper()
	for _, in := range f.Insts {
		if in.Addr == addr {
			return in
		}
	}
	t.Fatalf("no instruction at 0x%04x", addr)
	return Inst{}
}

func TestControlWordsGiveScoreboards(t *testing.T) {
	f := parseFixture(t, "gemv-bf16-1.sass", false)
	load := inst(t, f, 0x06a0) // LDG.E.128.CONSTANT R32, [R44.64]
	if load.loadKind() != loadGlobal || load.destination() != 32 || load.Ctrl == nil || load.Ctrl.WriteBar != 2 {
		t.Fatalf("0x06a0 = %+v ctrl %+v, want a 16-byte load into R32 on scoreboard 2", load, load.Ctrl)
	}
	use := inst(t, f, 0x07c0) // SHF.L.U32 R4, R32.reuse, 0x10, RZ: the first reader of R32
	if use.Ctrl == nil || use.Ctrl.WaitMask != 1<<2 {
		t.Fatalf("0x07c0 ctrl %+v, want a wait on scoreboard 2 only", use.Ctrl)
	}
	if bra := inst(t, f, 0x1360); !bra.isBranch() || bra.Target != 0x0560 {
		t.Errorf("0x1360 = %+v, want the GEMV k loop's branch back to 0x0560", bra)
	}
}

func TestLoadsInFlight(t *testing.T) {
	cases := []struct {
		desc, fixture  string
		selector       LoopSelector
		dropControl    bool
		head           int
		inFlight, trip int
		consumer       string
	}{
		// ptxas issues 3 of the 8 W loads and 1 X load, then the first FMAs wait on SB4.
		{"GEMV bf16 batch 1", "gemv-bf16-1.sass", MostLoads, false, 0x0560, 4, 12, "scoreboard SB4"},
		{"GEMV bf16 batch 1, register dataflow only", "gemv-bf16-1.sass", MostLoads, true, 0x0560, 4, 12, "reads R28"},
		// The planted regression: one load, then its use.
		{"GEMV with #pragma unroll 1 on the load loop", "gemv-bf16-1-unroll1.sass", MostLoads, false, 0x0350, 1, 6, "scoreboard SB2"},
		// Double-buffered cp.async: this tile's copies and the last tile's are in flight at the
		// DEPBAR.LE SB0, 0x1.
		{"attention tile loop", "attention-bf16-128-4.sass", Pipeline, false, 0x22c0, 12, 6, "DEPBAR"},
		// The copy loop waits for nothing itself: all of a trip is in flight.
		{"attention copy loop", "attention-bf16-128-4.sass", MostLoads, false, 0x16e0, 4, 4, ""},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			f := parseFixture(t, c.fixture, c.dropControl)
			l, err := c.selector.Select(f, Loops(f))
			if err != nil {
				t.Fatal(err)
			}
			if l.Head != c.head {
				t.Errorf("loop head 0x%04x, want 0x%04x", l.Head, c.head)
			}
			got := MeasureInFlight(f, l)
			if got.Loads != c.inFlight || got.PerTrip != c.trip || got.Consumer != c.consumer {
				t.Errorf("in flight %d per trip %d first wait %q at 0x%04x, want %d, %d, %q",
					got.Loads, got.PerTrip, got.Consumer, got.ConsumerAddr, c.inFlight, c.trip, c.consumer)
			}
		})
	}
}

// A register double buffer in the label syntax of newer cuobjdumps: the load into R12 issued
// in one trip is consumed in the next, so two loads are in flight at the first use.
func TestCarriedLoadsAndLabels(t *testing.T) {
	listing := ` Function : _Z4testv
 /*0000*/ MOV R1, R2 ; /* 0x0000000000000000 */
.L_x_0:
 /*0010*/ LDG.E.128 R4, [R2.64] ; /* 0x0000000000000000 */
 /*0020*/ FFMA R8, R12, R12, R8 ; /* 0x0000000000000000 */
 /*0030*/ LDG.E.128 R12, [R2.64+0x10] ; /* 0x0000000000000000 */
 /*0040*/ FFMA R9, R4, R4, R9 ; /* 0x0000000000000000 */
 /*0050*/ @P0 BRA ` + "`" + `(.L_x_0) ; /* 0x0000000000000000 */
 /*0060*/ EXIT ; /* 0x0000000000000000 */
 /*0070*/ BRA 0x70; /* 0x0000000000000000 */
`
	funcs, err := ParseSASS(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	loops := Loops(funcs[0])
	if len(loops) != 1 || loops[0].Head != 0x10 || loops[0].End != 0x50 || loops[0].Loads != 2 {
		t.Fatalf("loops = %+v, want one at 0x0010..0x0050 with 2 loads (the trap at 0x70 is no loop)", loops)
	}
	got := MeasureInFlight(funcs[0], loops[0])
	if got.Loads != 2 || got.ConsumerAddr != 0x20 {
		t.Errorf("in flight %d at 0x%04x, want 2 at 0x0020", got.Loads, got.ConsumerAddr)
	}
}

func TestOccupancy(t *testing.T) {
	cases := []struct {
		desc                string
		regs, threads, smem int
		blocks, warps       int
		limit               string
	}{
		{"GEMV: 56 registers", 56, 128, 0, 9, 36, "registers"},
		{"probe: 32 registers, 256 threads", 32, 256, 0, 8, 64, "threads"},
		{"MMA attention: 76 KiB of shared memory", 128, 128, 77952, 2, 8, "shared memory"},
		{"a tiny kernel hits the block limit", 16, 32, 0, 32, 32, "blocks"},
		{"255 registers", 255, 256, 0, 1, 8, "registers"},
	}
	for _, c := range cases {
		got, err := SM90.Occupancy(c.regs, c.threads, c.smem)
		if err != nil || got.BlocksPerSM != c.blocks || got.WarpsPerSM != c.warps || got.Limit != c.limit {
			t.Errorf("%s: %+v, %v; want %d blocks, %d warps, limited by %s", c.desc, got, err, c.blocks, c.warps, c.limit)
		}
	}
	if _, err := SM90.Occupancy(32, 128, 228*1024); err == nil {
		t.Error("a block of 228 KiB of shared memory fits, want an error")
	}
}

func TestParsePtxasLog(t *testing.T) {
	f, err := os.Open("testdata/ptxas.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParsePtxasLog(f, "sm_90")
	if err != nil {
		t.Fatal(err)
	}
	gemv := res["_ZN41_GLOBAL__N__18395383_9_linear_cu_326a3bd118linear_gemv_kernelI13__nv_bfloat16Li1EEEvPK5uint4S4_PT_Pfiiii"]
	if gemv.Registers != 56 || gemv.SmemBytes != 0 {
		t.Errorf("GEMV = %+v, want the sm_90 figures (56 registers), not sm_80's", gemv)
	}
	attn := res["_ZN45_GLOBAL__N__afc995af_12_attention_cu_643a655c23attention_decode_kernelI13__nv_bfloat16Li128ELi4EEEvNS_8AttnArgsE"]
	if attn.Registers != 120 || attn.SmemBytes != 4112 || attn.StackBytes != 8 {
		t.Errorf("attention = %+v, want 120 registers, 4112 bytes smem, 8 bytes stack", attn)
	}
}

func TestNormalizeName(t *testing.T) {
	a := normalizeName("void (anonymous namespace)::linear_gemv_kernel<__nv_bfloat16, 1>")
	b := normalizeName("<unnamed>::linear_gemv_kernel<__nv_bfloat16, (int)1>")
	c := normalizeName("linear_gemv_kernel<__nv_bfloat16,1>")
	if a != b || b != c {
		t.Errorf("c++filt %q, cu++filt %q and the manifest's %q differ", a, b, c)
	}
}

func TestWaves(t *testing.T) {
	for _, c := range []struct {
		blocks         int64
		perWave        int
		waves, lastPct float64
	}{{264, 264, 1, 100}, {285, 264, 285.0 / 264, 100 * 21.0 / 264}, {512, 264, 512.0 / 264, 100 * 248.0 / 264}} {
		w, last := Waves(c.blocks, c.perWave)
		if abs(w-c.waves) > 1e-9 || abs(100*last-c.lastPct) > 1e-9 {
			t.Errorf("Waves(%d, %d) = %v, %v; want %v, %v%%", c.blocks, c.perWave, w, last, c.waves, c.lastPct)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// fakePlanner lists fixed launches, as db_linear_launches and db_attention_launches would.
type fakePlanner struct {
	linear, attention []cgo.LaunchInfo
	err               error
}

func (p fakePlanner) LinearLaunches(cgo.LinearParams) ([]cgo.LaunchInfo, error) {
	return p.linear, p.err
}
func (p fakePlanner) AttentionLaunches(cgo.AttentionParams) ([]cgo.LaunchInfo, error) {
	return p.attention, p.err
}

func TestPlanWaves(t *testing.T) {
	kernels := NewKernels(nil, map[string]Resources{"gemv": {Registers: 56}, "attn": {Registers: 120}},
		map[string]string{"gemv": "linear_gemv_kernel<__nv_bfloat16, 1>", "attn": "attention_decode_kernel<__nv_bfloat16, 128, 4>"})
	planner := fakePlanner{
		// n = 10240 rows, 8 per block: 1280 blocks of 9 per SM on 132 SMs = 1.08 waves.
		linear:    []cgo.LaunchInfo{{Kernel: "linear_gemv_kernel<__nv_bfloat16, 1>", GridX: 1280, GridY: 1, GridZ: 1, BlockThreads: 128}},
		attention: []cgo.LaunchInfo{{Kernel: "attention_decode_kernel<__nv_bfloat16,128,4>", GridX: 8, GridY: 66, GridZ: 1, BlockThreads: 128, SmemBytes: 39472}, {Kernel: "unknown_kernel", GridX: 1, GridY: 1, GridZ: 1, BlockThreads: 64}},
	}
	calls := []Call{{Model: "m", Name: "qkv_proj", Kind: "linear", Batch: 1, N: 10240, K: 8192},
		{Model: "m", Name: "attention", Kind: "attention", Batch: 1, Context: 8192, QHeads: 64, KVHeads: 8, HeadDim: 128}}
	waves, err := PlanWaves(planner, calls, kernels, SM90, 132)
	if err != nil {
		t.Fatal(err)
	}
	if len(waves) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(waves), waves)
	}
	if w := waves[0]; w.BlocksPerSM != 9 || abs(w.Waves-1280.0/(9*132)) > 1e-9 || w.Error != "" {
		t.Errorf("GEMV row %+v, want 9 blocks per SM and 1.08 waves", w)
	}
	if w := waves[1]; w.BlocksPerSM != 4 || w.Blocks != 528 || abs(w.Waves-1) > 1e-9 || abs(w.LastWave-1) > 1e-9 {
		t.Errorf("attention row %+v, want 528 blocks at 4 per SM: exactly one wave", w)
	}
	if w := waves[2]; !strings.Contains(w.Error, "unknown_kernel") {
		t.Errorf("a launch of a kernel ptxas did not report: %+v, want an error naming it", w)
	}
	missing := fakePlanner{err: &cgo.NotExportedError{Function: "db_linear_launches", Library: "lib.so"}}
	if _, err := PlanWaves(missing, calls, kernels, SM90, 132); !errors.Is(err, cgo.ErrNotExported) {
		t.Errorf("PlanWaves without db_linear_launches = %v, want ErrNotExported", err)
	}
}

func TestStepCallsCoverBothModels(t *testing.T) {
	calls, err := StepCalls()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.Model+" "+c.Name] = true
	}
	for _, want := range []string{"Llama-3-8B qkv_proj", "Llama-3-8B lm_head", "Llama-3-70B down_proj", "Llama-3-70B attention"} {
		if !seen[want] {
			t.Errorf("no %s call among %d", want, len(calls))
		}
	}
}

// The whole gate on the fixtures: passes on today's GEMV, fails on the planted regression and
// writes what it measured.
func TestGateEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("c++filt"); err != nil {
		if _, err := exec.LookPath("cu++filt"); err != nil {
			t.Skip("no c++filt or cu++filt to demangle the fixtures' names")
		}
	}
	dir := t.TempDir()
	// The old GEMV's trip waits 7 times: 4 loads in flight at the first, 1 at the emptiest
	// (0x0b50); with #pragma unroll 1 on its load loop, 1 and 1. The gate holds the least.
	for _, c := range []struct {
		fixture       string
		minimum, code int
		least, first  int
	}{{"gemv-bf16-1.sass", 1, 0, 1, 4}, {"gemv-bf16-1.sass", 2, 1, 1, 4}, {"gemv-bf16-1-unroll1.sass", 1, 0, 1, 1}} {
		manifest := filepath.Join(dir, "manifest.json")
		if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`{"arch": "sm_90", "loops": [
	  {"kernel": "linear_gemv_kernel<__nv_bfloat16, 1>", "loop": "most-loads", "minimum": %d, "block_threads": 128}]}`, c.minimum)), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, c.fixture+".json")
		var stdout, stderr bytes.Buffer
		code := run([]string{"-manifest", manifest, "-sass", filepath.Join("testdata", c.fixture), "-ptxas", "testdata/ptxas.log",
			"-json", out, "-library", "none"}, &stdout, &stderr)
		if code != c.code {
			t.Errorf("%s at minimum %d: exit %d, want %d\n%s%s", c.fixture, c.minimum, code, c.code, stdout.String(), stderr.String())
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep Report
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Loops) != 1 {
			t.Fatalf("%s: %d loops in the JSON, want 1", c.fixture, len(rep.Loops))
		}
		l := rep.Loops[0]
		if l.LoadsInFlight != c.least || l.FirstStallLoads != c.first || l.OK != (c.code == 0) || l.Minimum != c.minimum ||
			l.Registers != 56 || l.BlocksPerSM != 9 || l.WarpsPerSM != 36 {
			t.Errorf("%s: %+v, want %d in flight at the emptiest wait, %d at the first, 56 registers, 9 blocks and 36 warps per SM",
				c.fixture, l, c.least, c.first)
		}
		if !strings.Contains(stdout.String(), "Waves: skipped") {
			t.Errorf("%s: the table does not say the waves were skipped:\n%s", c.fixture, stdout.String())
		}
	}
}

func TestManifestErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ desc, body, want string }{
		{"no loops", `{"arch": "sm_90", "loops": []}`, "no loops"},
		{"a bad selector", `{"loops": [{"kernel": "k", "loop": "hottest", "minimum": 1, "block_threads": 128}]}`, `"hottest"`},
		{"a zero minimum", `{"loops": [{"kernel": "k", "minimum": 0, "block_threads": 128}]}`, "minimum 0"},
		{"no block size", `{"loops": [{"kernel": "k", "minimum": 2}]}`, "block_threads 0"},
		{"an unknown field", `{"loops": [{"kernel": "k", "minimum": 2, "block_threads": 32, "minimun": 3}]}`, "minimun"},
	} {
		path := filepath.Join(dir, "m.json")
		os.WriteFile(path, []byte(c.body), 0o644)
		if _, err := LoadManifest(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %s", c.desc, err, c.want)
		}
	}
}

// The waves section end to end, through a library that lists its launches (the fake one of
// package cgo): every decode-step call is planned and each launch gets its waves.
func TestGateWavesThroughALibrary(t *testing.T) {
	if _, err := exec.LookPath("c++filt"); err != nil {
		t.Skip("no c++filt to demangle the fixtures' names")
	}
	lib := cgotest.FakeLibrary(t, "libdecodebench_launches.so", "FAKE_LAUNCHES")
	dir := t.TempDir()
	manifest := filepath.Join(dir, "manifest.json")
	os.WriteFile(manifest, []byte(`{"loops": [{"kernel": "linear_gemv_kernel<__nv_bfloat16, 1>", "minimum": 1, "block_threads": 128}]}`), 0o644)
	out := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	// The fake's geometry (n / 8 blocks of 9 an SM) leaves most launches short of a wave: the
	// loops pass, the wave rule fails the gate.
	if code := run([]string{"-manifest", manifest, "-sass", "testdata/gemv-bf16-1.sass", "-ptxas", "testdata/ptxas.log",
		"-json", out, "-library", lib}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1 (the wave rule)\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "(wave rule)") || strings.Contains(stdout.String(), "below its minimum") {
		t.Errorf("want a wave-rule failure and no loop failure:\n%s", stdout.String())
	}
	data, _ := os.ReadFile(out)
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.WavesSkipped != "" || len(rep.Waves) == 0 {
		t.Fatalf("waves skipped (%q) or none: %s", rep.WavesSkipped, stdout.String())
	}
	if !rep.OK || rep.WavesOK || len(rep.WaveFailures) == 0 {
		t.Errorf("loops ok %v, waves ok %v, %d wave failures: want the loops ok and the waves failing", rep.OK, rep.WavesOK, len(rep.WaveFailures))
	}
	var qkv, attention, reduce bool
	for _, w := range rep.Waves {
		switch {
		case w.Model == "Llama-3-8B" && w.Name == "qkv_proj" && w.Batch == 1 && w.Launch == 0:
			// n = 6144: 768 x 2 blocks (the fake's n / 8, K split in 2) of 9 per SM on 132 SMs.
			qkv = w.Blocks == 1536 && w.BlocksPerSM == 9 && abs(w.Waves-1536.0/1188) < 1e-9
		case w.Kind == "attention" && w.Error == "":
			attention = w.Registers == 120 && w.BlocksPerSM == 4
		case strings.HasPrefix(w.Kernel, "linear_splitk_reduce_kernel"):
			reduce = strings.Contains(w.Error, "ptxas reported nothing")
		}
	}
	if !qkv || !attention || !reduce {
		t.Errorf("qkv row right %v, attention rows right %v, unknown reduce kernel named %v:\n%s", qkv, attention, reduce, stdout.String())
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	cgotest.RemoveFakes()
	os.Exit(code)
}

// The gate holds the least over a trip's stalls: here the first wait has 3 loads in flight
// (last trip's R12, this trip's R4 and R8), the second only 2; the third waits for R8, issued
// with R4 (one burst), which has landed with it: no stall.
func TestLeastOverTheWaits(t *testing.T) {
	listing := ` Function : _Z4testv
 /*0000*/ MOV R1, R2 ; /* 0x0000000000000000 */
.L_x_0:
 /*0010*/ LDG.E.128 R4, [R2.64] ; /* 0x0000000000000000 */
 /*0020*/ LDG.E.128 R8, [R2.64+0x10] ; /* 0x0000000000000000 */
 /*0030*/ FFMA R20, R12, R12, R20 ; /* 0x0000000000000000 */
 /*0040*/ FFMA R21, R4, R4, R21 ; /* 0x0000000000000000 */
 /*0050*/ LDG.E.128 R12, [R2.64+0x20] ; /* 0x0000000000000000 */
 /*0060*/ FFMA R22, R8, R8, R22 ; /* 0x0000000000000000 */
 /*0070*/ @P0 BRA ` + "`" + `(.L_x_0) ; /* 0x0000000000000000 */
 /*0080*/ EXIT ; /* 0x0000000000000000 */
 /*0090*/ BRA 0x90; /* 0x0000000000000000 */
`
	funcs, err := ParseSASS(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	got := MeasureInFlight(funcs[0], Loops(funcs[0])[0])
	if got.Loads != 3 || got.ConsumerAddr != 0x30 || got.MinLoads != 2 || got.MinAddr != 0x40 || got.Waits != 2 {
		t.Errorf("first stall %d at 0x%04x, least %d at 0x%04x over %d stalls; want 3 at 0x0030, 2 at 0x0040 over 2",
			got.Loads, got.ConsumerAddr, got.MinLoads, got.MinAddr, got.Waits)
	}
}

func TestWaveRule(t *testing.T) {
	// 8B qkv at batch 1: 3072 row pairs on 528 GEMV blocks (4 an SM): a unit a warp, 4 a block
	// is 768 units, 2 rounds, 73%; two warps a pair (1536 units) take 3 rounds, 97%.
	if f := WaveFill(768, 528, 528); abs(f-768.0/1056) > 1e-9 {
		t.Errorf("WaveFill(768, 528, 528) = %v", f)
	}
	if f := WaveFill(1536, 528, 528); abs(f-1536.0/1584) > 1e-9 {
		t.Errorf("WaveFill(1536, 528, 528) = %v", f)
	}
	// One block a unit: 128 blocks on 264 slots fill 48%; 285 take 2 waves, 54%.
	if f := WaveFill(128, 128, 264); abs(f-128.0/264) > 1e-9 {
		t.Errorf("WaveFill(128, 128, 264) = %v", f)
	}
	if f := WaveFill(285, 285, 264); abs(f-285.0/528) > 1e-9 {
		t.Errorf("WaveFill(285, 285, 264) = %v", f)
	}
	big := Call{Kind: "linear", N: 4096, K: 4096}
	for _, c := range []struct {
		w    Wave
		want string
	}{
		{Wave{Call: big, Fill: 0.97}, RuleOK},
		{Wave{Call: big, Fill: 0.48}, RuleFail},
		{Wave{Call: big, Fill: 0.3, Launch: 1}, "exempt: reduce"},
		{Wave{Call: Call{Kind: "linear", N: 8, K: 4096}, Fill: 0.01}, "exempt: small W"},
		{Wave{Call: big, Error: "no block fits an SM"}, RuleFail},
		// attention: held to 0.9 where whole-tile splits could reach it, else exempt
		{Wave{Call: Call{Kind: "attention"}, Fill: 0.97, BestFill: 0.97}, RuleOK},
		{Wave{Call: Call{Kind: "attention"}, Fill: 0.48, BestFill: 0.97}, RuleFail},
		{Wave{Call: Call{Kind: "attention"}, Fill: 0.24, BestFill: 0.24}, "exempt: whole tiles fill at most 24%"},
		{Wave{Call: Call{Kind: "attention"}, Error: "no block fits an SM"}, RuleFail},
		{Wave{Call: Call{Kind: "other"}, Fill: 0.4}, ""},
	} {
		if got := WaveRule(c.w); got != c.want {
			t.Errorf("WaveRule(%+v) = %q, want %q", c.w, got, c.want)
		}
	}
}

// The best fill of whole-tile splits: batch 1 of Llama-3-8B (8 blocks a split) on 528 slots
// reaches 64 splits (0.97) at 8k (256 tiles of 32), but at 512 tokens (16 tiles) only 128
// blocks (0.24); 70B's 396 slots at 4k (128 tiles): 43 splits give 344 blocks (0.87), 64 spill
// into a second wave (0.65).
func TestBestAttentionFill(t *testing.T) {
	for _, c := range []struct {
		perSplit     int64
		tiles, slots int
		want         float64
	}{
		{8, 256, 528, 512.0 / 528}, {8, 16, 528, 128.0 / 528}, {8, 128, 396, 344.0 / 396}, {4096, 1, 528, 4096.0 / 4224},
	} {
		if got := BestAttentionFill(c.perSplit, c.tiles, c.slots); abs(got-c.want) > 1e-9 {
			t.Errorf("BestAttentionFill(%d, %d, %d) = %v, want %v", c.perSplit, c.tiles, c.slots, got, c.want)
		}
	}
	if AttentionTile(128) != 32 || AttentionTile(64) != 64 || AttentionTile(256) != 16 {
		t.Error("AttentionTile differs from the SIMT kernel's tiles (64, 32, 16)")
	}
}
