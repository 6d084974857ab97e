// Package nvmlpci names a GPU by its PCI bus ID as the PM series do. NVML writes the domain
// with 8 hex digits ("00000000:3B:00.0"); CUDA writes 4, and PM sampling's series carry that
// in lower case ("0000:3b:00.0"). The health source and the GPM source must give a GPU the
// same pci_bus_id as PM sampling, or the series of one GPU would not join.
package nvmlpci

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// BusID returns pci's bus ID in lower case, its domain shortened to 4 hex digits where the
// digits cut are zeros (a domain beyond 16 bits stays whole); "" when NVML gave none.
func BusID(pci nvml.PciInfo) string {
	raw := strings.ToLower(cString(pci.BusId[:]))
	if dom, rest, ok := strings.Cut(raw, ":"); ok && len(dom) > 4 && strings.Trim(dom[:len(dom)-4], "0") == "" {
		return dom[len(dom)-4:] + ":" + rest
	}
	return raw
}

// cString reads a NUL-terminated C char array (the whole array when it holds no NUL).
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
