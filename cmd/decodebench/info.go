package main

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/units"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/roofline"
)

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:  "info",
		Usage: "list the GPUs NVML sees (identity, memory, clocks, datasheet bandwidth, PCIe, ECC, power), or say why none",
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("info takes no arguments (got %q)", c.Args().First())
			}
			sys, err := querySystem()
			if err == nil && len(sys.Usable()) == 0 {
				err = fmt.Errorf("NVML sees %d GPU(s) but can read none of them (see lost)", len(sys.Devices))
			}
			cuda, mapErr := infoCUDAMap(sys)
			if c.Bool("json") {
				out := struct {
					gpuinfo.System
					// CUDADevices is the NVML index of each CUDA device decodebench would run on,
					// under CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER=PCI_BUS_ID.
					CUDADevices []int  `json:"cuda_devices"`
					CUDAMap     string `json:"cuda_map_error,omitempty"`
					Error       string `json:"error,omitempty"`
				}{System: sys, CUDADevices: []int{}}
				for i := range cuda.Count() {
					d, _ := cuda.NVML(i)
					out.CUDADevices = append(out.CUDADevices, d.Index)
				}
				if mapErr != nil {
					out.CUDAMap = mapErr.Error()
				}
				if err != nil {
					out.Error = err.Error()
				}
				if werr := writeJSON(c.App.Writer, out); werr != nil {
					return werr
				}
				if err != nil {
					return cli.Exit("", exitFailure)
				}
				return nil
			}
			if len(sys.Devices) > 0 {
				printSystem(c.App.Writer, sys, cuda, mapErr)
			}
			if err != nil {
				return failure("%v", err)
			}
			return nil
		},
	}
}

// infoCUDAMap is the device map decodebench's CUDA commands would use here: the CUDA runtime is
// not asked, so its count is not checked.
func infoCUDAMap(sys gpuinfo.System) (gpuinfo.DeviceMap, error) {
	env := gpuinfo.CUDAEnvironment()
	if env.Order == "" {
		env.Order = gpuinfo.CUDADeviceOrder // what sweep, bench and validate set
	}
	return gpuinfo.MapCUDADevices(sys.Devices, env, -1)
}

func printSystem(out io.Writer, sys gpuinfo.System, cuda gpuinfo.DeviceMap, mapErr error) {
	fmt.Fprintf(out, "driver %s, CUDA driver %s, NVML %s: %d GPU(s)\n", sys.Driver, sys.CUDADriverVersion, sys.NVMLVersion, len(sys.Devices))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "GPU\tCUDA\tNAME\tMEMORY\tDATASHEET BW\tSM/MEM CLOCK (MHz, max)\tPCIE (now/max)\tECC\tPOWER LIMIT\tTEMP\tSPEC ROW")
	for _, d := range sys.Devices {
		cudaIndex := "-"
		if i, ok := cuda.CUDA(d.Index); ok && mapErr == nil {
			cudaIndex = fmt.Sprint(i)
		}
		if d.Lost != "" {
			fmt.Fprintf(w, "%d\t%s\tLOST: %s\t\t\t\t\t\t\t\t\n", d.Index, cudaIndex, d.Lost)
			fmt.Fprintf(w, "\t\t%s %s\t\t\t\t\t\t\t\t\n", orDash(d.UUID), orDash(d.PCIBusID))
			continue
		}
		spec := "none (predict needs --gpu NAME)"
		if g, ok := roofline.MatchNVML(d.Name, d.MemoryTotalBytes); ok {
			spec = g.Key
		}
		ecc := "off"
		if d.ECCEnabled {
			ecc = "on"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%.0f GB/s\t%d/%d (%d/%d)\tgen%d x%d / gen%d x%d\t%s\t%.0f W\t%d C\t%s\n",
			d.Index, cudaIndex, d.Name, units.Bytes(float64(d.MemoryTotalBytes)), d.DatasheetBandwidthBytesPerSec/1e9,
			d.SMClockMHz, d.MemClockMHz, d.MaxSMClockMHz, d.MaxMemClockMHz,
			d.PCIeGen, d.PCIeWidth, d.MaxPCIeGen, d.MaxPCIeWidth, ecc, d.PowerLimitWatts, d.TemperatureC, spec)
		fmt.Fprintf(w, "\t\t%s %s\t\t\t\t\t\t\t\t\n", d.UUID, d.PCIBusID)
	}
	w.Flush()
	if mapErr != nil {
		fmt.Fprintf(out, "CUDA devices: %v\n", mapErr)
	} else if env := gpuinfo.CUDAEnvironment(); env.VisibleSet {
		fmt.Fprintf(out, "CUDA: the column is each card's CUDA device under CUDA_VISIBLE_DEVICES=%q (- : hidden)\n", env.Visible)
	}
}
