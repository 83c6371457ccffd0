package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/fileio"
	"github.com/decodebench/decodebench/bench/sweep"
)

// The resume of a run directory: what is wrong with one, the flags it stored, and its run.json
// continued.

// resumedInfo continues a directory's run.json: its identity and method stay, the axes grow
// to cover this run's, and a session is added.
func resumedInfo(old, cur sweep.RunInfo) sweep.RunInfo {
	info := old
	info.Sessions = slices.Clone(old.Sessions)
	if n := info.EndDeadSessions(); n > 0 {
		fmt.Fprintf(os.Stderr, "decodebench: %d earlier session(s) of this directory ended without recording how (killed or crashed); run.json now says %q\n", n, sweep.StateDied)
	}
	for _, b := range cur.Axes.Batches {
		if !slices.Contains(info.Axes.Batches, b) {
			info.Axes.Batches = append(info.Axes.Batches, b)
		}
	}
	for _, ctx := range cur.Axes.Contexts {
		if !slices.Contains(info.Axes.Contexts, ctx) {
			info.Axes.Contexts = append(info.Axes.Contexts, ctx)
		}
	}
	slices.Sort(info.Axes.Batches)
	slices.Sort(info.Axes.Contexts)
	info.Budget = nil
	info.Sessions = append(info.Sessions, cur.Sessions...)
	return info
}

// sweepModelFlags define the model axis together: one given on a resume replaces all of
// the run's.
var sweepModelFlags = []string{"model", "model-config", "hidden", "ffn", "heads", "kv-heads", "head-dim", "layers", "vocab", "dtype", "tp"}

// resumeFlags gives a resume the flags of the run that created the directory (run.json's
// flags) that this command line and the environment leave unset, so that
// `decodebench sweep --resume DIR` alone continues the same sweep: model, axes, backend, card,
// timing. Flags given now win; giving any model flag replaces the whole stored model.
func resumeFlags(c *cli.Context) error {
	dir := c.String("resume")
	if dir == "" {
		return nil
	}
	data, err := checkResumeDir(dir)
	if err != nil || data == nil {
		return err
	}
	var stored struct {
		Flags   []string `json:"flags"`
		Backend struct {
			Name string `json:"name"`
		} `json:"backend"`
		Axes struct {
			Models   []json.RawMessage `json:"models"`
			Batches  []int             `json:"batches"`
			Contexts []int             `json:"contexts"`
		} `json:"axes"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		return usageError("--resume %s: its %s is not readable JSON (%v): damaged, or not decodebench's; move it away to start the directory afresh", dir, sweep.InfoFile, err)
	}
	// A run.json names what was measured: one without a backend or a model (`{}`) was not
	// written by decodebench, and a resume of it would name an empty backend and write beside
	// it. Refused before the directory is locked or touched.
	var missing []string
	if stored.Backend.Name == "" {
		missing = append(missing, "backend.name")
	}
	if len(stored.Axes.Models) == 0 {
		missing = append(missing, "axes.models")
	}
	if len(missing) > 0 {
		return usageError("--resume %s: its %s has no %s: damaged, or not written by decodebench; move it away to start the directory afresh",
			dir, sweep.InfoFile, strings.Join(missing, " and no "))
	}
	// The axes as they stand now: an earlier resume may have grown them past the first flags.
	for name, values := range map[string][]int{"batch": stored.Axes.Batches, "context": stored.Axes.Contexts} {
		if len(values) > 0 && !c.IsSet(name) {
			text := make([]string, len(values))
			for i, v := range values {
				text[i] = strconv.Itoa(v)
			}
			if err := c.Set(name, strings.Join(text, ",")); err != nil {
				return usageError("--resume %s: --%s: %v", dir, name, err)
			}
		}
	}
	modelGiven := slices.ContainsFunc(sweepModelFlags, c.IsSet)
	for _, f := range stored.Flags {
		name, value, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if !ok || c.IsSet(name) || slices.Contains([]string{"out", "resume", "retry-failed", "progress"}, name) ||
			(modelGiven && slices.Contains(sweepModelFlags, name)) || !slices.ContainsFunc(c.Command.Flags, func(fl cli.Flag) bool { return fl.Names()[0] == name }) {
			continue
		}
		if err := c.Set(name, value); err != nil {
			return usageError("--resume %s: its %s records --%s=%s, which this decodebench does not accept (%v); give --%s", dir, sweep.InfoFile, name, value, err, name)
		}
	}
	return nil
}

// checkResumeDir says what is wrong with a --resume directory, before anything else is
// parsed: missing, not a directory, or holding measurements without run.json. It returns
// run.json's bytes, or nil for a directory that holds no run yet (a run killed before it
// wrote anything), which --resume adopts.
func checkResumeDir(dir string) ([]byte, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, usageError("--resume %s: no such directory (start a run there with --out %s)", dir, dir)
	case err != nil:
		return nil, usageError("--resume %s: %v", dir, err)
	case !fi.IsDir():
		return nil, usageError("--resume %s: not a directory: give the run directory of a decodebench sweep", dir)
	}
	data, err := fileio.Read(filepath.Join(dir, sweep.InfoFile), fileio.DocumentBytes)
	if errors.Is(err, os.ErrNotExist) {
		for _, name := range []string{sweep.ResultsFile, sweep.KernelsFile} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() > 0 {
				return nil, usageError("--resume %s: it holds %s but no %s, so what produced them is unknown: not resumable; start a new run with --out", dir, name, sweep.InfoFile)
			}
		}
		return nil, nil
	}
	if err != nil {
		return nil, usageError("--resume %s: reading %s: %v", dir, sweep.InfoFile, err)
	}
	return data, nil
}
