package report

import (
	"bytes"
	"math"
	"strings"

	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
)

// resultColumns are the columns of results.csv (and of `sweep --format`): who measured (the
// card, its UUID, driver and CUDA version, decodebench's version: on every row, so that the
// CSVs of several boxes concatenate, as llama-bench's do), then the scalar fields of a record
// under their JSON names, then one <kernel>_step_seconds column per kernel name (Repeat x
// median: its share of the step), in the order the step launches them.
var resultColumns = []string{
	"card", "card_uuid", "driver", "cuda_version", "decodebench_version",
	"key", "model", "model_key", "batch", "context", "dtype", "weight_format", "kv_dtype", "tp", "status", "reason",
	"step_seconds", "kernel_seconds", "small_ops_seconds", "per_request_tokens_per_s", "per_server_tokens_per_s",
	"step_bytes", "step_flops", "achieved_gbps", "achieved_tflops",
	"bound_step_seconds_datasheet", "bound_step_seconds_measured", "bound_limit",
	"roofline_fraction", "roofline_fraction_datasheet", "roofline_fraction_measured",
	"throttled", "throttle_reasons", "converged", "emulated",
	"sm_clock_mhz_min", "sm_clock_mhz_max", "mem_clock_mhz_min", "temperature_c_max", "power_watts_max",
	"recorded_at",
}

// ResultRows are a run's records as rows, one a configuration, in every --format: a value
// that is missing (a failed or skipped configuration's times, a ceiling the run does not
// know, telemetry NVML did not give) is nil, so it prints empty or null, never 0. A record
// written before records carried their identity takes the run's (run.json's card and first
// session).
func ResultRows(info sweep.RunInfo, records []sweep.Record) format.Rows {
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
	rows := format.Rows{Columns: append([]string(nil), resultColumns...)}
	for _, name := range kernelNames {
		rows.Columns = append(rows.Columns, name+"_step_seconds")
	}
	runIdentity := sweep.IdentityOf(info, info.Version)
	for _, r := range records {
		ok := r.Status == measure.StatusOK
		num := func(v float64) any {
			if !ok || v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil
			}
			return v
		}
		id := r.Identity
		if id == (sweep.Identity{}) {
			id = runIdentity
		}
		row := []any{
			text(id.Card), text(id.CardUUID), text(id.Driver), text(id.CUDAVersion), text(id.Version),
			r.Key, r.Model, r.ModelKey, r.Batch, r.Context, r.DType, r.WeightFormat, r.KVDType, r.TP,
			r.Status, r.Reason,
			num(r.StepSeconds), num(r.KernelSeconds), num(r.SmallOpsSeconds), num(r.PerRequestTokensPerSec), num(r.PerServerTokensPerSec),
			num(r.StepBytes), num(r.StepFLOPs), num(r.AchievedGBps), num(r.AchievedTFLOPs),
			num(r.BoundSecondsDatasheet), num(r.BoundSecondsMeasured), text(r.BoundLimit),
			num(r.RooflineFraction), num(r.RooflineFractionDatasheet), num(r.RooflineFractionMeasured),
			r.Throttled, text(strings.Join(r.ThrottleReasons, "; ")), r.Converged, r.Emulated,
			known(float64(r.Telemetry.SMClockMHzMin)), known(float64(r.Telemetry.SMClockMHzMax)), known(float64(r.Telemetry.MemClockMHzMin)),
			known(float64(r.Telemetry.TemperatureCMax)), known(r.Telemetry.PowerWattsMax),
			r.RecordedAt.Format("2006-01-02T15:04:05Z07:00"),
		}
		perKernel := map[string]float64{}
		for _, k := range r.Kernels {
			perKernel[k.Name] += k.StepSeconds
		}
		for _, name := range kernelNames {
			v, has := perKernel[name]
			if !has {
				row = append(row, nil)
				continue
			}
			row = append(row, num(v))
		}
		rows.Add(row...)
	}
	return rows
}

// CSV renders records as results.csv: ResultRows, every number in every digit.
func CSV(info sweep.RunInfo, records []sweep.Record) []byte {
	var buf bytes.Buffer
	format.Write(&buf, format.CSV, ResultRows(info, records)) // a bytes.Buffer does not fail
	return buf.Bytes()
}

// known is a telemetry reading, nil where NVML gave none (zero).
func known(v float64) any {
	if v == 0 || math.IsNaN(v) {
		return nil
	}
	return v
}

// text is a string, nil where empty: null in JSON rather than "".
func text(s string) any {
	if s == "" {
		return nil
	}
	return s
}
