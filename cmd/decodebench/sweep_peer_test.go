package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/report"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// readMeasurements reads kernels.jsonl.
func readMeasurements(t *testing.T, dir string) []sweep.Measurement {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, sweep.KernelsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sweep.Measurement
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m sweep.Measurement
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// sweep --peer cublas on a library whose cublas variant works (the fake, twice our time): the
// peer sits beside every linear kernel in kernels.jsonl, the report and linear-peer.csv give
// the ratio 2, run.json has the launch baseline, and a resume measures no linear again. (The
// fake's attention writes nothing, so its steps fail after their first linear: the peer's
// ratio is reported all the same. bench/sweep's TestRunPeer composes whole steps.)
func TestSweepPeerRatio(t *testing.T) {
	sweepHermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so", "FAKE_LAUNCHES", "FAKE_CUBLAS_SLOWER=2"))
	t.Setenv("FAKEKERNELS_NAME", "")
	if _, code, msg := runSweepCLI(t, tinyFakeSweep("run", "--peer", "cublas")...); code != exitFailure || !strings.Contains(msg, "configuration(s) failed") {
		t.Fatalf("exit %d %q: want the fake's attention to fail its steps", code, msg)
	}
	ms := readMeasurements(t, "run")
	ours, peers := map[string]bool{}, map[string]bool{}
	for _, m := range ms {
		if m.Spec.Linear == nil {
			continue
		}
		if strings.Contains(m.Key, "variant=cublas") {
			peers[strings.Replace(m.Key, " variant=cublas", "", 1)] = m.OK()
		} else {
			ours[m.Key] = true
		}
	}
	if len(ours) == 0 || len(peers) != len(ours) {
		t.Fatalf("%d linear shapes of ours, %d of the peer: want one peer measurement beside each", len(ours), len(peers))
	}
	for key := range ours {
		if ok, has := peers[key]; !has || !ok {
			t.Errorf("%s: no ok peer measurement beside it", key)
		}
	}
	info := readRunInfo(t, "run")
	if info.Peer != "cublas" || info.Launch == nil || info.Launch.Status != "ok" || info.Launch.SecondsPerLaunch != 0.25e-6 ||
		info.Launch.LaunchesPerSample != 1000 || info.Launch.Samples != 5 || !info.Launch.Emulated {
		t.Errorf("run.json peer %q, launch %+v", info.Peer, info.Launch)
	}
	md := readFile(t, filepath.Join("run", report.MarkdownFile))
	for _, want := range []string{"Linear kernels beside cuBLAS", "cuBLAS / ours", "| 2.00 |", "Launch baseline", "0.25 µs per launch"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	csv := readFile(t, filepath.Join("run", report.PeerCSVFile))
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) != len(ours)+1 || !strings.Contains(lines[1], ",cublas,") || !strings.HasSuffix(lines[1], ",2,") {
		t.Errorf("%s:\n%s", report.PeerCSVFile, csv)
	}
	// A resume with more contexts measures only what is new: the linears (context-free) and
	// their peers are all there already.
	before := len(ms)
	if _, code, msg := runSweepCLI(t, "sweep", "--resume", "run", "--retry-failed", "--context", "64,128"); code != exitFailure {
		t.Fatalf("resume: exit %d %q", code, msg)
	}
	for _, m := range readMeasurements(t, "run")[before:] {
		if m.Spec.Linear != nil {
			t.Errorf("the resume measured %s again", m.Key)
		}
	}
}

// On the emulator the peer cannot run: our kernels are measured, the report says n/a with
// the reason once, and the launch baseline is recorded and marked emulated.
func TestSweepPeerEmulatorIsNA(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	if _, code, msg := runSweepCLI(t, tinySweep("run", "--peer", "cublas", "--batch", "1", "--context", "64")...); code != 0 {
		t.Fatalf("exit %d %q", code, msg)
	}
	md := readFile(t, filepath.Join("run", report.MarkdownFile))
	if n := strings.Count(md, "the emulator has none"); n != 1 {
		t.Errorf("the peer's reason appears %d times in report.md, want once", n)
	}
	if !strings.Contains(md, "cuBLAS / ours is n/a for every shape") || !strings.Contains(md, "| n/a |") {
		t.Errorf("report.md lacks the n/a ratio")
	}
	// The compute ceiling by its name, with its share of the datasheet's dense bf16 (--datasheet h200).
	for _, want := range []string{"| measured: read probe, mma.sync bf16 ceiling |", "of datasheet) |", "mma.sync bf16 ceiling", "of the datasheet's dense bf16 989"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, r := range readSweepRecords(t, "run") {
		if r.Status != "ok" {
			t.Errorf("%s: %s %s (the peer must not fail a step)", r.Key, r.Status, r.Reason)
		}
	}
	info := readRunInfo(t, "run")
	if info.Launch == nil || info.Launch.Status != "ok" || !info.Launch.Emulated || !(info.Launch.SecondsPerLaunch > 0) {
		t.Errorf("launch %+v: want an emulated baseline", info.Launch)
	}
	if !strings.Contains(md, "EMULATED: the CPU emulator's, not a card's") {
		t.Errorf("report.md does not mark the launch baseline emulated")
	}
}

// --peer takes cublas or none.
func TestSweepPeerFlag(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	if _, code, msg := runSweepCLI(t, tinySweep("run", "--peer", "mkl")...); code != exitUsage || !strings.Contains(msg, `--peer "mkl"`) {
		t.Errorf("exit %d %q", code, msg)
	}
}
