package validate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// Sample is one reading taken while the suite ran: telemetry, and the PCIe link (nil when NVML
// could not give it), which trains up to its full speed only under load.
type Sample struct {
	gpuinfo.Telemetry
	PCIe *gpuinfo.PCIeLink `json:"pcie,omitempty"`
}

// HealthObservation is everything the health checks look at for one card.
type HealthObservation struct {
	// Before is read when the card went idle, before the suite; After once the suite is done.
	// Memory errors and remaps that happened during the run show in After.
	Before, After gpuinfo.Health
	// During are the readings taken while the suite ran; UnderLoad says kernels did run then
	// on the card (not so for a busy card, whose suite is skipped, nor on the emulator, which
	// runs them on the CPU).
	During    []Sample
	UnderLoad bool
	// MaxMemClockMHz is the card's maximum memory clock (NVML; 0 when unknown).
	MaxMemClockMHz uint32
	// Busy lists the other processes still on the card when the wait for it to go idle ended
	// (empty: idle); WaitedSeconds is how long that wait took.
	Busy          []gpuinfo.Process
	WasBusy       bool // another process was there when the wait began
	WaitedSeconds float64
	IdleWaitLimit float64 // seconds: how long the wait was allowed to take
}

// Throttle reasons that fail a card: the card slowing itself down for a hardware fault, heat or
// a power-supply brake. The software power cap is not among them: a card at its power limit
// under full load is working as designed.
const failThrottleMask = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown |
	nvml.ClocksThrottleReasonHwPowerBrakeSlowdown | nvml.ClocksEventReasonSwThermalSlowdown

// HealthChecks turns one card's observation into checks: ECC, memory errors (uncorrectable and
// corrected), retired pages, row remapping, PCIe link, throttling, memory clock, temperature,
// power and other users.
func HealthChecks(o HealthObservation, t HealthThresholds) []Check {
	after := o.After
	return []Check{
		eccModeCheck(after),
		eccErrorsCheck(after),
		correctedECCCheck(o, t),
		retiredPagesCheck(after, t),
		rowRemapCheck(after),
		pcieCheck(o),
		throttleCheck(o),
		memClockCheck(o),
		temperatureCheck(o, t),
		powerCheck(o, t),
		idleCheck(o),
	}
}

// unreadable is the WARN for a group NVML would not give: a check nobody ran must not pass.
func unreadable(id, what, hint string, h gpuinfo.Health) Check {
	why := "NVML did not give it"
	for _, u := range h.Unavailable {
		if strings.HasPrefix(u, what) {
			why = u
			break
		}
	}
	return newCheck(id, CategoryHealth, Warn, "Could not read %s (%s); check it by hand with %s.", what, why, hint)
}

func eccModeCheck(h gpuinfo.Health) Check {
	const id = "health.ecc_mode"
	e := h.ECC
	switch {
	case e == nil:
		return unreadable(id, "ECC mode", "nvidia-smi -q -d ECC", h)
	case !e.Supported:
		return newCheck(id, CategoryHealth, Pass, "This card has no ECC memory; nothing to check.")
	case !e.Enabled && e.PendingEnabled:
		c := newCheck(id, CategoryHealth, Fail, "ECC is off now and turns on at the next reboot: reboot the node (or reset the GPU) before production.")
		c.ValueText, c.ThresholdText = "off (on after reboot)", "on"
		return c
	case !e.Enabled:
		c := newCheck(id, CategoryHealth, Fail, "ECC is off: memory errors would go undetected; turn it on with `nvidia-smi -e 1` and reboot.")
		c.ValueText, c.ThresholdText = "off", "on"
		return c
	case !e.PendingEnabled:
		c := newCheck(id, CategoryHealth, Warn, "ECC is on now but is set to turn off at the next reboot; turn it back on with `nvidia-smi -e 1`.")
		c.ValueText, c.ThresholdText = "on (off after reboot)", "on"
		return c
	}
	c := newCheck(id, CategoryHealth, Pass, "ECC is on.")
	c.ValueText, c.ThresholdText = "on", "on"
	return c
}

func eccErrorsCheck(h gpuinfo.Health) Check {
	const id = "health.ecc_errors"
	e := h.ECC
	switch {
	case e == nil:
		return unreadable(id, "ECC mode", "nvidia-smi -q -d ECC", h)
	case !e.Supported || !e.Enabled:
		return newCheck(id, CategoryHealth, Pass, "ECC is not on, so there are no error counts to read (see the ECC mode check).")
	case !e.CountersRead:
		return unreadable(id, "volatile uncorrectable ECC errors", "nvidia-smi -q -d ECC", h)
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(e.VolatileUncorrected)), Threshold: num(0), Compare: "<=", Unit: "errors"}
	switch {
	case e.VolatileUncorrected > 0:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("%d uncorrectable ECC error(s) since the driver loaded: drain the node, reset the GPU (nvidia-smi -r) or reboot and run again; if they come back, return the card (RMA).", e.VolatileUncorrected)
	case e.AggregateUncorrected > 0:
		c.Verdict = Warn
		c.Message = fmt.Sprintf("No uncorrectable ECC error since the driver loaded, but %d over the card's life: keep an eye on it.", e.AggregateUncorrected)
	default:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("No uncorrectable ECC errors (%d corrected since the driver loaded).", e.VolatileCorrected)
	}
	return c
}

func retiredPagesCheck(h gpuinfo.Health, t HealthThresholds) Check {
	const id = "health.retired_pages"
	r := h.RetiredPages
	switch {
	case r == nil:
		return unreadable(id, "retired pages", "nvidia-smi -q -d PAGE_RETIREMENT", h)
	case !r.Supported:
		return newCheck(id, CategoryHealth, Pass, "This card does not retire pages (Ampere and later remap rows instead; see the row remapping check).")
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(r.Total())), Threshold: num(float64(t.RetiredPagesFail - 1)), Compare: "<=", Unit: "pages"}
	switch {
	case r.Pending:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("A page waits to be retired (%d retired so far): reboot the node or reset the GPU (nvidia-smi -r) so the driver retires it, then run again.", r.Total())
	case r.Total() >= t.RetiredPagesFail:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("%d retired pages (%d after uncorrectable errors), at or past the %d at which NVIDIA replaces a card: return it (RMA).", r.Total(), r.DoubleBit, t.RetiredPagesFail)
	case r.Total() > 0:
		c.Verdict = Warn
		c.Message = fmt.Sprintf("%d retired pages (%d after uncorrectable errors), none pending: the card works around them; watch the count.", r.Total(), r.DoubleBit)
	default:
		c.Verdict = Pass
		c.Message = "No retired pages, none pending."
	}
	return c
}

func rowRemapCheck(h gpuinfo.Health) Check {
	const id = "health.row_remapping"
	r := h.RowRemapping
	switch {
	case r == nil:
		return unreadable(id, "row remapping", "nvidia-smi -q -d ROW_REMAPPER", h)
	case !r.Supported:
		return newCheck(id, CategoryHealth, Pass, "This card does not remap rows (before Ampere; see the retired pages check).")
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(r.Uncorrectable)), Unit: "rows"}
	switch {
	case r.Failed:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("A row remap failed: a memory bank has no spare row left (%d rows remapped after uncorrectable errors, %d after correctable): return the card (RMA).", r.Uncorrectable, r.Correctable)
		c.ValueText = "remap failed"
	case r.Pending:
		c.Verdict = Fail
		c.Message = "A row remap is pending: reset the GPU (nvidia-smi -r) or reboot the node so it takes effect, then run again."
		c.ValueText = "remap pending"
	case r.Uncorrectable > 0:
		// As for pages retired after uncorrectable errors: the card works around them, but
		// they are a record of uncorrectable memory errors worth watching.
		c.Verdict = Warn
		c.Message = fmt.Sprintf("%d rows remapped after uncorrectable errors (%d after correctable), none pending or failed: the card works around them; watch the count.", r.Uncorrectable, r.Correctable)
	default:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("No row remap pending or failed (%d rows remapped after uncorrectable errors, %d after correctable).", r.Uncorrectable, r.Correctable)
	}
	return c
}

func linkText(gen, width int) string { return fmt.Sprintf("gen%d x%d", gen, width) }

func pcieCheck(o HealthObservation) Check {
	const id = "health.pcie_link"
	// The best link seen: an idle card trains down, so the readings under load count.
	var best *gpuinfo.PCIeLink
	consider := func(l *gpuinfo.PCIeLink) {
		if l == nil {
			return
		}
		if best == nil {
			cp := *l
			best = &cp
			return
		}
		best.Gen, best.Width = max(best.Gen, l.Gen), max(best.Width, l.Width)
	}
	underLoad := false
	for i := range o.During {
		underLoad = underLoad || (o.UnderLoad && o.During[i].PCIe != nil)
		consider(o.During[i].PCIe)
	}
	consider(o.Before.PCIe)
	consider(o.After.PCIe)
	if best == nil {
		return unreadable(id, "PCIe link", "nvidia-smi -q -d PCIE", o.After)
	}
	c := Check{ID: id, Category: CategoryHealth, ValueText: linkText(best.Gen, best.Width), ThresholdText: linkText(best.MaxGen, best.MaxWidth)}
	switch {
	case best.Width < best.MaxWidth:
		c.Verdict = Fail
		c.Value, c.Threshold, c.Compare, c.Unit = num(float64(best.Width)), num(float64(best.MaxWidth)), ">=", "lanes"
		c.Message = fmt.Sprintf("The PCIe link runs at x%d, but the card and slot allow x%d: reseat the card (or its riser or cable) and check the slot.", best.Width, best.MaxWidth)
	case best.Gen < best.MaxGen && underLoad:
		c.Verdict = Fail
		c.Value, c.Threshold, c.Compare, c.Unit = num(float64(best.Gen)), num(float64(best.MaxGen)), ">=", "PCIe generation"
		c.Message = fmt.Sprintf("The PCIe link stayed at gen%d under load, but the card and slot allow gen%d: reseat the card, check the riser or cable and the BIOS PCIe settings.", best.Gen, best.MaxGen)
	case best.Gen < best.MaxGen:
		c.Verdict = Warn
		c.Value, c.Threshold, c.Compare, c.Unit = num(float64(best.Gen)), num(float64(best.MaxGen)), ">=", "PCIe generation"
		c.Message = fmt.Sprintf("The PCIe link was at gen%d of gen%d, but only read while the card idled (idle cards train down): run again to read it under load.", best.Gen, best.MaxGen)
	case best.GPUMaxGen > best.MaxGen:
		c.Verdict = Warn
		c.Value, c.Threshold, c.Compare, c.Unit = num(float64(best.MaxGen)), num(float64(best.GPUMaxGen)), ">=", "PCIe generation"
		c.Message = fmt.Sprintf("The slot or platform holds the link to gen%d though the card does gen%d: check the BIOS PCIe settings and the slot.", best.MaxGen, best.GPUMaxGen)
	default:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("The PCIe link reached its maximum, %s.", linkText(best.Gen, best.Width))
	}
	return c
}

// telemetryReadings are the readings to judge thermals and power by: those during the run, or
// the one before it when none were taken.
func telemetryReadings(o HealthObservation) []gpuinfo.Telemetry {
	var ts []gpuinfo.Telemetry
	for _, s := range o.During {
		ts = append(ts, s.Telemetry)
	}
	if len(ts) == 0 {
		for _, t := range []gpuinfo.Telemetry{o.Before.Now, o.After.Now} {
			if !neverRead(t) {
				ts = append(ts, t)
			}
		}
	}
	return ts
}

// neverRead reports whether t is the zero Telemetry: no reading was taken at all.
func neverRead(t gpuinfo.Telemetry) bool {
	return t.SMClockMHz == 0 && t.MemClockMHz == 0 && t.TemperatureC == 0 && t.PowerWatts == 0 &&
		t.ThrottleReasons == 0 && len(t.Unavailable) == 0
}

func throttleCheck(o HealthObservation) Check {
	const id = "health.throttling"
	readings := telemetryReadings(o)
	var read, failing, powerCapped int
	reasonCounts := map[string]int{}
	for _, t := range readings {
		if slices.ContainsFunc(t.Unavailable, func(u string) bool { return strings.HasPrefix(u, "clocks event reasons") }) {
			continue
		}
		read++
		if t.ThrottleReasons&failThrottleMask != 0 {
			failing++
			names, _ := gpuinfo.DecodeClockEventReasons(t.ThrottleReasons & failThrottleMask)
			for _, n := range names {
				reasonCounts[n]++
			}
		}
		if t.ThrottleReasons&nvml.ClocksEventReasonSwPowerCap != 0 {
			powerCapped++
		}
	}
	if read == 0 {
		return unreadable(id, "clocks event reasons", "nvidia-smi -q -d PERFORMANCE", o.After)
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(failing) / float64(read)), Threshold: num(0), Compare: "<=", Unit: "fraction of readings"}
	if failing > 0 {
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(reasonCounts)) {
			parts = append(parts, fmt.Sprintf("%s in %d", n, reasonCounts[n]))
		}
		c.Verdict = Fail
		c.Message = fmt.Sprintf("The card slowed itself down during the run (%s of %d readings): check its cooling (fans, airflow, inlet temperature) and power supply, then run again.", strings.Join(parts, ", "), read)
		return c
	}
	c.Verdict = Pass
	c.Message = fmt.Sprintf("No hardware, thermal or power-brake slowdown in %d readings", read)
	if powerCapped > 0 {
		c.Message += fmt.Sprintf(" (held at its power limit in %d, normal under full load)", powerCapped)
	}
	c.Message += "."
	return c
}

func temperatureCheck(o HealthObservation, t HealthThresholds) Check {
	const id = "health.temperature"
	hottest, read := 0, false
	for _, r := range telemetryReadings(o) {
		if r.TemperatureC > 0 {
			hottest, read = max(hottest, r.TemperatureC), true
		}
	}
	if !read {
		return unreadable(id, "temperature", "nvidia-smi -q -d TEMPERATURE", o.After)
	}
	limits := o.After.Temperature
	if limits == nil {
		limits = o.Before.Temperature
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(hottest)), Unit: "°C", Compare: "<="}
	if limits == nil || limits.SlowdownC <= 0 {
		c.Verdict = Pass
		c.Message = fmt.Sprintf("Hottest reading %d °C; NVML gives no slowdown temperature to hold it against (the throttling check still covers heat).", hottest)
		return c
	}
	warnAt := limits.SlowdownC - t.TemperatureMarginC
	c.Threshold = num(float64(warnAt))
	switch {
	case hottest >= limits.SlowdownC:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("The card reached %d °C, at or past its %d °C slowdown temperature: check fans, airflow and inlet temperature.", hottest, limits.SlowdownC)
	case hottest >= warnAt:
		c.Verdict = Warn
		c.Message = fmt.Sprintf("The card reached %d °C, within %d °C of its %d °C slowdown temperature: check its cooling before it throttles.", hottest, limits.SlowdownC-hottest, limits.SlowdownC)
	default:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("Hottest reading %d °C, %d °C below the %d °C slowdown temperature.", hottest, limits.SlowdownC-hottest, limits.SlowdownC)
	}
	return c
}

func powerCheck(o HealthObservation, t HealthThresholds) Check {
	const id = "health.power"
	peak, read := 0.0, false
	for _, r := range telemetryReadings(o) {
		if r.PowerWatts > 0 {
			peak, read = max(peak, r.PowerWatts), true
		}
	}
	limits := o.After.Power
	if limits == nil {
		limits = o.Before.Power
	}
	if !read || limits == nil || limits.EnforcedWatts <= 0 {
		return unreadable(id, "power", "nvidia-smi -q -d POWER", o.After)
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(peak), Threshold: num(limits.EnforcedWatts * (1 + t.PowerOverLimit)), Compare: "<=", Unit: "W"}
	switch {
	case peak > limits.EnforcedWatts*(1+t.PowerOverLimit):
		c.Verdict = Warn
		c.Message = fmt.Sprintf("The card drew %.0f W, above its %.0f W power limit: its power sensor or limit is wrong; check with nvidia-smi -q -d POWER.", peak, limits.EnforcedWatts)
	case limits.DefaultWatts > 0 && limits.EnforcedWatts < limits.DefaultWatts*0.99:
		c.Verdict = t.PowerLimitBelowDefault
		c.ValueText, c.ThresholdText = fmt.Sprintf("limit %.0f W", limits.EnforcedWatts), fmt.Sprintf("default %.0f W", limits.DefaultWatts)
		c.Message = fmt.Sprintf("The power limit is set to %.0f W, below the card's default %.0f W, which slows it under load: restore it with `nvidia-smi -pl %.0f` unless the cap is deliberate.", limits.EnforcedWatts, limits.DefaultWatts, limits.DefaultWatts)
	default:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("Peak draw %.0f W within the %.0f W power limit.", peak, limits.EnforcedWatts)
	}
	return c
}

func idleCheck(o HealthObservation) Check {
	const id = "health.idle"
	if o.Before.Processes == nil && o.Busy == nil {
		return unreadable(id, "compute processes", "nvidia-smi (the Processes table)", o.Before)
	}
	if len(o.Busy) > 0 {
		var procs []string
		for _, p := range o.Busy {
			s := fmt.Sprintf("pid %d", p.PID)
			if p.UsedMemoryBytes > 0 {
				s += fmt.Sprintf(" using %.1f GiB", float64(p.UsedMemoryBytes)/(1<<30))
			}
			procs = append(procs, s)
		}
		c := Check{ID: id, Category: CategoryHealth, Verdict: Fail, Value: num(float64(len(o.Busy))), Threshold: num(0), Compare: "<=", Unit: "processes"}
		c.Message = fmt.Sprintf("Another process was still using the card after waiting %.0f s (%s): its measurements are not trustworthy; stop it (or drain the node) and run again.", o.WaitedSeconds, strings.Join(procs, ", "))
		return c
	}
	c := Check{ID: id, Category: CategoryHealth, Verdict: Pass, Value: num(0), Threshold: num(0), Compare: "<=", Unit: "processes"}
	if o.WasBusy {
		c.Message = fmt.Sprintf("No other process on the card (it went idle after %.1f s).", o.WaitedSeconds)
	} else {
		c.Message = "No other process on the card."
	}
	return c
}
