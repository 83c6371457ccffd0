package validate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

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
