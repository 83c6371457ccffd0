package validate

import (
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

func fourGPUs() []gpuinfo.Device {
	var d []gpuinfo.Device
	for i, u := range []string{"GPU-aaaa1111", "GPU-bbbb2222", "GPU-cccc3333", "GPU-aaaa4444"} {
		d = append(d, gpuinfo.Device{Index: i, UUID: u})
	}
	return d
}

func TestSelectGPUs(t *testing.T) {
	for spec, want := range map[string][]int{"all": {0, 1, 2, 3}, "": {0, 1, 2, 3}, "3,1,3": {1, 3}, "GPU-cccc3333, 0": {0, 2}, "bbbb": {1}} {
		if got, err := SelectGPUs(fourGPUs(), spec); err != nil || !slices.Equal(got, want) {
			t.Errorf("SelectGPUs(%q) = %v, %v; want %v", spec, got, err, want)
		}
	}
	for spec, want := range map[string]string{"4": "NVML sees 4 GPU(s)", "aaaa": "more than one", "GPU-zzzz": "neither a GPU index", ",": "selects no GPU"} {
		if _, err := SelectGPUs(fourGPUs(), spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SelectGPUs(%q): err = %v, want %q", spec, err, want)
		}
	}
}
