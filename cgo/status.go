package cgo

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
)

// Status is a db_status code of kernels/decodebench.h. It is an error itself, so the sentinels
// below match any *Error of that status with errors.Is.
type Status int32

// Keep in step with the enum in decodebench.h and with db_status_string.
const (
	StatusOK               Status = C.DB_OK
	StatusInvalidArgument  Status = C.DB_ERR_INVALID_ARGUMENT
	StatusUnsupportedShape Status = C.DB_ERR_UNSUPPORTED_SHAPE
	StatusNoDevice         Status = C.DB_ERR_NO_DEVICE
	StatusOutOfMemory      Status = C.DB_ERR_OUT_OF_MEMORY
	StatusCUDA             Status = C.DB_ERR_CUDA
	StatusLaunch           Status = C.DB_ERR_LAUNCH
	StatusEmuDeadlock      Status = C.DB_ERR_EMU_DEADLOCK
	StatusInternal         Status = C.DB_ERR_INTERNAL
	StatusWorkspace        Status = C.DB_ERR_WORKSPACE
)

// Sentinels for the statuses callers branch on: errors.Is(err, cgo.ErrUnsupportedShape).
var (
	ErrInvalidArgument  error = StatusInvalidArgument
	ErrUnsupportedShape error = StatusUnsupportedShape
	ErrNoDevice         error = StatusNoDevice
	ErrOutOfMemory      error = StatusOutOfMemory
	ErrDeadlock         error = StatusEmuDeadlock
	ErrWorkspace        error = StatusWorkspace
)

// ErrClosed is returned by calls on a Device, Buffer or Timer after Close.
var ErrClosed = errors.New("decodebench: use of a closed device, buffer or timer")

var statusNames = map[Status]string{
	StatusOK:               "ok",
	StatusInvalidArgument:  "invalid argument",
	StatusUnsupportedShape: "unsupported shape",
	StatusNoDevice:         "no device",
	StatusOutOfMemory:      "out of memory",
	StatusCUDA:             "CUDA error",
	StatusLaunch:           "kernel launch failed",
	StatusEmuDeadlock:      "emulated kernel deadlocked",
	StatusInternal:         "internal error",
	StatusWorkspace:        "workspace too small",
}

// Error names the status; the library's own text (db_status_string) is in *Error.
func (s Status) Error() string {
	if name, ok := statusNames[s]; ok {
		return name
	}
	return fmt.Sprintf("status %d", int32(s))
}

// Error is a failed call into the kernels library.
type Error struct {
	Op     string // the C function, e.g. "db_linear"
	Status Status
	Text   string // db_status_string(Status)
	Detail string // db_last_error_message right after the call: the value or CUDA error at fault
}

func (e *Error) Error() string {
	msg := e.Op + ": " + e.Text
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap gives the Status, so errors.Is matches the sentinels.
func (e *Error) Unwrap() error { return e.Status }

// check is the one place a db_status becomes a Go error: nil for DB_OK, else an *Error with
// the library's status text and the detail of the calling thread's last failure. It must run
// on the OS thread that made the call (the detail is thread-local): device calls run on their
// device's locked thread, library calls lock theirs (Library.call).
func (l *Library) check(op string, status C.int) error {
	s := Status(status)
	if s == StatusOK {
		return nil
	}
	if status == C.DBSHIM_NOT_EXPORTED {
		return &NotExportedError{Function: op, Library: l.path}
	}
	e := &Error{Op: op, Status: s, Text: s.Error()}
	if text := C.dbshim_status_string(l.api, status); text != nil {
		e.Text = C.GoString(text)
	}
	var buf [1024]C.char
	if C.dbshim_last_error_message(l.api, &buf[0], C.size_t(len(buf))) == C.DB_OK {
		e.Detail = C.GoString(&buf[0])
	}
	return e
}

// call runs a library-level C call (one that names no context) on a locked OS thread and
// checks its status there.
func (l *Library) call(op string, f func() C.int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return l.check(op, f())
}

// argError is a bad argument caught in Go before any C call: it matches ErrInvalidArgument.
func argError(op, format string, a ...any) error {
	return &Error{Op: op, Status: StatusInvalidArgument, Text: StatusInvalidArgument.Error(), Detail: fmt.Sprintf(format, a...)}
}

// toInt32 narrows a Go int for a C int32_t field, refusing what does not fit.
func toInt32(op, field string, v int) (C.int32_t, error) {
	if v < -1<<31 || v > 1<<31-1 {
		return 0, argError(op, "%s = %d does not fit in int32", field, v)
	}
	return C.int32_t(v), nil
}
