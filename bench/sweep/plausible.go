package sweep

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/measure"
)

// Implausible says why the ok record r, as read back from results.jsonl, claims a speed that
// the datasheet ceiling ds rules out ("" if it does not): its per-server tokens/s against its
// own datasheet roofline bound, its bandwidth and arithmetic rate against ds. A record is
// checked when it is measured (bench/measure refuses each implausible kernel), and again
// wherever it is read (report, plan, compare, resume), by measure.Implausible: a file edited,
// forged or written by a faulty build must not become a speed.
func (r Record) Implausible(ds CeilingInfo) string {
	if r.Status != measure.StatusOK {
		return ""
	}
	inCache := r.StepBytes < measure.CacheableBytes
	var why string
	if r.BoundSecondsDatasheet > 0 {
		why = measure.Implausible("per-server rate", r.PerServerTokensPerSec, float64(r.Batch)/r.BoundSecondsDatasheet, measure.UnitTokensPerSec, inCache)
	}
	if why == "" {
		why = measure.Implausible("step bandwidth", r.AchievedGBps*1e9, ds.BandwidthBytesPerSec, measure.UnitBytesPerSec, inCache)
	}
	if why == "" {
		why = measure.Implausible("step arithmetic rate", r.AchievedTFLOPs*1e12, ds.FLOPsPerSec, measure.UnitFLOPsPerSec, false)
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("%s: %s", measure.ImplausibleReason, why)
}

// Inconsistent says why the ok record r does not add up ("" if it does): its step time must be
// its kernels' calls x medians plus its small ops, its rates 1 and Batch over that, as Compose
// made them. A line edited by hand (a rate halved, a kernel entry doubled) is not a record.
func (r Record) Inconsistent() string {
	if r.Status != measure.StatusOK {
		return ""
	}
	var kernels float64
	for _, e := range r.Kernels {
		if e.Status == measure.StatusOK {
			kernels += e.Repeat * e.MedianSeconds
		}
	}
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-6*math.Max(math.Abs(x), math.Abs(y)) }
	switch {
	case !(r.StepSeconds > 0) || math.IsInf(r.StepSeconds, 1):
		return fmt.Sprintf("its step time %g s is not a positive number", r.StepSeconds)
	case !near(kernels, r.KernelSeconds) || !near(r.KernelSeconds+r.SmallOpsSeconds, r.StepSeconds):
		return fmt.Sprintf("its step time %.6g s is not its kernels' %.6g s plus its small ops' %.6g s", r.StepSeconds, kernels, r.SmallOpsSeconds)
	case !near(r.PerRequestTokensPerSec*r.StepSeconds, 1) || !near(r.PerServerTokensPerSec, float64(r.Batch)*r.PerRequestTokensPerSec):
		return fmt.Sprintf("its rates (%.6g tokens/s per request, %.6g per server) are not 1 and batch %d over its step time %.6g s",
			r.PerRequestTokensPerSec, r.PerServerTokensPerSec, r.Batch, r.StepSeconds)
	}
	return ""
}

// refuseImplausible fails every ok record of p that does not add up (Record.Inconsistent) or
// that its run's datasheet rules out (Record.Implausible), so that no reader takes it for a
// speed, and names each in p.Implausible.
func (p *Prior) refuseImplausible() {
	for i, r := range p.Records {
		why := r.Implausible(p.Info.Datasheet)
		if bad := r.Inconsistent(); bad != "" {
			why = "inconsistent record: " + bad
		}
		if why != "" {
			p.Records[i].Status, p.Records[i].Reason = measure.StatusFailed, why
			p.Implausible = append(p.Implausible, fmt.Sprintf("%s batch %d context %d: %s", r.Model, r.Batch, r.Context, why))
		}
	}
}
