package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/cgo"
)

// nvmlHook, when set, replaces the driver's NVML library in every command (tests).
var nvmlHook func() nvml.Interface

// nvmlLibrary is the NVML library the commands read: the hook's, or the driver's.
func nvmlLibrary() nvml.Interface {
	if nvmlHook != nil {
		return nvmlHook()
	}
	return nvml.New()
}

// querySystem reads NVML's view of the machine (gpuinfo.Open says why a driver is missing).
func querySystem() (gpuinfo.System, error) {
	if nvmlHook != nil {
		return gpuinfo.Query(nvmlHook())
	}
	return gpuinfo.Open()
}

// setCUDADeviceOrder makes the CUDA runtime number devices by PCI bus id, as the device map
// assumes, unless the user chose an order; it must run before the CUDA library initializes.
func setCUDADeviceOrder(backend string) {
	if backend != cgo.BackendEmu && os.Getenv("CUDA_DEVICE_ORDER") == "" {
		os.Setenv("CUDA_DEVICE_ORDER", gpuinfo.CUDADeviceOrder)
	}
}

// cudaDeviceMap maps lib's devices to NVML's (gpuinfo.MapCUDADevices).
func cudaDeviceMap(sys gpuinfo.System, lib *cgo.Library) (gpuinfo.DeviceMap, error) {
	count, err := lib.DeviceCount()
	if err != nil {
		return gpuinfo.DeviceMap{}, fmt.Errorf("%s found no usable device: %w", lib.Path(), err)
	}
	return gpuinfo.MapCUDADevices(sys.Devices, gpuinfo.CUDAEnvironment(), count)
}

// migUsage turns a MIG instance in CUDA_VISIBLE_DEVICES into a usage error (exit 2).
func migUsage(err error) error {
	if errors.Is(err, gpuinfo.ErrMIG) {
		return usageError("%v", err)
	}
	return nil
}

// nvmlMatch is the NVML side of the CUDA device a command runs on: its identity, or why there
// is none.
type nvmlMatch struct {
	sys gpuinfo.System
	dev *gpuinfo.Device // nil: why says
	why string
}

// matchCUDADevice finds the NVML device that device index of lib is, through the one device
// map (gpuinfo.MapCUDADevices). Without NVML, on the emulator, or when the numbering cannot be
// told, dev is nil and why says so: a run then records no identity rather than another card's.
// A MIG instance is a usage error.
func matchCUDADevice(lib *cgo.Library, index int) (nvmlMatch, error) {
	if lib.Emulated() {
		return nvmlMatch{why: "not used: the emulator is not a GPU"}, nil
	}
	sys, err := querySystem()
	if err != nil {
		return nvmlMatch{sys: sys, why: err.Error()}, nil
	}
	m, err := cudaDeviceMap(sys, lib)
	if usage := migUsage(err); usage != nil {
		return nvmlMatch{}, usage
	}
	if err != nil {
		return nvmlMatch{sys: sys, why: err.Error()}, nil
	}
	d, ok := m.NVML(index)
	if !ok {
		return nvmlMatch{sys: sys, why: fmt.Sprintf("CUDA device %d is not among the %d NVML maps", index, m.Count())}, nil
	}
	if d.Lost != "" {
		return nvmlMatch{sys: sys, why: fmt.Sprintf("NVML cannot read GPU %d (%s): %s", d.Index, d.PCIBusID, d.Lost)}, nil
	}
	if props, err := lib.DeviceProps(index); err == nil {
		if err := m.CheckName(index, props.Name); err != nil {
			return nvmlMatch{sys: sys, why: err.Error()}, nil
		}
	}
	return nvmlMatch{sys: sys, dev: &d}, nil
}

// cudaIndexOf is the CUDA ordinal of the GPU --gpu names: an index as CUDA counts the devices,
// or a UUID (found through NVML and the device map).
func cudaIndexOf(backend, gpu string) (int, error) {
	if !isGPUUUID(gpu) {
		return strconv.Atoi(gpu)
	}
	if backend == cgo.BackendEmu {
		return 0, usageError("--gpu %s: the emulator has no UUID; give --gpu 0", gpu)
	}
	sys, err := querySystem()
	if err != nil {
		return 0, usageError("--gpu %s: finding a GPU by UUID needs NVML: %v", gpu, err)
	}
	var found *gpuinfo.Device
	for i := range sys.Devices {
		if sys.Devices[i].UUID != "" && strings.EqualFold(sys.Devices[i].UUID, gpu) {
			found = &sys.Devices[i]
		}
	}
	if found == nil {
		return 0, usageError("--gpu %s: NVML has no GPU with this UUID (`decodebench info` lists them)", gpu)
	}
	lib, err := cgo.Open(backend)
	if err != nil {
		return 0, failure("%v", err)
	}
	m, err := cudaDeviceMap(sys, lib)
	if usage := migUsage(err); usage != nil {
		return 0, usage
	}
	if err != nil {
		return 0, failure("--gpu %s: %v", gpu, err)
	}
	index, ok := m.CUDA(found.Index)
	if !ok {
		return 0, usageError("--gpu %s: GPU %d is not visible to CUDA (CUDA_VISIBLE_DEVICES=%q)", gpu, found.Index, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	return index, nil
}

func isGPUUUID(s string) bool {
	return strings.HasPrefix(strings.ToUpper(s), "GPU-") || strings.HasPrefix(strings.ToUpper(s), "MIG-")
}
