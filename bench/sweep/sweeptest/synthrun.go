// Package sweeptest writes run directories of decodebench sweep without a device, for the tests
// of the commands that read them (compare, plan): each kernel's samples are its roofline time on
// a pretend card, scaled and made noisy as a test asks, and the records are composed from them
// by sweep.Compose as a sweep would.
package sweeptest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/timing"
)

// The pretend card: an H200 that reaches 4.3 TB/s and 700 TFLOP/s, its kernels at 80% of that
// plus 3 µs each.
const (
	bandwidthBytesPerSec = 4.3e12
	flopsPerSec          = 700e12
	efficiency           = 0.8
	overheadSeconds      = 3e-6
	memoryBytes          = 150754820096
)

// Run describes a run directory.
type Run struct {
	Card     string
	Started  time.Time
	Model    model.Shape
	Batches  []int
	Contexts []int
	Scale    float64 // every kernel's time x Scale (1.10: a run 10% slower)
	Noise    float64 // relative standard deviation of the samples
	Samples  int     // per kernel measurement
	Seed     uint64
	Drop     [][2]int // (batch, context) configurations left out
	Fail     [][2]int // (batch, context) configurations whose attention failed
	Emulated bool
}

// KernelSeconds is the median time of one call of k on the pretend card before Scale.
func KernelSeconds(k model.Kernel) float64 {
	return math.Max(k.Bytes/bandwidthBytesPerSec, k.FLOPs/flopsPerSec)/efficiency + overheadSeconds
}

// Write makes dir a complete run directory of r.
func Write(dir string, r Run) error {
	if r.Scale == 0 {
		r.Scale = 1
	}
	if r.Samples == 0 {
		r.Samples = 100
	}
	if r.Started.IsZero() {
		r.Started = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	}
	gpu, err := roofline.LookupGPU("h200")
	if err != nil {
		return err
	}
	datasheet := roofline.DatasheetCeiling(gpu)
	measured := roofline.Ceiling{Name: roofline.CeilingMeasured, BandwidthBytesPerSec: bandwidthBytesPerSec, FLOPsPerSec: flopsPerSec}
	info := sweep.RunInfo{
		Schema: sweep.SchemaVersion, Version: "test", CommandLine: []string{"decodebench", "sweep", "--model", r.Model.Name},
		Started: r.Started, Updated: r.Started, State: sweep.StateComplete,
		Backend:   sweep.Backend{Name: "cuda", Library: "lib/libdecodebench_cuda.so", Emulated: r.Emulated},
		Card:      sweep.Card{Name: r.Card, UUID: "GPU-" + r.Card, MemoryTotalBytes: memoryBytes, Driver: "580.159.03", CUDAVersion: "13.0", NVML: "ok"},
		Datasheet: sweep.CeilingInfo{BandwidthBytesPerSec: datasheet.BandwidthBytesPerSec, FLOPsPerSec: datasheet.FLOPsPerSec, Source: gpu.Source},
		Measured:  sweep.CeilingInfo{BandwidthBytesPerSec: bandwidthBytesPerSec, FLOPsPerSec: flopsPerSec, Source: "probes"},
		Axes:      sweep.Axes{Models: []model.Shape{r.Model}, Batches: r.Batches, Contexts: r.Contexts},
		Method:    sweep.Method{Timing: sweep.RuleOf(timing.Default), ReserveFraction: 0.1, MemoryBytes: memoryBytes, SmallOps: sweep.SmallOpsMethod},
		Sessions:  []sweep.Session{{Started: r.Started, State: sweep.StateComplete}},
	}
	d, err := sweep.Create(dir, info)
	if err != nil {
		return err
	}
	defer d.Close()
	ceil := sweep.Ceilings{Datasheet: datasheet, Measured: measured}
	written := map[string]sweep.Measurement{}
	for _, ctx := range r.Contexts {
		for _, b := range r.Batches {
			at := [2]int{b, ctx}
			if slices.Contains(r.Drop, at) {
				continue
			}
			cfg := sweep.Config{Model: r.Model, Batch: b, Context: ctx}
			kernels := map[string]sweep.Measurement{}
			for _, k := range r.Model.Kernels(b, ctx) {
				spec := sweep.SpecOf(k, r.Model)
				m, ok := written[spec.Key()]
				if !ok {
					m = r.measurement(spec, k)
					if err := d.AppendMeasurement(m); err != nil {
						return err
					}
					written[spec.Key()] = m
				}
				if slices.Contains(r.Fail, at) && k.Kind == model.KindAttention {
					m.Status, m.Reason = measure.StatusFailed, "verification failed: 12 NaN outputs"
				}
				kernels[spec.Key()] = m
			}
			if err := d.AppendRecord(sweep.Compose(cfg, kernels, ceil)); err != nil {
				return err
			}
		}
	}
	return nil
}

// measurement is the timed outcome of spec: r.Samples samples around KernelSeconds(k) x Scale.
func (r Run) measurement(spec measure.Spec, k model.Kernel) sweep.Measurement {
	h := fnv.New64a()
	h.Write([]byte(spec.Key()))
	rng := rand.New(rand.NewPCG(r.Seed, h.Sum64()))
	median := KernelSeconds(k) * r.Scale
	samples := make([]float64, r.Samples)
	for i := range samples {
		samples[i] = median * math.Max(0.05, 1+r.Noise*rng.NormFloat64())
	}
	st := timing.Summarize(samples)
	st.Converged = st.Spread < timing.Default.TargetSpread
	return sweep.Measurement{Key: spec.Key(), Outcome: measure.Outcome{Spec: spec, Status: measure.StatusOK, Bytes: k.Bytes, FLOPs: k.FLOPs,
		Stats: st, Emulated: r.Emulated, AchievedBytesPerSec: k.Bytes / st.Median, AchievedFLOPsPerSec: k.FLOPs / st.Median,
		Verification: measure.Verification{Passed: true}}}
}

// String names the run in test failures.
func (r Run) String() string {
	return fmt.Sprintf("%s %s x%.2f noise %.3f", r.Card, r.Model.Name, r.Scale, r.Noise)
}
