package sweep

import (
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/cgo"
)

// DeviceMeasurer measures on a cgo.Device through bench/measure.
type DeviceMeasurer struct {
	Device  *cgo.Device
	Options measure.Options
	// StepDevice, when set, is the device whole steps run on, made from Device: tests plant a
	// wrong op there (bench/step/steptest) to watch the step's verification refuse it.
	StepDevice func(*cgo.Device) step.TimedDevice
}

// Fits asks bench/measure whether one copy of the call's buffers fits in free memory.
func (d DeviceMeasurer) Fits(s measure.Spec) (bool, string) {
	bytes := s.MinDeviceBytes()
	if bytes == 0 {
		return true, "" // not known before planning, or an invalid spec that Measure reports
	}
	return measure.Fits(d.Device, bytes)
}

// Measure verifies and times s.
func (d DeviceMeasurer) Measure(s measure.Spec) measure.Outcome {
	return measure.Measure(d.Device, s, d.Options)
}

// Healthy synchronizes the device: a lost CUDA context answers every call with its error.
func (d DeviceMeasurer) Healthy() error { return d.Device.Synchronize() }

// MeasureLaunch measures the launch baseline (see Launch) on the device.
func (d DeviceMeasurer) MeasureLaunch() Launch { return MeasureLaunch(d.Device) }
