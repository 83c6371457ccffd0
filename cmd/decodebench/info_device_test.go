package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo/cgotest"
	"github.com/decodebench/decodebench/internal/testtier"
)

// identicalGPUs are n simulated cards that all carry the name the fake CUDA library gives its
// device 0, so that only the device map can tell them apart (as on a box of eight H100s).
func identicalGPUs(n int) []*fakenvml.GPU {
	var gpus []*fakenvml.GPU
	for i := range n {
		g := fakenvml.H100(i)
		g.Set(func(s *fakenvml.State) { s.Name = "fake device 0" })
		gpus = append(gpus, g)
	}
	return gpus
}

// Under Slurm's CUDA_VISIBLE_DEVICES=3 the job's only CUDA device is GPU 3: the sweep records
// GPU 3's UUID and bus id, not GPU 0's.
func TestSweepDeviceUnderCUDAVisibleDevices(t *testing.T) {
	testtier.Slow(t, "whole sweeps under several device masks")
	sweepHermetic(t, cgotest.FakeLibrary(t, "libdecodebench_cuda.so", `FAKE_BACKEND="cuda"`, "FAKE_DEVICES=1"))
	for _, name := range []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	gpus := identicalGPUs(4)
	gpus[2].Set(func(s *fakenvml.State) { s.UUID = "GPU-c0ffee00-0000-4000-8000-000000000002" })
	old := nvmlHook
	nvmlHook = func() nvml.Interface { return fakenvml.Library(gpus...) }
	t.Cleanup(func() { nvmlHook = old })

	run := func(out, visible string, extra ...string) (sweep.RunInfo, int, string) {
		t.Helper()
		t.Setenv("CUDA_VISIBLE_DEVICES", visible)
		args := tinySweep(out, append([]string{"--batch", "1", "--context", "64"}, extra...)...)
		for i, a := range args {
			if a == "emu" {
				args[i] = "cuda"
			}
		}
		stdout, code, msg := runSweepCLI(t, args...)
		var info sweep.RunInfo
		data, err := os.ReadFile(filepath.Join(out, sweep.InfoFile))
		if err == nil {
			json.Unmarshal(data, &info)
		}
		return info, code, msg + stdout
	}
	info, code, out := run("run3", "3")
	if info.Card.UUID != gpus[3].UUID || info.Card.PCIBusID != gpus[3].BusID || info.Card.Index != 0 || info.Card.NVML != "ok" {
		t.Fatalf("CUDA_VISIBLE_DEVICES=3 (exit %d): run.json card %+v, want GPU 3 (%s, %s)\n%s", code, info.Card, gpus[3].UUID, gpus[3].BusID, out)
	}
	// A card by a UUID prefix without "GPU-", as CUDA takes it, and by --gpu UUID.
	if info, _, out = run("run-prefix", "c0ffee"); info.Card.UUID != gpus[2].UUID {
		t.Errorf("CUDA_VISIBLE_DEVICES=<GPU 2's UUID prefix>: card %q\n%s", info.Card.UUID, out)
	}
	if info, _, out = run("run-uuid", "1", "--gpu", gpus[1].UUID); info.Card.UUID != gpus[1].UUID {
		t.Errorf("--gpu <GPU 1's UUID> under CUDA_VISIBLE_DEVICES=1: card %q\n%s", info.Card.UUID, out)
	}
	if _, code, out = run("run-hidden", "1", "--gpu", gpus[0].UUID); code != exitUsage || !strings.Contains(out, "GPU 0 is not visible to CUDA") {
		t.Errorf("--gpu <GPU 0's UUID> under CUDA_VISIBLE_DEVICES=1: exit %d\n%s", code, out)
	}
	if _, code, out = run("run-mig", "MIG-4f1f7c55-1f7c-5c6f-9cd5-5d2e3c1a0b9f"); code != exitUsage || !strings.Contains(out, "MIG instance") {
		t.Errorf("a MIG instance: exit %d\n%s", code, out)
	}
}

// info lists a lost card by what NVML still gives, and each card's CUDA device under
// CUDA_VISIBLE_DEVICES, through the same map the CUDA commands use.
func TestInfoLostCardAndCUDADevices(t *testing.T) {
	hermetic(t, "")
	gpus := []*fakenvml.GPU{fakenvml.H100(0), fakenvml.H100(1), fakenvml.H100(2)}
	gpus[1].Set(func(s *fakenvml.State) { s.Lost = true })
	old := nvmlHook
	nvmlHook = func() nvml.Interface { return fakenvml.Library(gpus...) }
	t.Cleanup(func() { nvmlHook = old })
	t.Setenv("CUDA_DEVICE_ORDER", "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "2,0")

	stdout, code, msg := runCLI(t, "info")
	if code != 0 {
		t.Fatalf("exit %d %s", code, msg)
	}
	lines := strings.Split(stdout, "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		return ""
	}
	if l := find("0 "); !strings.HasPrefix(l, "0 1 NVIDIA H100") {
		t.Errorf("GPU 0 line %q, want CUDA device 1", l)
	}
	if l := find("2 "); !strings.HasPrefix(l, "2 0 NVIDIA H100") {
		t.Errorf("GPU 2 line %q, want CUDA device 0", l)
	}
	if l := find("1 "); !strings.HasPrefix(l, "1 - LOST: ") || !saysLost(l) {
		t.Errorf("GPU 1 line %q, want it lost and hidden", l)
	}
	if !strings.Contains(stdout, gpus[1].UUID+" "+gpus[1].BusID) {
		t.Errorf("the lost card is not named by UUID and bus id:\n%s", stdout)
	}
	stdout, code, _ = runCLI(t, "info", "--json")
	var out struct {
		CUDADevices []int `json:"cuda_devices"`
		Devices     []struct {
			Lost string `json:"lost"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 0 || len(out.CUDADevices) != 2 || out.CUDADevices[0] != 2 ||
		out.CUDADevices[1] != 0 || out.Devices[1].Lost == "" {
		t.Errorf("--json: exit %d, %v, %+v", code, err, out)
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "MIG-1234")
	if stdout, code, _ = runCLI(t, "info"); code != 0 || !strings.Contains(stdout, "CUDA devices: CUDA_VISIBLE_DEVICES names a MIG instance (MIG-1234)") {
		t.Errorf("MIG: exit %d\n%s", code, stdout)
	}
}

// verify names the card it ran on through the same map: GPU 2 under CUDA_VISIBLE_DEVICES=2.
func TestVerifyDeviceUnderCUDAVisibleDevices(t *testing.T) {
	hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_cuda.so", `FAKE_BACKEND="cuda"`, "FAKE_DEVICES=1"))
	gpus := identicalGPUs(3)
	old := nvmlHook
	nvmlHook = func() nvml.Interface { return fakenvml.Library(gpus...) }
	t.Cleanup(func() { nvmlHook = old })
	t.Setenv("CUDA_DEVICE_ORDER", "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "2")
	stdout, code, msg := runCLI(t, "verify", "linear", "--backend", "cuda", "--batch", "1", "--n", "8", "--k", "16", "--json")
	var rep struct {
		UUID     string `json:"uuid"`
		PCIBusID string `json:"pci_bus_id"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || rep.UUID != gpus[2].UUID || rep.PCIBusID != gpus[2].BusID {
		t.Errorf("exit %d %s, %v: ran on %+v, want GPU 2 (%s)\n%s", code, msg, err, rep, gpus[2].UUID, stdout)
	}
}
