package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/fileio"
	"github.com/decodebench/decodebench/bench/step"
)

// Files of a run directory.
const (
	InfoFile    = "run.json"
	ResultsFile = "results.jsonl"
	KernelsFile = "kernels.jsonl"
	// StepsFile holds the end-to-end step records (bench/step.Record), one per
	// configuration, beside the composed ones of ResultsFile.
	StepsFile = "steps.jsonl"
	CSVFile   = "results.csv"
)

// ErrNotRunDir is returned by Load and Resume for a directory without run.json.
var ErrNotRunDir = errors.New("not a decodebench run directory")

// ErrHoldsRun is returned by Create for a directory that already holds a run.
var ErrHoldsRun = errors.New("already holds a run")

// RunDir is a run directory open for appending results, locked for as long as it is open.
type RunDir struct {
	Path    string
	lock    *DirLock
	results *os.File
	kernels *os.File
	steps   *os.File
}

// Create locks path (made with its parents) and makes it a new run directory with run.json
// written first (see DirLock.Create).
func Create(path string, info RunInfo) (*RunDir, error) {
	l, err := Lock(path)
	if err != nil {
		return nil, err
	}
	d, err := l.Create(info)
	if err != nil {
		l.Release()
	}
	return d, err
}

// Create makes the locked directory a new run directory. It refuses a directory that
// already holds a run (ErrHoldsRun, pointing at --resume). run.json is written before
// anything else, atomically, so that a run killed at any point leaves a directory that
// --resume continues.
func (l *DirLock) Create(info RunInfo) (*RunDir, error) {
	for _, name := range []string{InfoFile, ResultsFile} {
		if _, err := os.Stat(filepath.Join(l.Dir, name)); err == nil {
			return nil, fmt.Errorf("%s %w (%s): continue it with --resume %s, or choose another --out", l.Dir, ErrHoldsRun, name, l.Dir)
		}
	}
	if err := WriteInfo(l.Dir, info); err != nil {
		return nil, err
	}
	return l.openAppend()
}

func (l *DirLock) openAppend() (*RunDir, error) {
	d := &RunDir{Path: l.Dir, lock: l}
	var err error
	if d.results, err = os.OpenFile(filepath.Join(l.Dir, ResultsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	if d.kernels, err = os.OpenFile(filepath.Join(l.Dir, KernelsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		d.results.Close()
		return nil, err
	}
	if d.steps, err = os.OpenFile(filepath.Join(l.Dir, StepsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		d.results.Close()
		d.kernels.Close()
		return nil, err
	}
	return d, nil
}

// Prior is what a run directory already holds.
type Prior struct {
	Info    RunInfo
	Records []Record      // the latest record of each configuration, in file order
	Kernels []Measurement // every kernel measurement, in file order
	Steps   []step.Record // the latest end-to-end record of each configuration, in file order
	// Repaired names the files whose torn last line (a crash mid-write) was cut off.
	Repaired []string
	// BadLines counts lines in the middle of a file that did not parse and were ignored.
	BadLines int
	// Duplicates counts the lines of results.jsonl and steps.jsonl that a later line of the same
	// configuration replaced (a retried configuration, or a line copied twice).
	Duplicates int
	// Empty: the directory had no run.json and no measurement; Resume adopted it.
	Empty bool
	// Implausible names the records read ok but faster than the card's datasheet allows
	// (Record.Implausible), value and bound: they are held as failed.
	Implausible []string
}

// Resume locks path and opens it for appending (see DirLock.Resume).
func Resume(path string) (*RunDir, Prior, error) {
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		return nil, Prior{}, fmt.Errorf("%s: no such directory", path)
	}
	l, err := Lock(path)
	if err != nil {
		return nil, Prior{}, err
	}
	d, prior, err := l.Resume()
	if err != nil {
		l.Release()
	}
	return d, prior, err
}

// Resume opens the locked run directory for appending. A results or kernels file whose last
// line was torn by a crash is cut back to its last whole line, so that the next line starts
// cleanly. A directory without run.json that holds no measurement either (a run killed
// before it wrote anything) is adopted: Prior.Empty, and the caller writes run.json.
func (l *DirLock) Resume() (*RunDir, Prior, error) {
	prior, err := load(l.Dir, true)
	if errors.Is(err, ErrNotRunDir) {
		if !holdsNoMeasurement(l.Dir) {
			return nil, prior, fmt.Errorf("%s holds measurements but no %s, so what produced them is unknown: it cannot be resumed; start a new run with --out", l.Dir, InfoFile)
		}
		prior, err = Prior{Empty: true}, nil
	}
	if err != nil {
		return nil, prior, err
	}
	d, err := l.openAppend()
	return d, prior, err
}

// holdsNoMeasurement reports whether dir's results and kernels files are absent or empty.
func holdsNoMeasurement(dir string) bool {
	for _, name := range []string{ResultsFile, KernelsFile, StepsFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() > 0 {
			return false
		}
	}
	return true
}

// Load reads a run directory without changing it (a torn last line is ignored).
func Load(path string) (Prior, error) { return load(path, false) }

func load(path string, repair bool) (Prior, error) {
	var p Prior
	data, err := fileio.Read(filepath.Join(path, InfoFile), fileio.DocumentBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if fi, statErr := os.Stat(path); statErr != nil || !fi.IsDir() {
			return p, fmt.Errorf("%s: no such directory", path)
		}
		return p, fmt.Errorf("%s: %w (no %s; `decodebench sweep --out DIR` makes one)", path, ErrNotRunDir, InfoFile)
	}
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(data, &p.Info); err != nil {
		return p, fmt.Errorf("%s is not a readable run.json (%v): it was not written by decodebench, or was damaged; move it away to start the directory afresh", filepath.Join(path, InfoFile), err)
	}
	if p.Info.Schema > SchemaVersion {
		return p, fmt.Errorf("%s was written by a newer decodebench (run.json schema %d, this one reads %d)", path, p.Info.Schema, SchemaVersion)
	}
	latest := map[string]int{}
	torn, bad, err := readJSONL(filepath.Join(path, ResultsFile), repair, func(line []byte) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.Key == "" {
			return errors.New("record without a key")
		}
		if i, ok := latest[r.Key]; ok {
			p.Records[i] = r // a retried configuration: the newest record holds
			p.Duplicates++
			return nil
		}
		latest[r.Key] = len(p.Records)
		p.Records = append(p.Records, r)
		return nil
	})
	if err != nil {
		return p, err
	}
	if torn {
		p.Repaired = append(p.Repaired, ResultsFile)
	}
	p.BadLines += bad
	p.refuseImplausible()
	torn, bad, err = readJSONL(filepath.Join(path, KernelsFile), repair, func(line []byte) error {
		var m Measurement
		if err := json.Unmarshal(line, &m); err != nil {
			return err
		}
		if m.Key == "" {
			return errors.New("measurement without a key")
		}
		p.Kernels = append(p.Kernels, m)
		return nil
	})
	if torn {
		p.Repaired = append(p.Repaired, KernelsFile)
	}
	p.BadLines += bad
	if err != nil {
		return p, err
	}
	latestStep := map[string]int{}
	torn, bad, err = readJSONL(filepath.Join(path, StepsFile), repair, func(line []byte) error {
		var r step.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.Key == "" {
			return errors.New("step record without a key")
		}
		if i, ok := latestStep[r.Key]; ok {
			p.Steps[i] = r
			p.Duplicates++
			return nil
		}
		latestStep[r.Key] = len(p.Steps)
		p.Steps = append(p.Steps, r)
		return nil
	})
	if torn {
		p.Repaired = append(p.Repaired, StepsFile)
	}
	p.BadLines += bad
	return p, err
}

// readJSONL calls parse on every line of path (a missing file has none). Lines at the end that
// do not parse were torn by a crash: they are dropped, and with repair the file is cut back to
// the end of the last line that parsed. A line that does not parse but is followed by one that
// does is counted in bad and skipped. A last line that parses but lost its newline is kept
// (and, with repair, given its newline back).
func readJSONL(path string, repair bool, parse func([]byte) error) (torn bool, bad int, err error) {
	data, err := fileio.Read(path, fileio.LogBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	goodEnd, pendingBad, missingNewline := 0, 0, false
	for off := 0; off < len(data); {
		end, complete := len(data), false
		if nl := bytes.IndexByte(data[off:], '\n'); nl >= 0 {
			end, complete = off+nl+1, true
		}
		line := bytes.TrimSpace(data[off:end])
		switch {
		case len(line) == 0:
			if pendingBad == 0 {
				goodEnd = end
			}
		case parse(line) == nil:
			bad += pendingBad
			pendingBad, goodEnd, missingNewline = 0, end, !complete
		default:
			pendingBad++
		}
		off = end
	}
	torn = pendingBad > 0
	if !repair {
		return torn, bad, nil
	}
	if torn {
		if err := os.Truncate(path, int64(goodEnd)); err != nil {
			return torn, bad, fmt.Errorf("cutting the torn last line of %s: %w", path, err)
		}
	}
	if missingNewline {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return torn, bad, err
		}
		_, werr := f.Write([]byte{'\n'})
		if err := errors.Join(werr, f.Close()); err != nil {
			return torn, bad, err
		}
	}
	return torn, bad, nil
}

// WriteInfo replaces run.json atomically.
func (d *RunDir) WriteInfo(info RunInfo) error { return WriteInfo(d.Path, info) }

// WriteInfo replaces dir's run.json atomically.
func WriteInfo(dir string, info RunInfo) error {
	info.Schema = SchemaVersion
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, InfoFile), append(data, '\n'))
}

// AppendRecord writes r as one line of results.jsonl and syncs it to disk.
func (d *RunDir) AppendRecord(r Record) error { return appendLine(d.results, r) }

// AppendStep writes r as one line of steps.jsonl and syncs it to disk.
func (d *RunDir) AppendStep(r step.Record) error { return appendLine(d.steps, r) }

// AppendMeasurement writes m as one line of kernels.jsonl and syncs it to disk.
func (d *RunDir) AppendMeasurement(m Measurement) error { return appendLine(d.kernels, m) }

func appendLine(f *os.File, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// One write call per line: a crash leaves at worst a torn last line, which Resume cuts.
	if _, err := f.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("appending to %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", f.Name(), err)
	}
	return nil
}

// Close closes the files and releases the lock.
func (d *RunDir) Close() error {
	return errors.Join(d.results.Close(), d.kernels.Close(), d.steps.Close(), d.lock.Release())
}

// StalePID is the PID of a dead process whose lock on the directory was taken over (0 none).
func (d *RunDir) StalePID() int { return d.lock.StalePID }
