package nvmlpci

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// pciInfo fills BusId as NVML does: the text, then NULs; garbage after the NUL must not show.
func pciInfo(busID, tail string) nvml.PciInfo {
	var p nvml.PciInfo
	for i, c := range busID + "\x00" + tail {
		p.BusId[i] = int8(c)
	}
	return p
}

func TestBusID(t *testing.T) {
	full := nvml.PciInfo{}
	for i := range full.BusId {
		full.BusId[i] = 'a' // no NUL: the whole array is the text
	}
	for _, tc := range []struct {
		name string
		pci  nvml.PciInfo
		want string
	}{
		{"nvml domain 0", pciInfo("00000000:3B:00.0", ""), "0000:3b:00.0"},
		{"nvml domain 0, bytes after the NUL", pciInfo("00000000:19:00.0", "ZZ:99"), "0000:19:00.0"},
		{"nvml domain in 16 bits", pciInfo("00000001:C1:00.0", ""), "0001:c1:00.0"},
		{"domain beyond 16 bits stays", pciInfo("00010000:3B:00.0", ""), "00010000:3b:00.0"},
		{"domain beyond 16 bits, top digit", pciInfo("10000000:3B:00.0", ""), "10000000:3b:00.0"},
		{"already 4 digits", pciInfo("0000:3B:00.0", ""), "0000:3b:00.0"},
		{"zero array", nvml.PciInfo{}, ""},
		{"no domain", pciInfo("3B:00.0", ""), "3b:00.0"},
		{"no NUL", full, strings.Repeat("a", len(full.BusId))},
	} {
		if got := BusID(tc.pci); got != tc.want {
			t.Errorf("%s: BusID = %q, want %q", tc.name, got, tc.want)
		}
	}
}
