package sweep

import (
	"fmt"

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

// refuseImplausible fails every ok record of p that its run's datasheet rules out (see
// Record.Implausible), so that no reader takes it for a speed, and names each in p.Implausible.
func (p *Prior) refuseImplausible() {
	for i, r := range p.Records {
		if why := r.Implausible(p.Info.Datasheet); why != "" {
			p.Records[i].Status, p.Records[i].Reason = measure.StatusFailed, why
			p.Implausible = append(p.Implausible, fmt.Sprintf("%s batch %d context %d: %s", r.Model, r.Batch, r.Context, why))
		}
	}
}
