package report

import (
	"math"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/timing"
)

// synthRun describes a run directory made without a device: each kernel's median is its
// roofline time on a card of bandwidth GBps and TFLOPs, over efficiency.
type synthRun struct {
	card       string
	uuid       string
	model      model.Shape
	batches    []int
	contexts   []int
	bandwidth  float64 // B/s of the pretend card
	flops      float64
	efficiency float64
	failAt     [2]int // batch, context of a configuration whose attention fails
	throttleAt [2]int
	emulated   bool
	// formats, when set, are the run's models instead of model: one model in several weight
	// formats (sweep --weight-dtype LIST).
	formats []model.Shape
}

func llama8b(t *testing.T) model.Shape {
	t.Helper()
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// write makes the run directory dir.
func (s synthRun) write(t *testing.T, dir string) {
	t.Helper()
	d, err := sweep.Create(dir, sweep.RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	gpu, err := roofline.LookupGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	datasheet := roofline.DatasheetCeiling(gpu)
	measured := roofline.Ceiling{Name: roofline.CeilingMeasured, BandwidthBytesPerSec: s.bandwidth, FLOPsPerSec: s.flops}
	start := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	models := []model.Shape{s.model}
	if len(s.formats) > 0 {
		models = s.formats
	}
	info := sweep.RunInfo{
		Version: "test", CommandLine: []string{"decodebench", "sweep", "--model", s.model.Name}, Started: start, Updated: start,
		State: sweep.StateComplete, Backend: sweep.Backend{Name: "cuda", Library: "lib/libdecodebench_cuda.so", Emulated: s.emulated},
		Card: sweep.Card{Name: s.card, UUID: s.uuid, MemoryTotalBytes: 150754820096, Driver: "580.159.03", CUDAVersion: "13.0",
			SMClockMHz: 1980, MaxSMClockMHz: 1980, MemClockMHz: 3201, MaxMemClockMHz: 3201, ECCEnabled: true, PowerLimitWatts: 700, NVML: "ok",
			SMCount: 132, L2Bytes: 62914560, ComputeCapability: "9.0"},
		Datasheet: sweep.CeilingInfo{BandwidthBytesPerSec: datasheet.BandwidthBytesPerSec, FLOPsPerSec: datasheet.FLOPsPerSec, Source: gpu.Source},
		Measured:  sweep.CeilingInfo{BandwidthBytesPerSec: s.bandwidth, FLOPsPerSec: s.flops, Source: "probes"},
		Axes:      sweep.Axes{Models: models, Batches: s.batches, Contexts: s.contexts},
		Method: sweep.Method{Timing: sweep.RuleOf(timing.Default), RotateFactor: 4, Verify: true, TelemetryIntervalSeconds: 0.1,
			ReserveFraction: 0.1, MemoryBytes: 150754820096, SmallOps: sweep.SmallOpsMethod},
		Sessions: []sweep.Session{{Started: start, State: sweep.StateComplete}},
	}
	if err := d.WriteInfo(info); err != nil {
		t.Fatal(err)
	}
	ceil := sweep.Ceilings{Datasheet: datasheet, Measured: measured}
	for _, shape := range models {
		s.model = shape
		s.writeRecords(t, d, info, ceil)
	}
}

// writeRecords appends the records of s.model at every batch and context.
func (s synthRun) writeRecords(t *testing.T, d *sweep.RunDir, info sweep.RunInfo, ceil sweep.Ceilings) {
	t.Helper()
	for _, ctx := range s.contexts {
		for _, b := range s.batches {
			cfg := sweep.Config{Model: s.model, Batch: b, Context: ctx}
			if roofline.MaxBatchThatFits(s.model, float64(info.Method.MemoryBytes), ctx, 0.1) < b {
				if err := d.AppendRecord(sweep.SkippedRecord(cfg, "does not fit in memory", s.emulated)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			measuredKernels := map[string]sweep.Measurement{}
			for _, k := range s.model.Kernels(b, ctx) {
				spec := sweep.SpecOf(k, s.model)
				median := math.Max(k.Bytes/s.bandwidth, k.FLOPs/s.flops)/s.efficiency + 3e-6
				m := sweep.Measurement{Key: spec.Key(), Outcome: measure.Outcome{Spec: spec, Status: measure.StatusOK, Bytes: k.Bytes, FLOPs: k.FLOPs,
					Stats:    timing.Summarize([]float64{median, median * 1.002, median * 0.998}),
					Emulated: s.emulated, AchievedBytesPerSec: k.Bytes / median, AchievedFLOPsPerSec: k.FLOPs / median,
					Verification: measure.Verification{Passed: true}}}
				m.Stats.Converged = true
				if (s.failAt == [2]int{b, ctx}) && k.Kind == model.KindAttention {
					m.Status, m.Reason = measure.StatusFailed, "verification failed: 12 NaN outputs"
				}
				if s.throttleAt == [2]int{b, ctx} {
					m.Telemetry = telemetryThrottled()
				}
				measuredKernels[spec.Key()] = m
			}
			if err := d.AppendRecord(sweep.Compose(cfg, measuredKernels, ceil)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
