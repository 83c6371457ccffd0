// Package atomicfile writes files that a reader sees whole or not at all: written under a
// temporary name beside the path, synced, and renamed over it. Every command's outputs (run
// directories, reports, plots, validate's JSON) go through it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a file written under a temporary name beside its path and renamed over it once
// complete and synced, so that a full disk, a kill or a power loss leaves the old file or the
// new one, never half of one: fleet must not read half a report.
type File struct {
	path string
	tmp  *os.File
}

// Create starts writing path. It fails at once when path is a directory or its directory
// cannot be written, which is why validate calls it before the suite as well.
func Create(path string) (*File, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory: give a file name, such as %s", path, filepath.Join(path, "report.json"))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write beside %s: %w", path, err)
	}
	return &File{path: path, tmp: tmp}, nil
}

// TempPath is the temporary file's name until Commit.
func (f *File) TempPath() string { return f.tmp.Name() }

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.tmp.Write(p) }

// Commit syncs the temporary file, renames it over path and syncs the directory. On an error
// the temporary file is removed and path is left as it was.
func (f *File) Commit() error {
	err := f.tmp.Chmod(0o644)
	if err == nil {
		err = f.tmp.Sync()
	}
	if cerr := f.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.tmp.Name())
		return fmt.Errorf("writing %s: %w", f.path, err)
	}
	if dir, err := os.Open(filepath.Dir(f.path)); err == nil {
		dir.Sync() // the rename itself survives a power loss
		dir.Close()
	}
	return nil
}

// Abort removes the temporary file and leaves path as it was.
func (f *File) Abort() {
	f.tmp.Close()
	os.Remove(f.tmp.Name())
}

// Write writes data to path through a File.
func Write(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Commit()
}
