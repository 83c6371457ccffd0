package telemetry

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// h200Device is a mock H200 whose clocks event reasons come from reasons() at each call.
func h200Device(reasons func() uint64, powerMW func() uint32) *mock.Device {
	return &mock.Device{
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c == nvml.CLOCK_MEM {
				return 3201, nvml.SUCCESS
			}
			return 1980, nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 52, nvml.SUCCESS },
		GetPowerUsageFunc:  func() (uint32, nvml.Return) { return powerMW(), nvml.SUCCESS },
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return reasons(), nvml.SUCCESS
		},
	}
}

func mockLib(dev *mock.Device, initRet nvml.Return) (*mock.Interface, *atomic.Int32) {
	var live atomic.Int32
	symbols := map[string]bool{"nvmlDeviceGetCurrentClocksEventReasons": true, "nvmlDeviceGetTemperature": true}
	return &mock.Interface{
		InitFunc: func() nvml.Return {
			if initRet == nvml.SUCCESS {
				live.Add(1)
			}
			return initRet
		},
		ShutdownFunc: func() nvml.Return { live.Add(-1); return nvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if uuid != "GPU-h200" {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return dev, nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
				if symbols[name] {
					return nil
				}
				return fmt.Errorf("no %s", name)
			}}
		},
	}, &live
}

func TestNVMLSourceThroughSampler(t *testing.T) {
	var throttle atomic.Bool
	dev := h200Device(func() uint64 {
		if throttle.Load() {
			return nvml.ClocksEventReasonSwPowerCap
		}
		return nvml.ClocksEventReasonGpuIdle
	}, func() uint32 { return 650_000 })
	lib, live := mockLib(dev, nvml.SUCCESS)
	src, err := OpenNVML(lib, "GPU-h200")
	if err != nil {
		t.Fatal(err)
	}
	sampler := Sampler{Source: src, Interval: time.Millisecond}

	calm := sampler.Start()
	time.Sleep(5 * time.Millisecond)
	s := calm.Stop()
	if s.Throttled || s.Readings < 2 {
		t.Errorf("calm window: %+v; want >= 2 readings, not throttled (Idle does not count)", s)
	}
	if s.SMClockMHzMax != 1980 || s.MemClockMHzMin != 3201 || s.TemperatureCMax != 52 || s.PowerWattsMax != 650 {
		t.Errorf("calm window readings: %+v", s)
	}

	hot := sampler.Start()
	throttle.Store(true)
	time.Sleep(5 * time.Millisecond)
	s = hot.Stop()
	if !s.Throttled || s.ThrottledReadings == 0 {
		t.Errorf("power-capped window not flagged: %+v", s)
	}
	if !strings.Contains(strings.Join(s.ThrottleText, ","), "SW Power Cap") || !strings.Contains(s.Describe(), "THROTTLED (SW Power Cap)") {
		t.Errorf("throttle reasons not named: %v / %q", s.ThrottleText, s.Describe())
	}
	if again := hot.Stop(); again.Readings != s.Readings {
		t.Errorf("second Stop changed the summary: %d then %d readings", s.Readings, again.Readings)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	if live.Load() != 0 {
		t.Errorf("NVML left initialized %d times", live.Load())
	}
}

func TestOpenNVMLFailures(t *testing.T) {
	tests := []struct {
		desc    string
		initRet nvml.Return
		uuid    string
		want    string
	}{
		{"no driver", nvml.ERROR_DRIVER_NOT_LOADED, "GPU-h200", "NVML init"},
		{"unknown GPU", nvml.SUCCESS, "GPU-other", "no GPU GPU-other"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			lib, live := mockLib(h200Device(func() uint64 { return 0 }, func() uint32 { return 0 }), tc.initRet)
			_, err := OpenNVML(lib, tc.uuid)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if live.Load() != 0 {
				t.Errorf("NVML left initialized after a failed open")
			}
		})
	}
}

func TestSamplerWithoutSourceAndWithErrors(t *testing.T) {
	if s := (Sampler{}).Start().Stop(); s.Readings != 0 || s.Throttled || s.Describe() != "no telemetry" {
		t.Errorf("nil source: %+v %q", s, s.Describe())
	}
	lost := Func(func() (gpuinfo.Telemetry, error) { return gpuinfo.Telemetry{}, errors.New("GPU is lost") })
	s := Sampler{Source: lost, Interval: time.Millisecond}.Start().Stop()
	if s.Readings != 0 || len(s.Errors) != 1 || !strings.Contains(s.Describe(), "GPU is lost") {
		t.Errorf("failing source: %+v %q", s, s.Describe())
	}
}

func TestMerge(t *testing.T) {
	a := Summary{Readings: 2, SMClockMHzMin: 1900, SMClockMHzMax: 1980, PowerWattsMean: 500, PowerWattsMax: 520, TemperatureCMax: 50}
	b := Summary{Readings: 2, SMClockMHzMin: 1700, SMClockMHzMax: 1980, PowerWattsMean: 700, PowerWattsMax: 700, TemperatureCMax: 60,
		ThrottleReasons: nvml.ClocksEventReasonSwPowerCap, Throttled: true, ThrottledReadings: 1}
	m := Merge(a, Summary{}, b)
	if m.Readings != 4 || !m.Throttled || m.SMClockMHzMin != 1700 || m.PowerWattsMean != 600 || m.TemperatureCMax != 60 {
		t.Errorf("Merge = %+v", m)
	}
	if m.ThrottleText[0] != "SW Power Cap" {
		t.Errorf("merged reasons %v", m.ThrottleText)
	}
}

// A sampler under the race detector: readings from the goroutine and Stop from another.
func TestSamplerConcurrentStop(t *testing.T) {
	var n atomic.Int32
	src := Func(func() (gpuinfo.Telemetry, error) {
		n.Add(1)
		return gpuinfo.Telemetry{SMClockMHz: 1000}, nil
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := Sampler{Source: src, Interval: time.Microsecond}.Start()
			time.Sleep(time.Millisecond)
			if s := w.Stop(); s.Readings < 2 {
				t.Errorf("%d readings", s.Readings)
			}
		}()
	}
	wg.Wait()
}
