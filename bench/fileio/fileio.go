// Package fileio reads the files decodebench is given (model configs, thresholds, hostfiles,
// fleet summaries and reports, run directories) with a bound: a file it never meant to read
// (/dev/zero, a 6 GB weights file given as a config) is one sentence, not all of memory.
package fileio

import (
	"fmt"
	"io"
	"os"

	"github.com/decodebench/decodebench/bench/units"
)

// Limits of the files decodebench reads, by kind: each many times the largest real one.
const (
	// ConfigBytes: a Hugging Face config.json, a thresholds file, a hostfile (a few kB).
	ConfigBytes = 16 << 20
	// DocumentBytes: one JSON document decodebench wrote (run.json, a validate report, a fleet
	// summary of thousands of cards: a few MB).
	DocumentBytes = 256 << 20
	// LogBytes: a JSON Lines file of a run directory (results, kernels with their samples:
	// hundreds of MB for the largest sweeps).
	LogBytes = 8 << 30
)

// Read reads the regular file at path whole when it holds at most limit bytes. A larger file,
// or one that is not a regular file (a directory, a device such as /dev/zero, a FIFO that
// never ends), is an error naming the path, its size or kind, and the limit; nothing more
// than limit + 1 bytes is ever read. The files of a run directory and of a fleet's reports
// are read so.
func Read(path string, limit int64) ([]byte, error) { return read(path, limit, false) }

// ReadInput is Read for a file the user names on the command line, which may also be a pipe
// or a device (--hostfile <(scontrol show hostnames), /dev/stdin): it is read up to limit
// bytes, and one that goes on past that (/dev/zero) is refused naming the limit. A directory
// is refused.
func ReadInput(path string, limit int64) ([]byte, error) { return read(path, limit, true) }

func read(path string, limit int64, streams bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	regular := fi.Mode().IsRegular()
	if !regular && (!streams || fi.IsDir()) {
		return nil, fmt.Errorf("%s is not a regular file (%s): give a file", path, kind(fi.Mode()))
	}
	if regular && fi.Size() > limit {
		return nil, tooLarge(path, fmt.Sprintf("is %s (%d bytes),", units.Bytes(float64(fi.Size())), fi.Size()), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit { // it grew while being read, or a stream went on
		return nil, tooLarge(path, "holds", limit)
	}
	return data, nil
}

func tooLarge(path, is string, limit int64) error {
	return fmt.Errorf("%s %s more than the %s this file may be: is it the file meant?", path, is, units.Bytes(float64(limit)))
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeCharDevice != 0, m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
