package main

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench bench probe`: the bandwidth and compute ceilings, against the datasheet where known.

func benchProbeCommand() *cli.Command {
	var names []string
	var subs []*cli.Command
	for _, kind := range cgo.ProbeKinds {
		names = append(names, kind.String())
		subs = append(subs, benchProbeKindCommand(kind.String(), []cgo.ProbeKind{kind}))
	}
	subs = append(subs, benchProbeKindCommand("all", cgo.ProbeKinds))
	all := benchProbeKindCommand("probe", cgo.ProbeKinds)
	all.Usage = "measure the ceilings: read, write, copy and triad bandwidth (GB/s), fma and mma rates (TFLOP/s); all by default"
	all.UsageText = "decodebench bench probe [" + strings.Join(names, "|") + "|all] [--bytes B] [--iterations N] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]"
	all.Subcommands = subs
	return all
}

func benchProbeKindCommand(name string, kinds []cgo.ProbeKind) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: "verify, then time the " + name + " probe",
		Flags: append([]cli.Flag{
			&cli.Uint64Flag{Name: "bytes",
				Usage: "bytes of each buffer of the memory probes, a multiple of 16; 0 = max(32x L2, 1 GiB) within half the free memory"},
			&cli.IntFlag{Name: "iterations",
				Usage: fmt.Sprintf("loop trips of the compute probes; 0 = %d", measure.DefaultComputeIterations)},
		}, benchFlags()...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("bench probe: unknown probe %q (want read, write, copy, triad, fma, mma or all)", c.Args().First())
			}
			return benchProbeAction(c, kinds)
		},
	}
}

// mmaCeilingLabel names the compute ceiling the mma probe measures: mma.sync m16n8k16 bf16 with
// fp32 accumulation, which on Hopper is not the card's fastest tensor path (wgmma), so it is
// never called the card's tensor peak.
const mmaCeilingLabel = "mma.sync bf16 ceiling"

// datasheet is the card's published ceilings, where something knows them.
type datasheet struct {
	bandwidth, tensorFLOPs, fp32FLOPs float64
	source                            string
}

// lookupDatasheet finds the card's datasheet numbers: the spec table by the device's name and
// memory, else NVML's memory clock x bus width x 2 for the bandwidth. Nothing for the emulator.
func lookupDatasheet(lib *cgo.Library, props cgo.DeviceProps) datasheet {
	if lib.Emulated() {
		return datasheet{}
	}
	if g, ok := roofline.MatchNVML(props.Name, props.MemTotalBytes); ok {
		return datasheet{g.BandwidthBytesPerSec, g.TensorBF16FLOPs, g.FP32FLOPs, "spec table: " + g.Name + " (" + g.Source + ")"}
	}
	if sys, err := gpuinfo.Open(); err == nil {
		for _, d := range sys.Devices {
			if d.Name == props.Name && d.DatasheetBandwidthBytesPerSec > 0 {
				return datasheet{bandwidth: d.DatasheetBandwidthBytesPerSec, source: "NVML: max memory clock x bus width x 2"}
			}
		}
	}
	return datasheet{}
}

// probeRecord fills a probe's record, with its fraction of the datasheet where known.
func (s *benchSession) probeRecord(o measure.Outcome, tel telemetry.Summary, kind cgo.ProbeKind, ds datasheet) benchRecord {
	r := s.record("probe", o.Kernel, o, tel)
	r.Probe = kind.String()
	r.ReadCeilingGBps, r.FractionOfRead = 0, 0
	r.BufferBytes, r.Iterations = o.Plan.BufferBytes, o.Plan.Iterations
	switch {
	case kind.Memory() && ds.bandwidth > 0:
		r.DatasheetGBps, r.DatasheetSource = ds.bandwidth/1e9, ds.source
		if o.Status == measure.StatusOK {
			r.FractionOfDatasheet = o.AchievedBytesPerSec / ds.bandwidth
		}
	case kind == cgo.ProbeFMAF32 && ds.fp32FLOPs > 0, kind == cgo.ProbeMMABF16 && ds.tensorFLOPs > 0:
		peak := ds.fp32FLOPs
		if kind == cgo.ProbeMMABF16 {
			peak = ds.tensorFLOPs
		}
		r.DatasheetTFLOPs, r.DatasheetSource = peak/1e12, ds.source
		if o.Status == measure.StatusOK {
			r.FractionOfDatasheet = o.AchievedFLOPsPerSec / peak
		}
	}
	return r
}

func benchProbeAction(c *cli.Context, kinds []cgo.ProbeKind) error {
	bytes, iterations := c.Uint64("bytes"), c.Int("iterations")
	if bytes%16 != 0 || bytes > 1<<44 {
		return usageError("--bytes %d: want a multiple of 16 (the probes move 16-byte vectors), or 0 for auto", bytes)
	}
	if iterations < 0 {
		return usageError("--iterations %d: want 0 (auto) or a count of loop trips", iterations)
	}
	settings, err := parseBenchSettings(c, false)
	if err != nil {
		return err
	}
	s, err := openBench(c, settings, "probe", nil)
	if err != nil {
		return err
	}
	defer s.close()
	var ds datasheet
	if props, err := s.dev.Props(); err == nil {
		ds = lookupDatasheet(s.lib, props)
	}
	if ds.source != "" {
		s.say("datasheet: %s\n", ds.source)
	} else {
		s.say("datasheet: unknown for this device (no spec row or NVML reading)\n")
	}
	if err := s.launchBaseline(); err != nil {
		return err
	}
	s.say("%-6s %10s %11s %7s %14s %11s  %s\n", "PROBE", "SIZE", "MEDIAN", "SPREAD", "RATE", "% DATASHEET", "NOTE")
	for i, kind := range kinds {
		o, tel := s.measure(func() measure.Outcome {
			return measure.Probe(s.dev, measure.ProbeSpec{Kind: kind, Bytes: bytes, Iterations: iterations}, settings.opts)
		})
		s.progress(i+1, len(kinds), "probe "+kind.String(), o)
		r := s.probeRecord(o, tel, kind, ds)
		if err := s.emit(r, "probe "+kind.String()); err != nil {
			return err
		}
		size, rate := fmt.Sprintf("%d iter", r.Iterations), fmt.Sprintf("%.2f TFLOP/s", o.AchievedFLOPsPerSec/1e12)
		if kind.Memory() {
			size, rate = units.Bytes(float64(r.BufferBytes)), fmt.Sprintf("%.0f GB/s", o.AchievedBytesPerSec/1e9)
		}
		n := note(o, tel)
		if kind == cgo.ProbeMMABF16 { // what the sweep's compute roof is, and what it is not
			n = strings.TrimSuffix(mmaCeilingLabel+" (% DATASHEET: of the dense bf16 tensor rate); "+n, "; ")
		}
		s.say("%-6s %10s %11s %6.2f%% %14s %11s  %s\n", kind, size, micros(o.Stats.Median), 100*o.Stats.Spread, rate,
			percent(r.FractionOfDatasheet), n)
	}
	return s.finish()
}
