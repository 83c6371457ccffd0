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
			sys, err := gpuinfo.Open()
			if c.Bool("json") {
				out := struct {
					gpuinfo.System
					Error string `json:"error,omitempty"`
				}{System: sys}
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
			if err != nil {
				return failure("%v", err)
			}
			printSystem(c.App.Writer, sys)
			return nil
		},
	}
}

func printSystem(out io.Writer, sys gpuinfo.System) {
	fmt.Fprintf(out, "driver %s, CUDA driver %s, NVML %s: %d GPU(s)\n", sys.Driver, sys.CUDADriverVersion, sys.NVMLVersion, len(sys.Devices))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "GPU\tNAME\tMEMORY\tDATASHEET BW\tSM/MEM CLOCK (MHz, max)\tPCIE (now/max)\tECC\tPOWER LIMIT\tTEMP\tSPEC ROW")
	for _, d := range sys.Devices {
		spec := "none (predict needs --gpu NAME)"
		if g, ok := roofline.MatchNVML(d.Name, d.MemoryTotalBytes); ok {
			spec = g.Key
		}
		ecc := "off"
		if d.ECCEnabled {
			ecc = "on"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%.0f GB/s\t%d/%d (%d/%d)\tgen%d x%d / gen%d x%d\t%s\t%.0f W\t%d C\t%s\n",
			d.Index, d.Name, units.Bytes(float64(d.MemoryTotalBytes)), d.DatasheetBandwidthBytesPerSec/1e9,
			d.SMClockMHz, d.MemClockMHz, d.MaxSMClockMHz, d.MaxMemClockMHz,
			d.PCIeGen, d.PCIeWidth, d.MaxPCIeGen, d.MaxPCIeWidth, ecc, d.PowerLimitWatts, d.TemperatureC, spec)
		fmt.Fprintf(w, "\t%s\t\t\t\t\t\t\t\t\n", d.UUID)
	}
	w.Flush()
}
