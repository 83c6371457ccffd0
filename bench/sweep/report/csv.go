package report

import (
	"bytes"
	"encoding/csv"
	"github.com/decodebench/decodebench/bench/measure"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/sweep"
)

// csvColumns are the columns of results.csv: the scalar fields of a record under their JSON
// names, then one <kernel>_step_seconds column per kernel name (Repeat x median: its share of
// the step), in the order the step launches them.
var csvColumns = []string{
	"key", "model", "model_key", "batch", "context", "dtype", "weight_format", "kv_dtype", "tp", "status", "reason",
	"step_seconds", "kernel_seconds", "small_ops_seconds", "per_request_tokens_per_s", "per_server_tokens_per_s",
	"step_bytes", "step_flops", "achieved_gbps", "achieved_tflops",
	"bound_step_seconds_datasheet", "bound_step_seconds_measured", "bound_limit",
	"roofline_fraction", "roofline_fraction_datasheet", "roofline_fraction_measured",
	"throttled", "throttle_reasons", "converged", "emulated",
	"sm_clock_mhz_min", "sm_clock_mhz_max", "mem_clock_mhz_min", "temperature_c_max", "power_watts_max",
	"recorded_at",
}

// CSV renders records as results.csv. Failed and skipped rows leave the numbers empty.
func CSV(records []sweep.Record) []byte {
	var kernelNames []string
	seen := map[string]bool{}
	for _, r := range records {
		for _, k := range r.Kernels {
			if !seen[k.Name] {
				seen[k.Name] = true
				kernelNames = append(kernelNames, k.Name)
			}
		}
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	header := append([]string(nil), csvColumns...)
	for _, name := range kernelNames {
		header = append(header, name+"_step_seconds")
	}
	w.Write(header)
	for _, r := range records {
		ok := r.Status == measure.StatusOK
		num := func(v float64) string {
			if !ok {
				return ""
			}
			return strconv.FormatFloat(v, 'g', 8, 64)
		}
		row := []string{
			r.Key, r.Model, r.ModelKey, strconv.Itoa(r.Batch), strconv.Itoa(r.Context), r.DType, r.WeightFormat, r.KVDType, strconv.Itoa(r.TP),
			r.Status, r.Reason,
			num(r.StepSeconds), num(r.KernelSeconds), num(r.SmallOpsSeconds), num(r.PerRequestTokensPerSec), num(r.PerServerTokensPerSec),
			num(r.StepBytes), num(r.StepFLOPs), num(r.AchievedGBps), num(r.AchievedTFLOPs),
			num(r.BoundSecondsDatasheet), num(r.BoundSecondsMeasured), r.BoundLimit,
			num(r.RooflineFraction), num(r.RooflineFractionDatasheet), num(r.RooflineFractionMeasured),
			strconv.FormatBool(r.Throttled), strings.Join(r.ThrottleReasons, "; "), strconv.FormatBool(r.Converged), strconv.FormatBool(r.Emulated),
			uintOrEmpty(r.Telemetry.SMClockMHzMin), uintOrEmpty(r.Telemetry.SMClockMHzMax), uintOrEmpty(r.Telemetry.MemClockMHzMin),
			intOrEmpty(r.Telemetry.TemperatureCMax), floatOrEmpty(r.Telemetry.PowerWattsMax),
			r.RecordedAt.Format("2006-01-02T15:04:05Z07:00"),
		}
		perKernel := map[string]float64{}
		for _, k := range r.Kernels {
			perKernel[k.Name] += k.StepSeconds
		}
		for _, name := range kernelNames {
			v, has := perKernel[name]
			if !has || !ok {
				row = append(row, "")
				continue
			}
			row = append(row, num(v))
		}
		w.Write(row)
	}
	w.Flush()
	return buf.Bytes()
}

func uintOrEmpty(v uint32) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(v), 10)
}

func intOrEmpty(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

func floatOrEmpty(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
