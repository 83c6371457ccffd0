// Package roofline holds the GPU spec rows and the roofline arithmetic of a decode step: the
// least time a step can take given the bytes it must move and the FLOPs it must do, and what
// fraction of that bound a measurement reached.
//
// Units are decimal for rates (1 GB/s = 1e9 B/s, 1 TFLOP/s = 1e12 FLOP/s). Memory capacities are
// what the vendor calls "GB", which for these cards is GiB: an "80GB" H100 has 80 * 2^30 bytes
// (NVML reports 81559 MiB), a "141GB" H200 141 * 2^30 (NVML: 143771 MiB).
package roofline

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/internal/textdist"
	"slices"
	"sort"
	"strings"
)

// GPU is one spec row: the vendor's datasheet numbers for a card.
type GPU struct {
	Key                  string   // lookup key: "h200", "h100-sxm", ...
	Name                 string   // "NVIDIA H200 SXM 141GB"
	Aliases              []string // NVML product names and common spellings
	MemoryBytes          float64  // capacity, vendor "GB" = GiB (see the package comment)
	BandwidthBytesPerSec float64  // datasheet HBM/GDDR bandwidth, decimal
	TensorBF16FLOPs      float64  // dense (no 2:4 sparsity) bf16 tensor-core rate, FP32 accumulate
	FP32FLOPs            float64  // non-tensor fp32
	L2Bytes              float64
	SMs                  int
	Source               string // where the numbers come from
}

const gib = 1 << 30

// The table. Datasheets quote tensor rates with 2:4 sparsity; dense = sparse / 2.
// Keep rows for cards that share a name but not numbers (H100 SXM / PCIe / NVL, A100 40 / 80 GB)
// distinct, so that MatchNVML never hands one card another's ceiling.
var gpus = []GPU{
	{
		Key: "h100-sxm", Name: "NVIDIA H100 SXM5 80GB",
		Aliases:     []string{"H100", "H100 SXM", "H100 SXM5", "H100 80GB HBM3", "H100 SXM5 80GB"},
		MemoryBytes: 80 * gib, BandwidthBytesPerSec: 3.35e12,
		TensorBF16FLOPs: 989.4e12, FP32FLOPs: 67e12, L2Bytes: 50 * (1 << 20), SMs: 132,
		Source: "NVIDIA H100 datasheet (2023), SXM: 3.35 TB/s, bf16 1979 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "h100-pcie", Name: "NVIDIA H100 PCIe 80GB",
		Aliases:     []string{"H100 PCIe", "H100 PCIe 80GB", "H100-PCIE-80GB"},
		MemoryBytes: 80 * gib, BandwidthBytesPerSec: 2.0e12,
		TensorBF16FLOPs: 756e12, FP32FLOPs: 51e12, L2Bytes: 50 * (1 << 20), SMs: 114,
		Source: "NVIDIA H100 datasheet (2022), PCIe: 2 TB/s HBM2e, bf16 1513 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "h100-nvl", Name: "NVIDIA H100 NVL 94GB",
		Aliases:     []string{"H100 NVL", "H100 NVL 94GB"},
		MemoryBytes: 94 * gib, BandwidthBytesPerSec: 3.9e12,
		TensorBF16FLOPs: 835.5e12, FP32FLOPs: 60e12, L2Bytes: 50 * (1 << 20), SMs: 132,
		Source: "NVIDIA H100 datasheet (2024), NVL: 3.9 TB/s, bf16 1671 TFLOPS sparse, dense = sparse/2",
	},
	{
		// L2: 60 MB, as PyTorch's device properties reported it on this workplace's lent H200
		// (its device notes, 2026-10-28; not read by decodebench itself); the H100 SXM reports
		// 50 MiB. The datasheet gives no L2 size. Measurements read L2 off the device anyway.
		Key: "h200", Name: "NVIDIA H200 SXM 141GB",
		Aliases:     []string{"H200", "H200 SXM", "H200 SXM5", "H200 141GB HBM3e", "H200 SXM 141GB", "H200 SXM5 141GB"},
		MemoryBytes: 141 * gib, BandwidthBytesPerSec: 4.8e12,
		TensorBF16FLOPs: 989.4e12, FP32FLOPs: 67e12, L2Bytes: 60 * (1 << 20), SMs: 132,
		Source: "NVIDIA H200 datasheet (2024), SXM: 4.8 TB/s, bf16 1979 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "h200-nvl", Name: "NVIDIA H200 NVL 141GB",
		Aliases:     []string{"H200 NVL", "H200 NVL 141GB"},
		MemoryBytes: 141 * gib, BandwidthBytesPerSec: 4.8e12,
		TensorBF16FLOPs: 835.5e12, FP32FLOPs: 60e12, L2Bytes: 60 * (1 << 20), SMs: 132,
		Source: "NVIDIA H200 datasheet (2024), NVL: 4.8 TB/s, bf16 1671 TFLOPS sparse, dense = sparse/2",
	},
	{
		// No public datasheet; these are the figures of NVIDIA's HGX H20 product brief as the
		// press reported them (Nov 2023). 148 TFLOPS is the dense figure.
		Key: "h20", Name: "NVIDIA H20 96GB",
		Aliases:     []string{"H20", "H20 96GB", "HGX H20"},
		MemoryBytes: 96 * gib, BandwidthBytesPerSec: 4.0e12,
		TensorBF16FLOPs: 148e12, FP32FLOPs: 44e12, L2Bytes: 60 * (1 << 20), SMs: 78,
		Source: "NVIDIA HGX H20 product brief as reported (2023): 4.0 TB/s, bf16 148 TFLOPS dense; 78 SMs from Geekbench",
	},
	{
		// SXM4 and PCIe 40GB share bandwidth (1215 MHz HBM2 x 5120 bit) and tensor rate.
		Key: "a100-40gb", Name: "NVIDIA A100 40GB",
		Aliases:     []string{"A100 40GB", "A100-SXM4-40GB", "A100 SXM4 40GB", "A100-PCIE-40GB", "A100 PCIe 40GB"},
		MemoryBytes: 40 * gib, BandwidthBytesPerSec: 1.555e12,
		TensorBF16FLOPs: 312e12, FP32FLOPs: 19.5e12, L2Bytes: 40 * (1 << 20), SMs: 108,
		Source: "NVIDIA A100 datasheet (2021), 40GB: 1555 GB/s, bf16 624 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "a100-80gb", Name: "NVIDIA A100 SXM4 80GB",
		Aliases:     []string{"A100 80GB", "A100 80GB SXM", "A100-SXM4-80GB", "A100 SXM4 80GB", "A100-80GB-SXM"},
		MemoryBytes: 80 * gib, BandwidthBytesPerSec: 2.039e12,
		TensorBF16FLOPs: 312e12, FP32FLOPs: 19.5e12, L2Bytes: 40 * (1 << 20), SMs: 108,
		Source: "NVIDIA A100 datasheet (2021), 80GB SXM: 2039 GB/s, bf16 624 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "a100-80gb-pcie", Name: "NVIDIA A100 PCIe 80GB",
		Aliases:     []string{"A100 80GB PCIe", "A100-PCIE-80GB", "A100 PCIe 80GB"},
		MemoryBytes: 80 * gib, BandwidthBytesPerSec: 1.935e12,
		TensorBF16FLOPs: 312e12, FP32FLOPs: 19.5e12, L2Bytes: 40 * (1 << 20), SMs: 108,
		Source: "NVIDIA A100 datasheet (2021), 80GB PCIe: 1935 GB/s, bf16 624 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "a10", Name: "NVIDIA A10",
		Aliases:     []string{"A10", "A10 24GB"},
		MemoryBytes: 24 * gib, BandwidthBytesPerSec: 600e9,
		TensorBF16FLOPs: 125e12, FP32FLOPs: 31.2e12, L2Bytes: 6 * (1 << 20), SMs: 72,
		Source: "NVIDIA A10 datasheet (2021): 600 GB/s GDDR6, bf16 250 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "l4", Name: "NVIDIA L4",
		Aliases:     []string{"L4", "L4 24GB"},
		MemoryBytes: 24 * gib, BandwidthBytesPerSec: 300e9,
		TensorBF16FLOPs: 121e12, FP32FLOPs: 30.3e12, L2Bytes: 48 * (1 << 20), SMs: 58,
		Source: "NVIDIA L4 datasheet (2023): 300 GB/s GDDR6, bf16 242 TFLOPS sparse, dense = sparse/2",
	},
	{
		Key: "l40s", Name: "NVIDIA L40S",
		Aliases:     []string{"L40S", "L40S 48GB"},
		MemoryBytes: 48 * gib, BandwidthBytesPerSec: 864e9,
		TensorBF16FLOPs: 362.05e12, FP32FLOPs: 91.6e12, L2Bytes: 96 * (1 << 20), SMs: 142,
		Source: "NVIDIA L40S datasheet (2023): 864 GB/s GDDR6, bf16 362.05 TFLOPS dense (733 sparse)",
	},
	{
		// GeForce runs bf16/fp16 MMA with FP32 accumulate at half the FP16-accumulate rate
		// (330.3 TFLOPS dense); decode kernels accumulate in FP32, so 165.2 is the ceiling.
		Key: "rtx-4090", Name: "NVIDIA GeForce RTX 4090",
		Aliases:     []string{"4090", "RTX 4090", "GeForce RTX 4090"},
		MemoryBytes: 24 * gib, BandwidthBytesPerSec: 1008e9,
		TensorBF16FLOPs: 165.2e12, FP32FLOPs: 82.6e12, L2Bytes: 72 * (1 << 20), SMs: 128,
		Source: "NVIDIA Ada Lovelace architecture whitepaper (2022), RTX 4090: 1008 GB/s GDDR6X, bf16 FP32-accumulate 165.2 TFLOPS dense",
	},
	{
		// NVML reports 183359 MiB (~179 GiB) on a B200. The SM count and L2 size are third-party
		// deviceQuery reports, not datasheet figures: leads until read on a card.
		Key: "b200", Name: "NVIDIA B200 180GB",
		Aliases:     []string{"B200", "B200 SXM", "HGX B200", "B200 180GB HBM3e"},
		MemoryBytes: 180 * gib, BandwidthBytesPerSec: 8.0e12,
		TensorBF16FLOPs: 2.25e15, FP32FLOPs: 75e12, L2Bytes: 126 * (1 << 20), SMs: 148,
		Source: "NVIDIA HGX B200 datasheet (2025), per GPU: 8 TB/s, bf16 4.5 PFLOPS sparse, dense = sparse/2, FP32 600/8 TFLOPS",
	},
}

// GPUs returns a copy of every spec row, in table order.
func GPUs() []GPU {
	out := make([]GPU, len(gpus))
	for i, g := range gpus {
		g.Aliases = slices.Clone(g.Aliases)
		out[i] = g
	}
	return out
}

// Keys returns every row's key, in table order.
func Keys() []string {
	keys := make([]string, len(gpus))
	for i, g := range gpus {
		keys[i] = g.Key
	}
	return keys
}

// LookupGPU finds a row by key, name or alias, ignoring case, spaces and punctuation
// ("H100_SXM", "h100 sxm" and "h100-sxm" are one key). A full NVML product name such as
// "NVIDIA H100 80GB HBM3" also works (through MatchNVML, without a memory size). An unknown
// name gives an error that lists the closest keys and every key.
func LookupGPU(name string) (GPU, error) {
	n := squash(name)
	if n == "" {
		return GPU{}, fmt.Errorf("empty GPU name; known GPUs: %s", strings.Join(Keys(), ", "))
	}
	for _, g := range gpus {
		for _, s := range g.spellings() {
			if squash(s) == n {
				return g, nil
			}
		}
	}
	if g, ok := MatchNVML(name, 0); ok {
		return g, nil
	}
	return GPU{}, fmt.Errorf("unknown GPU %q: closest %s; known GPUs: %s",
		name, strings.Join(closestKeys(n, 3), ", "), strings.Join(Keys(), ", "))
}

// MatchNVML maps an NVML product name ("NVIDIA H100 80GB HBM3", "NVIDIA H200",
// "NVIDIA A100-SXM4-40GB") and the memory NVML reports (0 if unknown) to a row.
//
// Names are compared as sets of words after dropping words that say nothing about the ceiling
// ("NVIDIA", "GeForce", "Tesla", the memory type such as "HBM3"): every remaining word must be
// matched, so "A10G", "L40" or "RTX 4090 D" match no row rather than a near one. A size word
// ("80GB") in both must agree. When several rows share the words (A100 PCIe 40GB and 80GB), the
// memory size decides: the row whose capacity is within 10% of it. With no size to go by, an
// ambiguous name matches nothing.
func MatchNVML(productName string, memoryBytes uint64) (GPU, bool) {
	words, sizeGiB := significantWords(productName)
	if len(words) == 0 {
		return GPU{}, false
	}
	mem := float64(memoryBytes)
	if mem == 0 && sizeGiB > 0 {
		mem = float64(sizeGiB) * gib
	}
	var candidates []GPU
	for _, g := range gpus {
		if g.matchesWords(words, sizeGiB) {
			candidates = append(candidates, g)
		}
	}
	if mem > 0 {
		candidates = slices.DeleteFunc(candidates, func(g GPU) bool {
			return relDiff(g.MemoryBytes, mem) > 0.10
		})
		if len(candidates) == 0 {
			return GPU{}, false
		}
		best := candidates[0]
		for _, g := range candidates[1:] {
			if relDiff(g.MemoryBytes, mem) < relDiff(best.MemoryBytes, mem) {
				best = g
			}
		}
		return best, true
	}
	if len(candidates) == 1 {
		return candidates[0], true
	}
	return GPU{}, false
}

func (g GPU) spellings() []string {
	return append([]string{g.Key, g.Name}, g.Aliases...)
}

func (g GPU) matchesWords(words []string, sizeGiB int) bool {
	for _, s := range g.spellings() {
		w, size := significantWords(s)
		if sizeGiB > 0 && size > 0 && sizeGiB != size {
			continue
		}
		if slices.Equal(w, words) {
			return true
		}
	}
	return false
}

// noiseWords say nothing about which ceiling applies.
var noiseWords = map[string]bool{
	"nvidia": true, "geforce": true, "tesla": true,
	"hbm2": true, "hbm2e": true, "hbm3": true, "hbm3e": true, "gddr6": true, "gddr6x": true,
}

// significantWords splits a name into its lower-case words, sorted, without noise words and
// without a size word ("80gb"), whose number it returns separately (0 if none).
func significantWords(s string) (words []string, sizeGiB int) {
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		if noiseWords[w] {
			continue
		}
		if n, ok := strings.CutSuffix(w, "gb"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			fmt.Sscan(n, &sizeGiB)
			continue
		}
		words = append(words, w)
	}
	sort.Strings(words)
	return slices.Compact(words), sizeGiB
}

// squash lower-cases s and keeps only letters and digits.
func squash(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func relDiff(a, b float64) float64 {
	d := (a - b) / max(a, b)
	if d < 0 {
		return -d
	}
	return d
}

// closestKeys returns the n keys nearest to the squashed name: first by the edit distance to
// the start of a spelling (so "a100" is near "a100-40gb"), then by the distance to the whole.
func closestKeys(name string, n int) []string {
	type scored struct {
		key           string
		prefix, whole int
	}
	var all []scored
	for _, g := range gpus {
		best := scored{key: g.Key, prefix: -1}
		for _, s := range g.spellings() {
			s = squash(s)
			p, w := textdist.Levenshtein(name, s[:min(len(s), len(name))]), textdist.Levenshtein(name, s)
			if best.prefix < 0 || p < best.prefix || p == best.prefix && w < best.whole {
				best.prefix, best.whole = p, w
			}
		}
		all = append(all, best)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].prefix != all[j].prefix {
			return all[i].prefix < all[j].prefix
		}
		return all[i].whole < all[j].whole
	})
	var keys []string
	for _, s := range all[:min(n, len(all))] {
		keys = append(keys, s.key)
	}
	return keys
}
