package measure

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/decodebench/decodebench/bench/ref"
)

// sampleIndices picks up to max distinct indices of 0..n-1, sorted: all of them when n <=
// max; else half spread evenly from 0 to n-1 (both ends included) and half drawn by the
// hash from seed, so that neither a stride nor a tile boundary of the kernel hides from all
// of them.
func sampleIndices(n, max int, seed uint64) []int {
	if n <= max {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	if max < 2 {
		max = 2
	}
	seen := map[int]bool{}
	spread := (max + 1) / 2
	for i := 0; i < spread; i++ {
		seen[int(math.Round(float64(i)*float64(n-1)/float64(spread-1)))] = true
	}
	for i := uint64(0); len(seen) < max; i++ {
		seen[int(ref.Hash64(seed, i)%uint64(n))] = true
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// parallel runs f(i) for i in 0..n-1 on every core.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	jobs := make(chan int, n)
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// parallelRanges splits 0..n-1 into about one contiguous range per core and runs f on each.
func parallelRanges(n uint64, f func(lo, hi uint64)) {
	parts := uint64(runtime.GOMAXPROCS(0)) * 4
	if n < parts*1024 {
		parts = 1
	}
	step := (n + parts - 1) / parts
	parallel(int(parts), func(i int) {
		lo := uint64(i) * step
		hi := min(lo+step, n)
		if lo < hi {
			f(lo, hi)
		}
	})
}

// nonFinite counts the NaN and infinite values of got and gives the first one's index (-1
// when none): an output the kernel never wrote keeps the 0xFF poison, a NaN.
func nonFinite(got []float32) (count, first int) {
	first = -1
	for i, g := range got {
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	return count, first
}
