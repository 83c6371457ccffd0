package cgo

// #include "shim.h"
import "C"

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// DeviceProps mirrors db_device_props.
type DeviceProps struct {
	Name                   string
	CCMajor, CCMinor       int
	SMCount                int
	MaxThreadsPerBlock     int
	L2Bytes                int64
	SmemPerBlockBytes      int64 // default limit
	SmemPerBlockOptinBytes int64 // with cudaFuncAttributeMaxDynamicSharedMemorySize
	SmemPerSMBytes         int64
	MemTotalBytes          uint64
	MemFreeBytes           uint64
	SMClockKHz             int // 0 where the runtime does not say
	MemClockKHz            int
	MemBusWidthBits        int
}

// DeviceProps describes device i.
func (l *Library) DeviceProps(i int) (DeviceProps, error) {
	dev, err := toInt32("db_device_props_get", "device", i)
	if err != nil {
		return DeviceProps{}, err
	}
	var p C.db_device_props
	if err := l.call("db_device_props_get", func() C.int { return C.dbshim_device_props_get(l.api, dev, &p) }); err != nil {
		return DeviceProps{}, err
	}
	return DeviceProps{
		Name:                   cString(p.name[:]),
		CCMajor:                int(p.cc_major),
		CCMinor:                int(p.cc_minor),
		SMCount:                int(p.sm_count),
		MaxThreadsPerBlock:     int(p.max_threads_per_block),
		L2Bytes:                int64(p.l2_bytes),
		SmemPerBlockBytes:      int64(p.smem_per_block_bytes),
		SmemPerBlockOptinBytes: int64(p.smem_per_block_optin_bytes),
		SmemPerSMBytes:         int64(p.smem_per_sm_bytes),
		MemTotalBytes:          uint64(p.mem_total_bytes),
		MemFreeBytes:           uint64(p.mem_free_bytes),
		SMClockKHz:             int(p.sm_clock_khz),
		MemClockKHz:            int(p.mem_clock_khz),
		MemBusWidthBits:        int(p.mem_bus_width_bits),
	}, nil
}

// cString reads a fixed C char array up to its first NUL, never past its end.
func cString(a []C.char) string {
	b := make([]byte, 0, len(a))
	for _, c := range a {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

var nextDeviceID atomic.Uint64

// Device is one context (device plus stream) of a library, with the goroutine that does all of
// its work: the goroutine is locked to its OS thread, so every call of the device runs on the
// same thread. Methods may be called from any goroutine; they wait for the device goroutine.
type Device struct {
	lib   *Library
	index int
	id    uint64 // marks the device thread (dbshim_set_thread_owner)
	ctx   *C.db_context

	calls chan func()
	quit  chan struct{} // closed by Close after the context is destroyed
	done  chan struct{} // closed when the device goroutine has exited

	mu      sync.Mutex // guards closed and live
	closed  bool
	live    map[closer]struct{} // buffers and timers to release on Close
	closing sync.Once

	capturing bool // between a BeginGraph and its EndGraph (device thread only)
}

// closer is a resource of the device that Close releases if its owner did not.
type closer interface{ release() }

// OpenDevice creates a context on device index and starts its goroutine.
func (l *Library) OpenDevice(index int) (*Device, error) {
	dev, err := toInt32("db_context_create", "device", index)
	if err != nil {
		return nil, err
	}
	d := &Device{
		lib:   l,
		index: index,
		id:    nextDeviceID.Add(1),
		calls: make(chan func()),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
		live:  map[closer]struct{}{},
	}
	created := make(chan error, 1)
	go d.loop(dev, created)
	if err := <-created; err != nil {
		return nil, err
	}
	return d, nil
}

// loop is the device goroutine: it creates the context, runs calls until Close, then destroys
// the context. It never unlocks its thread, so the thread ends with it (and with it any
// thread-local state the library kept).
func (d *Device) loop(dev C.int32_t, created chan<- error) {
	runtime.LockOSThread()
	defer close(d.done)
	C.dbshim_set_thread_owner(C.uint64_t(d.id))
	defer C.dbshim_set_thread_owner(0)
	if err := d.lib.check("db_context_create", C.dbshim_context_create(d.lib.api, dev, &d.ctx)); err != nil {
		created <- err
		return
	}
	created <- nil
	for {
		select {
		case f := <-d.calls:
			f()
		case <-d.quit:
			return
		}
	}
}

// onDeviceThread reports whether the caller already runs on d's goroutine (a nested call).
func (d *Device) onDeviceThread() bool {
	return uint64(C.dbshim_thread_owner()) == d.id
}

// Do runs f on the device goroutine and returns its error. Methods of the device called from
// inside f run inline, so a sequence (start a timer, launch, stop it) can run as one unit. A
// panic in f is re-raised in the caller.
func (d *Device) Do(f func() error) error {
	if d.onDeviceThread() {
		return f()
	}
	if d.isClosed() {
		return ErrClosed
	}
	var (
		err      error
		panicked any
		stack    []byte
	)
	finished := make(chan struct{})
	call := func() {
		defer close(finished)
		defer func() {
			if p := recover(); p != nil {
				panicked, stack = p, debug.Stack()
			}
		}()
		if d.isClosed() { // Close ran between our check and this call
			err = ErrClosed
			return
		}
		err = f()
	}
	select {
	case d.calls <- call:
	case <-d.done:
		return ErrClosed
	}
	<-finished
	if panicked != nil {
		panic(fmt.Sprintf("%v\n\n[on the device %d goroutine]\n%s", panicked, d.index, stack))
	}
	return err
}

// check turns the status of a call made on the device thread into an error.
func (d *Device) check(op string, status C.int) error { return d.lib.check(op, status) }

// Library is the library the device belongs to.
func (d *Device) Library() *Library { return d.lib }

// Index is the device's index in its library.
func (d *Device) Index() int { return d.index }

// Props describes the device.
func (d *Device) Props() (DeviceProps, error) { return d.lib.DeviceProps(d.index) }

// Synchronize waits for all work queued on the device's stream.
func (d *Device) Synchronize() error {
	return d.Do(func() error { return d.check("db_synchronize", C.dbshim_synchronize(d.lib.api, d.ctx)) })
}

// Close releases the buffers and timers still open, destroys the context and ends the device
// goroutine. It is safe to call more than once; later calls return nil.
func (d *Device) Close() error {
	if d.onDeviceThread() {
		return fmt.Errorf("cgo: Device.Close called from inside Device.Do")
	}
	var err error
	d.closing.Do(func() {
		err = d.Do(func() error {
			d.mu.Lock()
			d.closed = true
			live := d.live
			d.live = nil
			d.mu.Unlock()
			if d.capturing {
				// A capture left open refuses the frees below: end it first.
				d.abandonCapture()
			}
			for r := range live {
				r.release()
			}
			return d.check("db_context_destroy", C.dbshim_context_destroy(d.lib.api, d.ctx))
		})
		close(d.quit)
		<-d.done
	})
	return err
}

func (d *Device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// track registers a resource for Close; it fails once the device is closed.
func (d *Device) track(r closer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.live[r] = struct{}{}
	return nil
}

// untrack forgets a resource its owner released; false if Close already released it.
func (d *Device) untrack(r closer) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.live[r]; !ok {
		return false
	}
	delete(d.live, r)
	return true
}
