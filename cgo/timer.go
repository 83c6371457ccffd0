package cgo

// #include "shim.h"
import "C"

import "sync"

// Timer measures device time between two points of its device's stream (CUDA events).
type Timer struct {
	dev       *Device
	t         *C.db_timer
	once      sync.Once
	destroyed bool // read and written on the device goroutine only
}

// NewTimer creates a timer on the device's stream.
func (d *Device) NewTimer() (*Timer, error) {
	tm := &Timer{dev: d}
	err := d.Do(func() error {
		if err := d.check("db_timer_create", C.dbshim_timer_create(d.lib.api, d.ctx, &tm.t)); err != nil {
			return err
		}
		if err := d.track(tm); err != nil {
			C.dbshim_timer_destroy(d.lib.api, tm.t)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tm, nil
}

// Start records the start event.
func (tm *Timer) Start() error {
	d := tm.dev
	return d.Do(func() error {
		if tm.destroyed {
			return ErrClosed
		}
		return d.check("db_timer_start", C.dbshim_timer_start(d.lib.api, tm.t))
	})
}

// Stop records the stop event.
func (tm *Timer) Stop() error {
	d := tm.dev
	return d.Do(func() error {
		if tm.destroyed {
			return ErrClosed
		}
		return d.check("db_timer_stop", C.dbshim_timer_stop(d.lib.api, tm.t))
	})
}

// ElapsedMs waits for the stop event and gives the milliseconds between start and stop.
func (tm *Timer) ElapsedMs() (float32, error) {
	d := tm.dev
	var ms C.float
	err := d.Do(func() error {
		if tm.destroyed {
			return ErrClosed
		}
		return d.check("db_timer_elapsed_ms", C.dbshim_timer_elapsed_ms(d.lib.api, tm.t, &ms))
	})
	return float32(ms), err
}

// Close destroys the timer; safe to call twice and after the device's Close.
func (tm *Timer) Close() error {
	var err error
	tm.once.Do(func() {
		err = tm.dev.Do(func() error {
			if !tm.dev.untrack(tm) {
				return nil
			}
			return tm.destroy()
		})
		if err == ErrClosed {
			err = nil
		}
	})
	return err
}

func (tm *Timer) destroy() error {
	tm.destroyed = true
	return tm.dev.check("db_timer_destroy", C.dbshim_timer_destroy(tm.dev.lib.api, tm.t))
}

func (tm *Timer) release() { _ = tm.destroy() }
