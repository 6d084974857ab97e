package guard

import "strings"

// linkKind is a memory or link whose bytes the guard bounds by its peak rate.
type linkKind int

const (
	linkDRAM linkKind = iota
	linkPCIe
	linkNVLink
)

// linkOf maps a Perfworks hardware unit to the memory or link it counts.
func linkOf(unit string) (linkKind, bool) {
	switch {
	case unit == "dram" || unit == "fbpa":
		return linkDRAM, true
	case unit == "pcie":
		return linkPCIe, true
	case strings.HasPrefix(unit, "nvl"): // nvlrx, nvltx
		return linkNVLink, true
	}
	return 0, false
}

// linkRates are peak bytes per second, per direction for links, of the fastest product of a
// chip: the guard's upper bound for one sample's bytes (with rateSlack). They are the vendor's
// published peaks, rounded up.
type linkRates struct{ dram, pcie, nvlink float64 }

func (r linkRates) of(k linkKind) float64 {
	switch k {
	case linkPCIe:
		return r.pcie
	case linkNVLink:
		return r.nvlink
	}
	return r.dram
}

// chipRates, by chip name prefix (the longest matching prefix wins). PCIe per direction: Gen3
// 16 GB/s, Gen4 32, Gen5 64, Gen6 128 (x16). NVLink per direction: the sum over the chip's links.
var chipRates = []struct {
	prefix string
	rates  linkRates
}{
	{"GV1", linkRates{dram: 1.2e12, pcie: 16e9, nvlink: 150e9}},   // V100: HBM2 0.9-1.1 TB/s, NVLink2 6 × 25 GB/s
	{"TU", linkRates{dram: 0.7e12, pcie: 16e9, nvlink: 50e9}},     // T4 320 GB/s, Titan RTX/RTX 8000 672 GB/s
	{"GA100", linkRates{dram: 2.1e12, pcie: 32e9, nvlink: 300e9}}, // A100 80GB 2.04 TB/s, NVLink3 12 × 25 GB/s
	{"GA10", linkRates{dram: 1.1e12, pcie: 32e9, nvlink: 60e9}},   // RTX 3090 Ti 1.01 TB/s, A40 NVLink 56 GB/s
	{"AD10", linkRates{dram: 1.1e12, pcie: 32e9, nvlink: 0}},      // RTX 4090 1.01 TB/s, L40S 864 GB/s; no NVLink
	{"GH100", linkRates{dram: 4.9e12, pcie: 64e9, nvlink: 450e9}}, // H200 4.8 TB/s, NVLink4 18 × 25 GB/s
	{"GB10", linkRates{dram: 8.2e12, pcie: 128e9, nvlink: 900e9}}, // B200/B300 8 TB/s, NVLink5 18 × 50 GB/s
	{"GB11", linkRates{dram: 8.2e12, pcie: 128e9, nvlink: 900e9}},
	{"GB20", linkRates{dram: 1.9e12, pcie: 128e9, nvlink: 0}}, // RTX 5090 / RTX PRO 6000 1.79 TB/s
}

// anyChip bounds a chip the table does not know: the fastest of every row.
var anyChip = linkRates{dram: 8.2e12, pcie: 128e9, nvlink: 900e9}

func ratesOf(chip string) linkRates {
	best, n := anyChip, 0
	for _, c := range chipRates {
		if strings.HasPrefix(chip, c.prefix) && len(c.prefix) > n {
			best, n = c.rates, len(c.prefix)
		}
	}
	if best.nvlink == 0 { // a chip without NVLink never counts NVLink bytes: any is impossible
		best.nvlink = 1
	}
	return best
}
