package sweep

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/measure"
	"math"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/telemetry"
)

// Ceilings are the two roofs every step is held against. A ceiling that fails
// roofline.Ceiling.Validate (the emulator has no datasheet; a probe that failed measured
// nothing) gives no bound and a zero fraction.
type Ceilings struct {
	Datasheet roofline.Ceiling
	Measured  roofline.Ceiling
}

// smallOpsBandwidth is the bandwidth that bounds the small ops: the measured read bandwidth,
// else the datasheet's (and the method says so), else none.
func (c Ceilings) smallOpsBandwidth() (bytesPerSec float64, method string) {
	switch {
	case c.Measured.BandwidthBytesPerSec > 0:
		return c.Measured.BandwidthBytesPerSec, SmallOpsMethod
	case c.Datasheet.BandwidthBytesPerSec > 0:
		return c.Datasheet.BandwidthBytesPerSec, strings.Replace(SmallOpsMethod, "measured read", "datasheet (the read probe measured nothing)", 1)
	}
	return 0, "not counted: no bandwidth was measured to bound them"
}

// Compose builds the record of cfg from the measurements of its kernels (by Spec key), which
// must all be there. The step is failed when a kernel failed, skipped when a kernel was
// skipped, and ok otherwise.
func Compose(cfg Config, measured map[string]Measurement, ceil Ceilings) Record {
	s := cfg.Model
	r := Record{
		Key: cfg.Key(), Model: s.Name, ModelKey: ModelKey(s), Batch: cfg.Batch, Context: cfg.Context,
		DType: string(s.ActivationDType()), WeightFormat: WeightDTypeLabel(s), KVDType: string(s.KVDType), TP: max(s.TP, 1),
		Status: measure.StatusOK, Converged: true, RecordedAt: time.Now().UTC(),
	}
	var windows []telemetry.Summary
	var failed, skipped []string
	kernels := s.Kernels(cfg.Batch, cfg.Context)
	// A step stops measuring at its first kernel that is not ok; the rest are not measured.
	stepBroken := false
	for _, k := range kernels {
		if m, ok := measured[SpecOf(k, s).Key()]; ok && !m.OK() {
			stepBroken = true
		}
	}
	for _, k := range kernels {
		spec := SpecOf(k, s)
		m, ok := measured[spec.Key()]
		if !ok {
			reason := "not measured (internal error: missing from the cache)"
			if stepBroken {
				reason = "not measured: another kernel of the step was not ok"
			}
			r.Kernels = append(r.Kernels, KernelEntry{Name: k.Name, Kind: k.Kind, Key: spec.Key(), Repeat: k.Repeat,
				Status: measure.StatusNotMeasured, Reason: reason, Bytes: k.Bytes, FLOPs: k.FLOPs})
			if !stepBroken {
				failed = append(failed, fmt.Sprintf("%s (%s): %s", k.Name, spec.Label(), reason))
			}
			continue
		}
		e := KernelEntry{
			Name: k.Name, Kind: k.Kind, Key: spec.Key(), Repeat: k.Repeat, Status: m.Status, Reason: m.Reason,
			Bytes: k.Bytes, FLOPs: k.FLOPs, Throttled: m.Telemetry.Throttled, Rotation: m.Rotation.Method,
			Verified: m.Verification.Passed, RelError: relError(m.Verification), NonFinite: m.Verification.NonFinite,
		}
		r.Emulated = r.Emulated || m.Emulated
		windows = append(windows, m.Telemetry)
		switch {
		case m.OK():
			st := m.Stats
			e.MedianSeconds, e.MinSeconds, e.Q1Seconds, e.Q3Seconds = st.Median, st.Min, st.Q1, st.Q3
			e.Spread, e.Samples, e.Converged = st.Spread, len(st.Samples), st.Converged
			e.StepSeconds = k.Repeat * st.Median
			e.AchievedGBps = k.Bytes / st.Median / 1e9
			e.AchievedTFLOPs = k.FLOPs / st.Median / 1e12
			r.KernelSeconds += e.StepSeconds
			r.StepBytes += k.Repeat * k.Bytes
			r.StepFLOPs += k.Repeat * k.FLOPs
			r.Converged = r.Converged && st.Converged
		case m.Status == measure.StatusSkipped:
			skipped = append(skipped, fmt.Sprintf("%s (%s): %s", k.Name, spec.Label(), m.Reason))
		default:
			if m.Status == measure.StatusOK { // ok without a time: never a speed
				e.Status, e.Reason = measure.StatusFailed, "measured no time"
			}
			failed = append(failed, fmt.Sprintf("%s (%s): %s", k.Name, spec.Label(), e.Reason))
		}
		r.Kernels = append(r.Kernels, e)
	}
	r.Telemetry = telemetry.Merge(windows...)
	r.Throttled = r.Telemetry.Throttled
	r.ThrottleReasons = throttleNames(r.Telemetry)

	switch {
	case len(failed) > 0:
		return notOK(r, measure.StatusFailed, failed)
	case len(skipped) > 0:
		return notOK(r, measure.StatusSkipped, skipped)
	}

	bandwidth, method := ceil.smallOpsBandwidth()
	r.SmallOps = SmallOps(s, cfg.Batch)
	opsSeconds, opsBytes := boundSmallOps(r.SmallOps, bandwidth)
	r.SmallOpsSeconds, r.SmallOpsMethod, r.SmallOpsGBps = opsSeconds, method, bandwidth/1e9
	r.StepBytes += opsBytes
	r.StepSeconds = r.KernelSeconds + r.SmallOpsSeconds
	r.PerRequestTokensPerSec = 1 / r.StepSeconds
	r.PerServerTokensPerSec = float64(cfg.Batch) * r.PerRequestTokensPerSec
	r.AchievedGBps = r.StepBytes / r.StepSeconds / 1e9
	r.AchievedTFLOPs = r.StepFLOPs / r.StepSeconds / 1e12
	for i := range r.Kernels {
		r.Kernels[i].Share = r.Kernels[i].StepSeconds / r.StepSeconds
	}

	datasheet := roofline.StepBound(s, ceil.Datasheet, cfg.Batch, cfg.Context)
	measuredBound := roofline.StepBound(s, ceil.Measured, cfg.Batch, cfg.Context)
	r.BoundSecondsDatasheet, r.BoundSecondsMeasured = datasheet.StepSeconds, measuredBound.StepSeconds
	r.BoundLimit = measuredBound.Limit
	if r.BoundLimit == "" {
		r.BoundLimit = datasheet.Limit
	}
	r.RooflineFractionDatasheet = roofline.Efficiency(r.StepSeconds, datasheet)
	r.RooflineFractionMeasured = roofline.Efficiency(r.StepSeconds, measuredBound)
	r.RooflineFraction = r.RooflineFractionMeasured
	return r
}

// notOK turns r into a failed or skipped record: no times, the kernels' reasons joined.
func notOK(r Record, status string, reasons []string) Record {
	r.Status, r.Reason = status, strings.Join(reasons, "; ")
	r.KernelSeconds, r.StepBytes, r.StepFLOPs, r.Converged = 0, 0, 0, false
	return r
}

// SkippedRecord is the record of a configuration that was not run, with the reason.
func SkippedRecord(cfg Config, reason string, emulated bool) Record {
	s := cfg.Model
	return Record{
		Key: cfg.Key(), Model: s.Name, ModelKey: ModelKey(s), Batch: cfg.Batch, Context: cfg.Context,
		DType: string(s.ActivationDType()), WeightFormat: WeightDTypeLabel(s), KVDType: string(s.KVDType), TP: max(s.TP, 1),
		Status: measure.StatusSkipped, Reason: reason, Emulated: emulated, RecordedAt: time.Now().UTC(),
	}
}

// relError is a verification's relative error, nil where none is defined: an output that
// held NaN or infinities (whose RelError reads 0), or nothing checked.
func relError(v measure.Verification) *float64 {
	if v.NonFinite > 0 || v.Checked == 0 || math.IsNaN(v.RelError) || math.IsInf(v.RelError, 0) {
		return nil
	}
	e := v.RelError
	return &e
}

// throttleNames are the reasons of ThrottleMask seen in s.
func throttleNames(s telemetry.Summary) []string {
	if !s.Throttled {
		return nil
	}
	names, _ := gpuinfo.DecodeClockEventReasons(s.ThrottleReasons & gpuinfo.ThrottleMask)
	return names
}
