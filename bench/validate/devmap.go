package validate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// CUDADeviceOrder is the CUDA_DEVICE_ORDER validate runs under: with it, CUDA numbers devices
// in PCI bus order, as NVML does, instead of fastest first. It must be in the environment before
// the CUDA library initializes.
const CUDADeviceOrder = "PCI_BUS_ID"

// MapBackendDevices gives, for each NVML device, the index the CUDA runtime knows it by, or -1
// when CUDA cannot see it. visible is CUDA_VISIBLE_DEVICES (set: true when the variable exists,
// even empty); backendCount is how many devices the runtime reports. It assumes
// CUDA_DEVICE_ORDER=PCI_BUS_ID, under which CUDA's order and its indices in
// CUDA_VISIBLE_DEVICES are NVML's.
//
// Slurm and Kubernetes set CUDA_VISIBLE_DEVICES (or mount only the allotted devices, so NVML
// sees just those); both come out right here. MIG instances are not validated.
func MapBackendDevices(devs []gpuinfo.Device, visible string, set bool, backendCount int) ([]int, error) {
	out := make([]int, len(devs))
	for i := range out {
		out[i] = -1
	}
	if !set {
		if backendCount != len(devs) {
			return nil, fmt.Errorf("NVML sees %d GPU(s) but the CUDA runtime sees %d: cannot tell which is which (MIG, or a device NVML cannot open?)", len(devs), backendCount)
		}
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	cuda := 0
	for _, entry := range strings.Split(visible, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		match := -1
		if n, err := strconv.Atoi(entry); err == nil {
			if n < 0 || n >= len(devs) {
				break // CUDA ignores an invalid entry and everything after it
			}
			match = n
		} else if strings.HasPrefix(entry, "MIG-") {
			return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES names a MIG instance (%s): validate checks whole GPUs", entry)
		} else {
			for i, d := range devs {
				if strings.HasPrefix(d.UUID, entry) || strings.HasPrefix(d.UUID, "GPU-"+entry) {
					if match >= 0 {
						return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES entry %q matches more than one GPU", entry)
					}
					match = i
				}
			}
			if match < 0 {
				break
			}
		}
		if out[match] >= 0 {
			return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES names GPU %d twice", match)
		}
		out[match] = cuda
		cuda++
	}
	if cuda != backendCount {
		return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES=%q names %d GPU(s) NVML knows, but the CUDA runtime sees %d", visible, cuda, backendCount)
	}
	return out, nil
}

// SelectGPUs picks the devices --gpus names: "all", or a comma-separated list of NVML indices
// and UUIDs (a unique prefix of a UUID will do). The result is in NVML order, without repeats.
func SelectGPUs(devs []gpuinfo.Device, spec string) ([]int, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "all" {
		all := make([]int, len(devs))
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	chosen := make([]bool, len(devs))
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if n, err := strconv.Atoi(entry); err == nil {
			if n < 0 || n >= len(devs) {
				return nil, fmt.Errorf("GPU %d: NVML sees %d GPU(s), numbered from 0", n, len(devs))
			}
			chosen[n] = true
			continue
		}
		match := -1
		for i, d := range devs {
			if strings.HasPrefix(d.UUID, entry) || strings.HasPrefix(d.UUID, "GPU-"+entry) {
				if match >= 0 {
					return nil, fmt.Errorf("%q matches more than one GPU's UUID", entry)
				}
				match = i
			}
		}
		if match < 0 {
			return nil, fmt.Errorf("%q is neither a GPU index nor the UUID of one (see `decodebench info`)", entry)
		}
		chosen[match] = true
	}
	var out []int
	for i, c := range chosen {
		if c {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q selects no GPU", spec)
	}
	return out, nil
}
