package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/cgo"
)

// backendFlags choose the kernels library and the device of every command that launches
// kernels.
func backendFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Value: cgo.BackendAuto,
			Usage: "kernels library: cuda (libdecodebench_cuda.so, a GPU), emu (libdecodebench_emu.so, the same " +
				"kernels emulated on the CPU: exact but slow, never a speed) or auto (cuda when it finds a GPU)"},
		&cli.IntFlag{Name: "device", Value: 0,
			Usage: "index of the device to run on, as the backend counts them"},
	}
}

// backendChoice is the validated --backend and --device.
type backendChoice struct {
	backend string
	device  int
}

// parseBackendFlags validates --backend and --device without opening anything.
func parseBackendFlags(c *cli.Context) (backendChoice, error) {
	b := backendChoice{backend: c.String("backend"), device: c.Int("device")}
	valid := false
	for _, name := range cgo.Backends {
		valid = valid || b.backend == name
	}
	if !valid {
		return b, usageError("--backend %q: want one of %s", b.backend, strings.Join(cgo.Backends, ", "))
	}
	if b.device < 0 {
		return b, usageError("--device %d: a device index is 0 or more", b.device)
	}
	return b, nil
}

// open loads the backend's library and opens the device; the caller closes the device. A
// missing library, driver or device is a failure (exit 1) whose message says what to do; a
// device index past the last is a usage error.
func (b backendChoice) open() (*cgo.Library, *cgo.Device, error) {
	lib, err := cgo.Open(b.backend)
	if err != nil {
		return nil, nil, failure("%v", err)
	}
	count, err := lib.DeviceCount()
	if err != nil {
		return nil, nil, failure("%s found no usable device: %v; use --backend emu to check correctness on the CPU", lib.Path(), err)
	}
	if count == 0 {
		return nil, nil, failure("%s sees no device; use --backend emu to check correctness on the CPU", lib.Path())
	}
	if b.device >= count {
		return nil, nil, usageError("--device %d: the %s backend sees %d device(s), numbered from 0", b.device, lib.Name(), count)
	}
	dev, err := lib.OpenDevice(b.device)
	if err != nil {
		if errors.Is(err, cgo.ErrNoDevice) {
			return nil, nil, failure("device %d of %s: %v", b.device, lib.Path(), err)
		}
		return nil, nil, failure("%v", err)
	}
	return lib, dev, nil
}

// describe names the backend, library and device for a report's first line.
func describeDevice(lib *cgo.Library, dev *cgo.Device) string {
	name := "?"
	if props, err := dev.Props(); err == nil {
		name = props.Name
	}
	return fmt.Sprintf("%s backend (%s), device %d: %s", lib.Name(), lib.Path(), dev.Index(), name)
}
