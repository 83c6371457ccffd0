package report

import (
	"bytes"
	"encoding/csv"
	"strconv"

	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/step"
)

// StepsCSVFile is the whole steps of a run as a table, beside results.csv.
const StepsCSVFile = "steps.csv"

// stepCSVColumns are the scalar fields of a step.Record under their JSON names, a step time's
// fields prefixed by graph_, eager_ or composed_.
var stepCSVColumns = func() []string {
	cols := []string{"key", "model", "model_key", "batch", "context", "steps", "dtype", "tp", "tp_note", "status", "reason"}
	for _, m := range []string{"graph", "eager", "composed"} {
		for _, f := range []string{"status", "step_seconds", "per_request_tokens_per_s", "per_server_tokens_per_s",
			"roofline_fraction_datasheet", "roofline_fraction_measured"} {
			cols = append(cols, m+"_"+f)
		}
	}
	return append(cols, "graph_host_seconds_per_step", "eager_host_seconds_per_step",
		"bound_step_seconds_datasheet", "bound_step_seconds_measured", "bound_limit",
		"launch_gap_seconds", "launch_gap_share", "run_together_seconds", "run_together_share",
		"launches", "device_bytes", "throttled", "emulated", "recorded_at", "verified", "verification")
}()

// StepsCSV renders step records as steps.csv, every number in every digit; a time that was
// not measured is empty.
func StepsCSV(records []step.Record) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write(stepCSVColumns)
	num := func(v float64, have bool) string {
		if !have {
			return ""
		}
		return format.Exact(v)
	}
	for _, r := range records {
		row := []string{r.Key, r.Model, r.ModelKey, strconv.Itoa(r.Batch), strconv.Itoa(r.Context), strconv.Itoa(r.Steps), r.DType,
			strconv.Itoa(r.TP), r.TPNote, r.Status, r.Reason}
		for _, t := range []step.StepTime{r.Graph, r.Eager, r.Composed} {
			ok := t.OK()
			row = append(row, t.Status, num(t.StepSeconds, ok), num(t.PerRequestTokensPerSec, ok), num(t.PerServerTokensPerSec, ok),
				num(t.RooflineFractionDatasheet, ok && t.RooflineFractionDatasheet > 0), num(t.RooflineFractionMeasured, ok && t.RooflineFractionMeasured > 0))
		}
		host := func(t step.StepTime) string {
			if t.Timed == nil || !t.OK() {
				return ""
			}
			return num(t.Timed.HostSecondsPerStep, true)
		}
		launch, together := r.Graph.OK() && r.Eager.OK(), r.Graph.OK() && r.Composed.OK()
		row = append(row, host(r.Graph), host(r.Eager),
			num(r.BoundSecondsDatasheet, r.BoundSecondsDatasheet > 0), num(r.BoundSecondsMeasured, r.BoundSecondsMeasured > 0), r.BoundLimit,
			num(r.LaunchGapSeconds, launch), num(r.LaunchGapShare, launch), num(r.RunTogetherSeconds, together), num(r.RunTogetherShare, together),
			strconv.Itoa(r.Launches), strconv.FormatUint(r.DeviceBytes, 10), strconv.FormatBool(r.Throttled), strconv.FormatBool(r.Emulated),
			r.RecordedAt.Format("2006-01-02T15:04:05Z07:00"), strconv.FormatBool(r.Verification.Verified), r.Verification.How())
		w.Write(row)
	}
	w.Flush()
	return buf.Bytes()
}
