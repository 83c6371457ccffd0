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

func TestMapBackendDevices(t *testing.T) {
	tests := []struct {
		desc    string
		visible string
		set     bool
		count   int
		want    []int
		err     string
	}{
		{"unset: one to one", "", false, 4, []int{0, 1, 2, 3}, ""},
		{"unset, counts differ", "", false, 3, nil, "NVML sees 4 GPU(s) but the CUDA runtime sees 3"},
		{"Slurm's indices", "2,0", true, 2, []int{1, -1, 0, -1}, ""},
		{"UUIDs and prefixes", "GPU-cccc3333,bbbb", true, 2, []int{-1, 1, 0, -1}, ""},
		{"an invalid entry ends the list", "1,7,2", true, 1, []int{-1, 0, -1, -1}, ""},
		{"set but empty", "", true, 0, []int{-1, -1, -1, -1}, ""},
		{"an ambiguous prefix", "aaaa", true, 1, nil, "more than one GPU"},
		{"MIG", "MIG-1234", true, 1, nil, "MIG instance"},
		{"a count CUDA disagrees with", "0,1", true, 1, nil, "names 2 GPU(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := MapBackendDevices(fourGPUs(), tt.visible, tt.set, tt.count)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("= %v, %v; want %v", got, err, tt.want)
			}
		})
	}
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
