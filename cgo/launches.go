package cgo

// The optional functions of decodebench.h: the launch geometry the static gate reads
// (db_linear_launches, db_attention_launches) and the launch baseline (db_empty_kernel). They
// sit in the one function table (shim.h) with the rest; a library without one still loads, and
// a call of it answers ErrNotExported.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrNotExported matches the error of an optional function the loaded library lacks (one built
// from an older decodebench.h, or a kernel family whose planner does not list its launches).
var ErrNotExported = errors.New("not exported by the kernels library")

// NotExportedError names the function and the library.
type NotExportedError struct {
	Function, Library string
}

func (e *NotExportedError) Error() string {
	return fmt.Sprintf("%s does not export %s (built from an older decodebench.h?)", e.Library, e.Function)
}

func (e *NotExportedError) Is(target error) bool { return target == ErrNotExported }

// LaunchInfo mirrors db_launch_info: one kernel launch a call makes.
type LaunchInfo struct {
	Kernel       string // demangled, without the argument list, as cuobjdump's functions read after c++filt -p
	GridX        int
	GridY        int
	GridZ        int
	BlockThreads int
	SmemBytes    int // dynamic + static shared memory per block
	// WorkUnits is how many equal units of work the blocks share (a grid-stride kernel: block
	// b takes units b, b + blocks, ...); 0 when each block is one unit.
	WorkUnits int
}

// Blocks is the launch's grid size.
func (l LaunchInfo) Blocks() int64 { return int64(l.GridX) * int64(l.GridY) * int64(l.GridZ) }

// Units is the work units the launch's blocks share: WorkUnits, or one a block.
func (l LaunchInfo) Units() int64 {
	if l.WorkUnits > 0 {
		return int64(l.WorkUnits)
	}
	return l.Blocks()
}

// maxLaunches bounds one call's list; today's calls make one or two launches.
const maxLaunches = 16

// HasFunction reports whether the library has the function of decodebench.h called name: a
// required one always, an optional one where the library exports it (its table entry is set).
func (l *Library) HasFunction(name string) bool {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.dbshim_has(l.api, cname) != 0
}

func launchesFromC(out []C.db_launch_info, count C.int32_t) []LaunchInfo {
	launches := make([]LaunchInfo, 0, int(count))
	for i := 0; i < int(count) && i < len(out); i++ {
		c := &out[i]
		launches = append(launches, LaunchInfo{
			Kernel: C.GoString(&c.kernel[0]),
			GridX:  int(c.grid_x), GridY: int(c.grid_y), GridZ: int(c.grid_z),
			BlockThreads: int(c.block_threads), SmemBytes: int(c.smem_bytes),
			WorkUnits: int(c.work_units),
		})
	}
	return launches
}

// LinearLaunches plans p as LinearPlan does and lists the kernel launches one Linear call with
// it makes, in order. Nothing runs and no memory is read: the addresses need only be non-zero
// and aligned as Linear wants them.
func (d *Device) LinearLaunches(p LinearParams) ([]LaunchInfo, error) {
	const op = "db_linear_launches"
	c, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	return d.launches(op, func(out *C.db_launch_info, count *C.int32_t) C.int {
		return C.dbshim_linear_launches(d.lib.api, d.ctx, &c, out, maxLaunches, count)
	})
}

// AttentionLaunches is LinearLaunches for an attention call.
func (d *Device) AttentionLaunches(p AttentionParams) ([]LaunchInfo, error) {
	const op = "db_attention_launches"
	c, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	return d.launches(op, func(out *C.db_launch_info, count *C.int32_t) C.int {
		return C.dbshim_attention_launches(d.lib.api, d.ctx, &c, out, maxLaunches, count)
	})
}

// launches lists what call, the optional function op, writes into room for maxLaunches
// launches.
func (d *Device) launches(op string, call func(out *C.db_launch_info, count *C.int32_t) C.int) ([]LaunchInfo, error) {
	out := make([]C.db_launch_info, maxLaunches)
	var count C.int32_t
	if err := d.Do(func() error { return d.check(op, call(&out[0], &count)) }); err != nil {
		return nil, err
	}
	return launchesFromC(out, count), nil
}

// MaxEmptyLaunches is the most launches one EmptyKernel call takes (kMaxEmptyLaunches in
// kernels/api.cu).
const MaxEmptyLaunches = 1000000

// EmptyKernel launches an empty kernel (one block of 32 threads) launches times on the
// device's stream without waiting. Bracketed by a Timer's Start and Stop, the elapsed time over
// launches is the launch-to-launch cost of this card: the floor under every kernel time.
func (d *Device) EmptyKernel(launches int) error {
	const op = "db_empty_kernel"
	if launches < 1 || launches > MaxEmptyLaunches {
		return argError(op, "launches = %d is not in 1..%d", launches, MaxEmptyLaunches)
	}
	return d.Do(func() error {
		return d.check(op, C.dbshim_empty_kernel(d.lib.api, d.ctx, C.int32_t(launches)))
	})
}
