package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// sweepTarget is the opened device of a sweep and what is known about it.
type sweepTarget struct {
	lib       *cgo.Library
	dev       *cgo.Device
	props     cgo.DeviceProps
	sys       gpuinfo.System
	nvmlDev   *gpuinfo.Device // nil without NVML (the emulator, or no driver library)
	nvmlWhy   string          // why nvmlDev is nil
	datasheet roofline.Ceiling
	dsSource  string
	nvmlSrc   *telemetry.NVML
}

func isUUID(s string) bool {
	return strings.HasPrefix(strings.ToUpper(s), "GPU-") || strings.HasPrefix(strings.ToUpper(s), "MIG-")
}

func parseIndex(s string) (int, error) { return strconv.Atoi(s) }

// openSweepTarget opens the backend and the device --gpu names and reads its identity through
// NVML (for the CUDA backend). CUDA_DEVICE_ORDER=PCI_BUS_ID is set first, unless the user set
// it, so that CUDA numbers the GPUs as NVML and nvidia-smi do.
func openSweepTarget(req sweepRequest) (*sweepTarget, error) {
	t := &sweepTarget{}
	setCUDADeviceOrder(req.backend)
	index, err := cudaIndexOf(req.backend, req.gpu)
	if err != nil {
		return nil, err
	}
	t.lib, t.dev, err = backendChoice{backend: req.backend, device: index}.open()
	if err != nil {
		return nil, err
	}
	match, err := matchCUDADevice(t.lib, index)
	if err != nil {
		t.close()
		return nil, err
	}
	t.sys, t.nvmlDev, t.nvmlWhy = match.sys, match.dev, match.why
	if t.props, err = t.dev.Props(); err != nil {
		t.close()
		return nil, failure("reading device %d: %v", index, err)
	}
	if err := t.resolveDatasheet(req.datasheet); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// resolveDatasheet picks the datasheet ceiling: the spec row given, or the one NVML's name
// matches, or for a card without a row the NVML memory bandwidth alone (no FLOP/s: no bound).
func (t *sweepTarget) resolveDatasheet(choice string) error {
	switch {
	case choice == "none":
		t.dsSource = "none (--gpu none)"
		return nil
	case choice != "auto":
		g, err := roofline.LookupGPU(choice)
		if err != nil {
			return usageError("--gpu: %v", err)
		}
		t.datasheet, t.dsSource = roofline.DatasheetCeiling(g), g.Source+" (--gpu "+choice+")"
		return nil
	case t.lib.Emulated():
		t.dsSource = "none: the emulator is not a GPU (--gpu NAME sets one)"
		return nil
	}
	name, mem := t.props.Name, t.props.MemTotalBytes
	if t.nvmlDev != nil {
		name, mem = t.nvmlDev.Name, t.nvmlDev.MemoryTotalBytes
	}
	if g, ok := roofline.MatchNVML(name, mem); ok {
		t.datasheet, t.dsSource = roofline.DatasheetCeiling(g), g.Source
		return nil
	}
	if t.nvmlDev != nil && t.nvmlDev.DatasheetBandwidthBytesPerSec > 0 {
		t.datasheet = roofline.Ceiling{Name: roofline.CeilingDatasheet, BandwidthBytesPerSec: t.nvmlDev.DatasheetBandwidthBytesPerSec}
		t.dsSource = fmt.Sprintf("NVML: memory clock x bus width x 2; %s has no spec row, so no datasheet FLOP/s (--gpu NAME sets one)", name)
		return nil
	}
	t.dsSource = fmt.Sprintf("none: %s has no spec row (--gpu NAME sets one)", name)
	return nil
}

// telemetrySource is NVML on the sweep's GPU, or nothing (the emulator, no NVML).
func (t *sweepTarget) telemetrySource() telemetry.Source {
	if sweepTelemetryHook != nil {
		return sweepTelemetryHook()
	}
	if t.nvmlDev == nil || t.lib.Emulated() {
		return nil
	}
	src, err := telemetry.OpenNVML(nvmlLibrary(), t.nvmlDev.UUID)
	if err != nil {
		fmt.Fprintf(os.Stderr, "decodebench: no telemetry during the sweep: %v\n", err)
		return nil
	}
	t.nvmlSrc = src
	return src
}

func (t *sweepTarget) close() {
	if t.nvmlSrc != nil {
		t.nvmlSrc.Close()
	}
	if t.dev != nil {
		t.dev.Close()
	}
}

// runInfo is run.json for this run before anything is measured.
func (t *sweepTarget) runInfo(req sweepRequest, args, flags []string) sweep.RunInfo {
	now := time.Now().UTC()
	card := sweep.Card{
		Index: t.dev.Index(), Name: t.props.Name, MemoryTotalBytes: t.props.MemTotalBytes,
		ComputeCapability: fmt.Sprintf("%d.%d", t.props.CCMajor, t.props.CCMinor), SMCount: t.props.SMCount, L2Bytes: t.props.L2Bytes,
		DeviceOrder: os.Getenv("CUDA_DEVICE_ORDER"), NVML: "ok",
	}
	if d := t.nvmlDev; d != nil {
		card.Name, card.UUID, card.PCIBusID, card.MemoryTotalBytes = d.Name, d.UUID, d.PCIBusID, d.MemoryTotalBytes
		card.Driver, card.CUDAVersion = t.sys.Driver, t.sys.CUDADriverVersion
		card.SMClockMHz, card.MaxSMClockMHz, card.MemClockMHz, card.MaxMemClockMHz = d.SMClockMHz, d.MaxSMClockMHz, d.MemClockMHz, d.MaxMemClockMHz
		card.ECCEnabled, card.PowerLimitWatts, card.TemperatureC = d.ECCEnabled, d.PowerLimitWatts, d.TemperatureC
		card.Unavailable = append(append([]string(nil), t.sys.Unavailable...), d.Unavailable...)
	} else {
		card.NVML = t.nvmlWhy
	}
	memory := float64(card.MemoryTotalBytes)
	if req.memoryBytes > 0 {
		memory = req.memoryBytes
	}
	session := sweep.Session{CommandLine: args, Flags: flags, Version: version, Started: now, State: sweep.StateRunning}
	return sweep.RunInfo{
		Version: version, CommandLine: args, Flags: flags, Started: now, Updated: now, State: sweep.StateRunning,
		Backend:   sweep.Backend{Name: t.lib.Name(), Library: t.lib.File(), Emulated: t.lib.Emulated()},
		Card:      card,
		Datasheet: sweep.CeilingInfo{BandwidthBytesPerSec: t.datasheet.BandwidthBytesPerSec, FLOPsPerSec: t.datasheet.FLOPsPerSec, Source: t.dsSource},
		Axes:      req.axes,
		Method: sweep.Method{
			Timing: sweep.RuleOf(req.options.Timing), RotateFactor: req.options.RotateFactor, MaxRotateBytes: req.options.MaxRotateBytes,
			Verify: req.options.Verify, Seed: req.options.Seed, TelemetryIntervalSeconds: req.telemetry.Seconds(),
			ReserveFraction: req.reserve, MemoryBytes: memory, ProbeBytes: req.probeBytes, SmallOps: sweep.SmallOpsMethod,
		},
		Sessions: []sweep.Session{session},
	}
}
