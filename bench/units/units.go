// Package units prints quantities the way every decodebench table does: decimal units
// (1 kB = 1e3 B, 1 GB = 1e9 B, 1 GB/s = 1e9 B/s).
package units

import "fmt"

// Bytes prints a byte count in decimal units: 512 B, 131.1 kB, 58.74 MB, 15.01 GB, 1.10 TB.
func Bytes(b float64) string {
	switch {
	case b >= 1e12:
		return fmt.Sprintf("%.2f TB", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}
