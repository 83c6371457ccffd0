package report

import (
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/telemetry"
)

// results.csv: the card's identity on every row (a record's own, or run.json's for a record
// written before records carried it), every digit of a number, and a missing value (a failed
// configuration's times, an unknown ceiling, a clock NVML did not give) empty, never 0.
func TestResultsCSVIdentityAndMissingValues(t *testing.T) {
	info := sweep.RunInfo{Version: "v0-old", Card: sweep.Card{Name: "NVIDIA H200", UUID: "GPU-1", Driver: "560.35.03", CUDAVersion: "12.6"}}
	at := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	ok := sweep.Record{Key: "b1", Model: "Llama-3-8B", Batch: 1, Context: 1024, Status: measure.StatusOK, StepSeconds: 0.0033507498666666665,
		RooflineFractionMeasured: 0.91, RooflineFraction: 0.91, Telemetry: telemetry.Summary{SMClockMHzMin: 1980}, RecordedAt: at,
		Identity: sweep.Identity{Card: "NVIDIA H200", CardUUID: "GPU-1", Driver: "570.1", CUDAVersion: "12.8", Version: "v1-new"}}
	failed := sweep.Record{Key: "b2", Model: "Llama-3-8B", Batch: 2, Context: 1024, Status: measure.StatusFailed, Reason: "NaN", RecordedAt: at}
	rows, err := csv.NewReader(strings.NewReader(string(CSV(info, []sweep.Record{ok, failed})))).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	get := func(row int, name string) string {
		i, has := col[name]
		if !has {
			t.Fatalf("no column %q in %v", name, rows[0])
		}
		return rows[row][i]
	}
	for _, tc := range []struct {
		row        int
		name, want string
	}{
		{1, "card", "NVIDIA H200"}, {1, "card_uuid", "GPU-1"}, {1, "driver", "570.1"}, {1, "cuda_version", "12.8"}, {1, "decodebench_version", "v1-new"},
		{2, "driver", "560.35.03"}, {2, "decodebench_version", "v0-old"}, // from run.json
		{1, "recorded_at", "2026-12-05T01:02:03Z"},
		{1, "step_seconds", "0.0033507498666666665"}, // every digit
		{1, "roofline_fraction_datasheet", ""},       // no datasheet ceiling: unknown, not 0
		{1, "sm_clock_mhz_min", "1980"}, {1, "mem_clock_mhz_min", ""},
		{2, "step_seconds", ""}, {2, "per_server_tokens_per_s", ""}, {2, "roofline_fraction", ""},
	} {
		if got := get(tc.row, tc.name); got != tc.want {
			t.Errorf("row %d %s = %q, want %q", tc.row, tc.name, got, tc.want)
		}
	}
	if rows[0][0] != "card" {
		t.Errorf("the identity comes first, as in llama-bench's CSV: header %v", rows[0])
	}
}
