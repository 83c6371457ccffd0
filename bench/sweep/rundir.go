package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files of a run directory.
const (
	InfoFile    = "run.json"
	ResultsFile = "results.jsonl"
	KernelsFile = "kernels.jsonl"
	CSVFile     = "results.csv"
)

// ErrNotRunDir is returned by Load and Resume for a directory without run.json.
var ErrNotRunDir = errors.New("not a decodebench run directory")

// RunDir is a run directory open for appending results.
type RunDir struct {
	Path    string
	results *os.File
	kernels *os.File
}

// Create makes path (and its parents) a new run directory. It refuses a directory that already
// holds a run, pointing at --resume.
func Create(path string) (*RunDir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	for _, name := range []string{InfoFile, ResultsFile} {
		if _, err := os.Stat(filepath.Join(path, name)); err == nil {
			return nil, fmt.Errorf("%s already holds a run (%s): continue it with --resume %s, or choose another --out", path, name, path)
		}
	}
	return openAppend(path)
}

func openAppend(path string) (*RunDir, error) {
	d := &RunDir{Path: path}
	var err error
	if d.results, err = os.OpenFile(filepath.Join(path, ResultsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	if d.kernels, err = os.OpenFile(filepath.Join(path, KernelsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		d.results.Close()
		return nil, err
	}
	return d, nil
}

// Prior is what a run directory already holds.
type Prior struct {
	Info    RunInfo
	Records []Record      // the latest record of each configuration, in file order
	Kernels []Measurement // every kernel measurement, in file order
	// Repaired names the files whose torn last line (a crash mid-write) was cut off.
	Repaired []string
	// BadLines counts lines in the middle of a file that did not parse and were ignored.
	BadLines int
}

// Resume opens an existing run directory for appending. A results or kernels file whose last
// line was torn by a crash is cut back to its last whole line, so that the next line starts
// cleanly.
func Resume(path string) (*RunDir, Prior, error) {
	prior, err := load(path, true)
	if err != nil {
		return nil, prior, err
	}
	d, err := openAppend(path)
	return d, prior, err
}

// Load reads a run directory without changing it (a torn last line is ignored).
func Load(path string) (Prior, error) { return load(path, false) }

func load(path string, repair bool) (Prior, error) {
	var p Prior
	data, err := os.ReadFile(filepath.Join(path, InfoFile))
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
		return p, fmt.Errorf("%s: %w", filepath.Join(path, InfoFile), err)
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
	return p, err
}

// readJSONL calls parse on every line of path (a missing file has none). Lines at the end that
// do not parse were torn by a crash: they are dropped, and with repair the file is cut back to
// the end of the last line that parsed. A line that does not parse but is followed by one that
// does is counted in bad and skipped. A last line that parses but lost its newline is kept
// (and, with repair, given its newline back).
func readJSONL(path string, repair bool, parse func([]byte) error) (torn bool, bad int, err error) {
	data, err := os.ReadFile(path)
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
	return WriteFileAtomic(filepath.Join(dir, InfoFile), append(data, '\n'))
}

// AppendRecord writes r as one line of results.jsonl and syncs it to disk.
func (d *RunDir) AppendRecord(r Record) error { return appendLine(d.results, r) }

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

// Close closes the files.
func (d *RunDir) Close() error {
	return errors.Join(d.results.Close(), d.kernels.Close())
}

// WriteFileAtomic writes through a temporary file in the same directory and renames it, so a
// reader never sees a half-written file.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
