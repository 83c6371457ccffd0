package validate

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// correctedECCCheck counts the corrected (single-bit) ECC errors since the driver loaded. ECC
// fixes them, so they cost nothing now, but a card that keeps correcting many is a card whose
// memory is wearing out: DCGM's health watch flags single-bit errors past a threshold too. At or
// above t.CorrectedECCWarn it is a WARN; the ones that came during the suite are named.
func correctedECCCheck(o HealthObservation, t HealthThresholds) Check {
	const id = "health.ecc_corrected"
	e := o.After.ECC
	switch {
	case e == nil || (e.Supported && e.Enabled && !e.CountersRead):
		return newCheck(id, CategoryHealth, Skip, "The corrected ECC error count could not be read (see the ECC errors check).")
	case !e.Supported || !e.Enabled:
		return newCheck(id, CategoryHealth, Pass, "ECC is not on, so there are no corrected errors to count (see the ECC mode check).")
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(e.VolatileCorrected)),
		Threshold: num(float64(t.CorrectedECCWarn - 1)), Compare: "<=", Unit: "errors"}
	during := ""
	if b := o.Before.ECC; b != nil && b.CountersRead && e.VolatileCorrected > b.VolatileCorrected {
		during = fmt.Sprintf(", %d of them during this run", e.VolatileCorrected-b.VolatileCorrected)
	}
	if e.VolatileCorrected >= uint64(t.CorrectedECCWarn) {
		c.Verdict = Warn
		c.Message = fmt.Sprintf("%d corrected ECC errors since the driver loaded%s (%d or more is flagged): ECC fixed them, but a card that keeps correcting this many has failing memory; watch the count (nvidia-smi -q -d ECC) and the row remapping, and plan to replace it if it grows.",
			e.VolatileCorrected, during, t.CorrectedECCWarn)
		return c
	}
	c.Verdict = Pass
	c.Message = fmt.Sprintf("%d corrected ECC errors since the driver loaded%s, under the %d flagged.", e.VolatileCorrected, during, t.CorrectedECCWarn)
	return c
}

// memClockCheck holds the memory clock against the card's maximum (NVML's max memory clock).
// Under load a healthy card runs its memory at the maximum: a lower clock is a clock locked
// down (nvidia-smi -lmc, application clocks) or a card stuck in a low power state, and every
// memory-bound kernel (all of decode) slows with it. Idle cards may lower their memory clock
// to save power (GDDR cards do), so a low clock read only idle says nothing: SKIP.
func memClockCheck(o HealthObservation) Check {
	const id = "health.mem_clock"
	if o.MaxMemClockMHz == 0 {
		return newCheck(id, CategoryHealth, Skip, "NVML gave no maximum memory clock to hold the memory clock against.")
	}
	peak, underLoad := uint32(0), false
	if o.UnderLoad {
		for _, s := range o.During {
			peak = max(peak, s.MemClockMHz)
		}
		underLoad = peak > 0
	}
	if !underLoad {
		for _, t := range []gpuinfo.Telemetry{o.Before.Now, o.After.Now} {
			peak = max(peak, t.MemClockMHz)
		}
	}
	c := Check{ID: id, Category: CategoryHealth, Value: num(float64(peak)), Threshold: num(float64(o.MaxMemClockMHz)), Compare: ">=", Unit: "MHz"}
	switch {
	case peak == 0:
		return newCheck(id, CategoryHealth, Skip, "NVML gave no memory clock reading.")
	case peak >= o.MaxMemClockMHz:
		c.Verdict = Pass
		c.Message = fmt.Sprintf("The memory clock reached its maximum, %d MHz.", o.MaxMemClockMHz)
	case underLoad:
		c.Verdict = Warn
		c.Message = fmt.Sprintf("The memory clock peaked at %d MHz under load, below the card's maximum %d MHz, so every memory-bound kernel runs slower: reset locked memory clocks (`nvidia-smi -rmc`, `nvidia-smi -rac`), check the power state, and run again.",
			peak, o.MaxMemClockMHz)
	default:
		c.Verdict = Skip
		c.Message = fmt.Sprintf("The memory clock was %d MHz of its %d MHz maximum, but read only while the card idled (idle cards may lower it; no kernel ran on the card): run on the GPU to check it under load.",
			peak, o.MaxMemClockMHz)
	}
	return c
}
