package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/fileio"
	"github.com/decodebench/decodebench/bench/format"
)

// UnreadableReport is a *.json file fleet could not take as a report, and why.
type UnreadableReport struct {
	File   string
	Host   string // the host the file seems to be of (its "hostname", else its name), for a hostfile
	Reason string
}

func (u UnreadableReport) String() string { return u.File + ": " + u.Reason }

// LoadReports reads every *.json file under dirs (recursively, in lexical order) that is a
// validate report. A fleet summary or a thresholds file is passed over; every other file
// (not JSON, truncated by a job killed while writing, another version of the report schema, no
// hostname, no verdict) is returned in unreadable with the reason. An error is returned only
// when a directory cannot be walked.
func LoadReports(dirs []string) (reports []LoadedReport, unreadable []UnreadableReport, err error) {
	for _, dir := range dirs {
		walkErr := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".json") {
				return nil
			}
			r, skip, reason := loadReport(path)
			switch {
			case skip:
			case reason != "":
				unreadable = append(unreadable, UnreadableReport{File: path, Host: reportHost(path), Reason: reason})
			default:
				reports = append(reports, LoadedReport{Path: path, Report: r})
			}
			return nil
		})
		if walkErr != nil {
			return nil, nil, walkErr
		}
	}
	return reports, unreadable, nil
}

// loadReport reads one file: a report, a file of another decodebench kind to pass over (skip),
// or why it cannot be read.
func loadReport(path string) (r Report, skip bool, reason string) {
	data, err := fileio.Read(path, fileio.DocumentBytes)
	if err != nil {
		return r, false, err.Error()
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return r, false, fmt.Sprintf("not a validate report: a JSON %s, not an object", typeErr.Value)
		}
		return r, false, fmt.Sprintf("not a whole JSON object (a report cut short, or another file): %v", err)
	}
	switch {
	case head.Schema == FleetSchema || head.Schema == ThresholdSchema:
		return r, true, ""
	case head.Schema == "":
		return r, false, fmt.Sprintf("not a validate report: no schema (a report says %q)", ReportSchema)
	case head.Schema != ReportSchema:
		return r, false, fmt.Sprintf("schema %q: this build reads %q (a report of another decodebench version?)", head.Schema, ReportSchema)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, false, err.Error()
	}
	switch {
	case strings.TrimSpace(r.Hostname) == "":
		return r, false, "the report names no hostname"
	case !r.Verdict.Valid() && r.Verdict != Interrupted:
		return r, false, fmt.Sprintf("verdict %q: want PASS, WARN, FAIL or INTERRUPTED", r.Verdict)
	}
	return r, false, ""
}

// hostnameField finds the hostname in a report too damaged to decode.
var hostnameField = regexp.MustCompile(`"hostname"\s*:\s*"([^"]+)"`)

// reportHost is the host an unreadable report seems to be of: its hostname field where that
// survived, else the file's name (the recipes write <node>.json).
func reportHost(path string) string {
	if data, err := fileio.Read(path, fileio.DocumentBytes); err == nil {
		if m := hostnameField.FindSubmatch(data); m != nil {
			return string(m[1])
		}
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// ReadFleetSummary reads a summary written by WriteFleetSummary (a --baseline).
func ReadFleetSummary(path string) (FleetSummary, error) {
	data, err := fileio.ReadInput(path, fileio.DocumentBytes)
	if err != nil {
		return FleetSummary{}, err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return FleetSummary{}, fmt.Errorf("%s: %w", path, err)
	}
	if head.Schema != FleetSchema {
		return FleetSummary{}, fmt.Errorf("%s: schema %q is not a fleet summary (%q); write one with `decodebench fleet --summary FILE`", path, head.Schema, FleetSchema)
	}
	var s FleetSummary
	if err := json.Unmarshal(data, &s); err != nil {
		return FleetSummary{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// WriteFleetSummary writes s as indented JSON.
func WriteFleetSummary(path string, s FleetSummary) error {
	var b bytes.Buffer
	if err := format.WriteJSON(&b, s); err != nil {
		return err
	}
	return atomicfile.Write(path, b.Bytes())
}

// ReadHostfile reads one host name per line; blank lines and text after # are ignored
// (`scontrol show hostnames "$SLURM_JOB_NODELIST"` writes such a file).
func ReadHostfile(path string) ([]string, error) {
	data, err := fileio.ReadInput(path, fileio.ConfigBytes)
	if err != nil {
		return nil, err
	}
	var hosts []string
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 0 {
			hosts = append(hosts, f[0])
		}
	}
	if len(hosts) == 0 {
		return nil, errors.New(path + ": no host names")
	}
	return hosts, nil
}
