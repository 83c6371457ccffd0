// Package cgo is the seam between Go and the kernels library: it is the only package that says
// import "C". It opens libdecodebench_cuda.so or libdecodebench_emu.so at run time with dlopen
// (never links it, so `go build` works anywhere), turns every db_status into a Go error, and
// owns devices, buffers and timers.
//
// All work of a device runs on one goroutine locked to its OS thread (see Device), so nothing
// depends on thread-local CUDA state and the last-error detail is read where it was written.
// Go memory crosses into C only for the duration of a call; the library never keeps it.
package cgo

/*
// Built against decodebench.h DB_ABI_VERSION 3. Go's build cache does not hash headers outside
// this directory: a change to decodebench.h must change this package's files too (this line,
// with the version) or a cached shim.c, compiled against the old header, is linked in.
#cgo CFLAGS: -I${SRCDIR}/../kernels -O2 -Wall
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// Backends: the library each one loads.
const (
	BackendCUDA = "cuda" // libdecodebench_cuda.so: the kernels built by nvcc
	BackendEmu  = "emu"  // libdecodebench_emu.so: the same sources on the CPU, for correctness only
	BackendAuto = "auto" // cuda, when it loads and sees a device; otherwise an error (never emu)
)

// Backends lists the accepted backend names.
var Backends = []string{BackendAuto, BackendCUDA, BackendEmu}

// EnvKernels names a kernels library file, or a directory holding the libraries.
const EnvKernels = "DECODEBENCH_KERNELS"

// LibraryFile is the file name of a backend's library.
func LibraryFile(backend string) string { return "libdecodebench_" + backend + ".so" }

// ErrLibraryNotFound matches a *NotFoundError and a *NamedLibraryError.
var ErrLibraryNotFound = errors.New("kernels library not found")

// NotFoundError says where a library was looked for.
type NotFoundError struct {
	Backend  string
	Searched []string // in order: the paths tried
	// Env is $DECODEBENCH_KERNELS when it was set: then its directory (Searched[0]) is the only
	// place looked in.
	Env string
}

func (e *NotFoundError) Error() string {
	target := "kernels"
	if e.Backend == BackendEmu {
		target = "emu"
	}
	want := LibraryFile(e.Backend)
	if e.Env != "" {
		where := e.Env
		if len(e.Searched) > 0 && e.Searched[0] != e.Env {
			where = fmt.Sprintf("%s stands for its directory %s, which", e.Env, e.Searched[0])
		}
		return fmt.Sprintf("$%s=%s: %s holds no %s; build it with `make %s`, or point %s at the library or the directory that holds it",
			EnvKernels, e.Env, where, want, target, EnvKernels)
	}
	return fmt.Sprintf("no %s found (looked in %s); build it with `make %s` or point %s at it",
		want, strings.Join(e.Searched, ", "), target, EnvKernels)
}

func (e *NotFoundError) Is(target error) bool { return target == ErrLibraryNotFound }

// NamedLibraryError is a $DECODEBENCH_KERNELS that names a path that cannot be opened.
type NamedLibraryError struct {
	Backend string
	Path    string
	Err     error // why: os.ErrNotExist, a permission error, ENOTDIR
}

func (e *NamedLibraryError) Error() string {
	target := "kernels"
	if e.Backend == BackendEmu {
		target = "emu"
	}
	return fmt.Sprintf("$%s=%s cannot be opened: %v; point it at %s or the directory that holds it (`make %s` builds it into lib/)",
		EnvKernels, e.Path, e.Err, LibraryFile(e.Backend), target)
}

func (e *NamedLibraryError) Is(target error) bool { return target == ErrLibraryNotFound }
func (e *NamedLibraryError) Unwrap() error        { return e.Err }

// Library is a loaded kernels library. Libraries are never unloaded: Open returns the same
// *Library for the same file, and it is safe for concurrent use.
type Library struct {
	api  *C.db_api
	path string
	name string // db_backend_name
}

var (
	loadedMu sync.Mutex
	loaded   = map[string]*Library{} // by absolute path
)

// Open loads the library of a backend: "cuda", "emu" or "auto" (cuda when it loads and reports
// at least one device; otherwise an error that says which of library, driver or device is
// missing and suggests --backend emu). See Locate for where it looks.
func Open(backend string) (*Library, error) {
	switch backend {
	case BackendCUDA, BackendEmu:
		path, err := Locate(backend)
		if err != nil {
			return nil, err
		}
		return openAs(path, backend)
	case BackendAuto:
		return openAuto()
	}
	return nil, fmt.Errorf("unknown backend %q (want %s)", backend, strings.Join(Backends, ", "))
}

const emuHint = "use --backend emu to check correctness on the CPU (its timings are not performance)"

func openAuto() (*Library, error) {
	path, err := Locate(BackendCUDA)
	if err != nil {
		return nil, fmt.Errorf("no GPU backend: %w; %s", err, emuHint)
	}
	lib, err := openAs(path, BackendCUDA)
	if err != nil {
		return nil, fmt.Errorf("no GPU backend: %w (is the NVIDIA driver and CUDA runtime installed?); %s", err, emuHint)
	}
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("no GPU backend: %s loaded but found no usable GPU: %w; %s", path, err, emuHint)
	}
	if n < 1 {
		return nil, fmt.Errorf("no GPU backend: %s loaded but reports 0 devices: %w; %s", path, ErrNoDevice, emuHint)
	}
	return lib, nil
}

// openAs loads path and checks that it is the backend asked for.
func openAs(path, backend string) (*Library, error) {
	lib, err := OpenPath(path)
	if err != nil {
		return nil, err
	}
	if lib.Name() != backend {
		return nil, fmt.Errorf("%s is the %q backend, not %q", path, lib.Name(), backend)
	}
	return lib, nil
}

// OpenPath loads the kernels library at path, whatever its name.
func OpenPath(path string) (*Library, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("kernels library %s: %w", path, err)
	}
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if lib, ok := loaded[abs]; ok {
		return lib, nil
	}
	cpath := C.CString(abs)
	defer C.free(unsafe.Pointer(cpath))
	var msg [1024]C.char
	// dlerror is thread-local: dbshim_load reads it in the same C call, and the thread stays
	// ours until it returns.
	runtime.LockOSThread()
	api := C.dbshim_load(cpath, &msg[0], C.size_t(len(msg)))
	runtime.UnlockOSThread()
	if api == nil {
		return nil, fmt.Errorf("cannot load kernels library: %s", C.GoString(&msg[0]))
	}
	lib := &Library{api: api, path: abs, name: C.GoString(C.dbshim_backend_name(api))}
	loaded[abs] = lib
	return lib, nil
}

// Name is the library's backend: "cuda" or "emu".
func (l *Library) Name() string { return l.name }

// Path is the file the library was loaded from.
func (l *Library) Path() string { return l.path }

// File is the library's file name without its directory (libdecodebench_cuda.so): what the
// documents a run leaves (run.json, the report, validate's report) record, so that they name
// the library without the path of the machine that wrote them.
func (l *Library) File() string { return filepath.Base(l.path) }

// Emulated reports whether the library runs kernels on the CPU: its timings mean nothing.
func (l *Library) Emulated() bool { return l.name == BackendEmu }

// DeviceCount is the number of devices the library sees (1 for the emulator).
func (l *Library) DeviceCount() (int, error) {
	var n C.int32_t
	if err := l.call("db_device_count", func() C.int { return C.dbshim_device_count(l.api, &n) }); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Locate finds a backend's library ("cuda" or "emu") without loading it.
//
// When $DECODEBENCH_KERNELS is set it is the only place looked in: a directory holding the
// library, or a file. A file named like either backend's library stands for its directory (so
// one setting serves both backends); a file of any other name is taken as is, and Open checks
// that it is the backend asked for. A path that does not exist or cannot be read, or a
// directory without the library, is an error naming the path: falling back to a library found
// elsewhere would run other kernels than the ones named.
//
// Otherwise it tries, in order: the directory of the executable; ../lib next to the
// executable (bin/decodebench and lib/ side by side); ./lib in the working directory. The
// error lists every place tried.
func Locate(backend string) (string, error) {
	want := LibraryFile(backend)
	if env := os.Getenv(EnvKernels); env != "" {
		return locateNamed(env, backend)
	}
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		dir := filepath.Dir(exe)
		candidates = append(candidates, filepath.Join(dir, want), filepath.Join(dir, "..", "lib", want))
	}
	candidates = append(candidates, filepath.Join("lib", want))

	searched := []string{"$" + EnvKernels + " (unset)"}
	seen := map[string]bool{}
	for _, c := range candidates {
		abs, err := filepath.Abs(c)
		if err != nil || seen[abs] {
			continue
		}
		seen[abs] = true
		if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
			return abs, nil
		}
		searched = append(searched, displayPath(c, abs, want))
	}
	return "", &NotFoundError{Backend: backend, Searched: searched}
}

// locateNamed finds a backend's library where $DECODEBENCH_KERNELS (env) points, and only there.
func locateNamed(env, backend string) (string, error) {
	want := LibraryFile(backend)
	abs, err := filepath.Abs(env)
	if err != nil {
		return "", &NamedLibraryError{Backend: backend, Path: env, Err: err}
	}
	base := filepath.Base(abs)
	otherBackend := base != want && (base == LibraryFile(BackendCUDA) || base == LibraryFile(BackendEmu))
	dir := abs
	fi, err := os.Stat(abs)
	switch {
	case otherBackend && (err == nil && !fi.IsDir() || errors.Is(err, os.ErrNotExist)):
		// The other backend's file stands for its directory, whether or not that backend is
		// built there; the directory itself must exist.
		dir = filepath.Dir(abs)
		_, err = os.Stat(dir)
	case err == nil && !fi.IsDir():
		return abs, nil
	}
	if err != nil {
		var pathErr *os.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // the path is in the message already
		}
		return "", &NamedLibraryError{Backend: backend, Path: env, Err: err}
	}
	if fi, err := os.Stat(filepath.Join(dir, want)); err == nil && !fi.IsDir() {
		return filepath.Join(dir, want), nil
	}
	return "", &NotFoundError{Backend: backend, Searched: []string{dir}, Env: env}
}

// displayPath shows a candidate as the user would recognise it: the directory when the file
// has the library's name (the message names it), else the whole path.
func displayPath(candidate, abs, want string) string {
	switch {
	case filepath.Base(abs) != want:
		return abs
	case !filepath.IsAbs(candidate):
		return "./" + filepath.ToSlash(filepath.Dir(candidate))
	}
	return filepath.Dir(abs)
}
