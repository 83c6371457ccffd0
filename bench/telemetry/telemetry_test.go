package telemetry

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

// busyCard is a simulated card under load: SM clock 1980 MHz, memory clock 3201 MHz, 52 °C,
// drawing 650 W, idle in its clocks event reasons.
func busyCard() *fakenvml.GPU {
	g := fakenvml.H100(0)
	g.Set(func(s *fakenvml.State) {
		s.SMClockMHz, s.MemClockMHz, s.TemperatureC, s.PowerMW = 1980, 3201, 52, 650_000
		s.ClocksEventReasons = nvml.ClocksEventReasonGpuIdle
	})
	return g
}

// balanced reports whether lib was shut down as often as it started: never after a failed
// Init, once after each one that succeeded.
func balanced(t *testing.T, lib *mock.Interface, initRet nvml.Return) {
	t.Helper()
	inits, shutdowns := len(lib.InitCalls()), len(lib.ShutdownCalls())
	if want := map[bool]int{true: inits, false: 0}[initRet == nvml.SUCCESS]; shutdowns != want {
		t.Errorf("NVML initialized %d times (answer %v), shut down %d times: want %d", inits, initRet, shutdowns, want)
	}
}

func TestNVMLSourceThroughSampler(t *testing.T) {
	card := busyCard()
	lib := fakenvml.Library(card)
	src, err := OpenNVML(lib, card.UUID)
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
	card.Set(func(s *fakenvml.State) { s.ClocksEventReasons = nvml.ClocksEventReasonSwPowerCap })
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
	balanced(t, lib, nvml.SUCCESS)
}

func TestOpenNVMLFailures(t *testing.T) {
	tests := []struct {
		desc    string
		initRet nvml.Return
		uuid    string
		want    string
	}{
		{"no driver", nvml.ERROR_DRIVER_NOT_LOADED, "", "NVML init"},
		{"unknown GPU", nvml.SUCCESS, "GPU-other", "no GPU GPU-other"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			card := busyCard()
			lib := fakenvml.Driver{Init: tc.initRet}.Library(card)
			uuid := tc.uuid
			if uuid == "" {
				uuid = card.UUID
			}
			_, err := OpenNVML(lib, uuid)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			balanced(t, lib, tc.initRet)
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
