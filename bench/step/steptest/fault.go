// Package steptest plants faults in a whole step for tests: a device whose one small op
// computes wrong, so that a test can watch the step's verification refuse it.
package steptest

import (
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/cgo"
)

// WrongEps is the epsilon WrongRMSNorm launches every RMSNorm with in place of the step's
// 1e-5: the synthetic activations' mean square is about 1/3, so every norm's output is some
// 15% too small, far outside the forward pass's bounds, yet every value stays finite (the
// step's own NaN check after timing sees nothing).
const WrongEps = 0.1

// WrongRMSNorm is dev with its RMSNorm launched with WrongEps: a wrong small op that runs,
// returns no error and writes plausible numbers.
func WrongRMSNorm(dev step.TimedDevice) step.TimedDevice { return wrongRMSNorm{dev} }

type wrongRMSNorm struct{ step.TimedDevice }

func (w wrongRMSNorm) RMSNorm(p cgo.RMSNormParams) error {
	p.Eps = WrongEps
	return w.TimedDevice.RMSNorm(p)
}
