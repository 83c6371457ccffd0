package validate

import (
	"sync"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// DeviceRunner measures steps on a cgo.Device through measure.Measure: each kernel verified
// against bench/ref, then timed with its operands rotated out of L2.
type DeviceRunner struct {
	Device  *cgo.Device
	Options measure.Options // Timing is replaced by the suite's
	// Lock, when set, is held for each step: runners that share one device (the emulator has
	// one, and runs one kernel at a time) take turns.
	Lock *sync.Mutex
}

// Run verifies and times one step.
func (r DeviceRunner) Run(step Step, cfg timing.Config) measure.Outcome {
	if r.Lock != nil {
		r.Lock.Lock()
		defer r.Lock.Unlock()
	}
	o := r.Options
	o.Timing = cfg
	return measure.Measure(r.Device, step.Spec, o)
}
