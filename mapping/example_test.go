package mapping_test

import (
	"fmt"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

func ExampleParseName() {
	n, err := mapping.ParseName("FBSP.TriageCompute.dramc__cycles_elapsed.avg.per_second")
	if err != nil {
		panic(err)
	}
	fmt.Printf("prefix=%s unit=%s quantity=%s rollup=%s submetric=%s\n", n.Prefix, n.Unit, n.Quantity, n.Rollup, n.Submetric)
	fmt.Println(n)

	_, err = mapping.ParseName("dram__bytes_read.summ")
	fmt.Println(err)
	// Output:
	// prefix=FBSP.TriageCompute unit=dramc quantity=cycles_elapsed rollup=avg submetric=per_second
	// FBSP.TriageCompute.dramc__cycles_elapsed.avg.per_second
	// parse metric name "dram__bytes_read.summ": unknown rollup or submetric "summ" (rollups: sum, avg, min, max; ratio submetrics: pct, ratio, max_rate)
}

func ExampleMapper_Map() {
	m, err := mapping.New()
	if err != nil {
		panic(err)
	}
	// A derived name: sum rollup, per second.
	met, err := m.Map("dram__bytes_read.sum.per_second", pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "dram", DimUnit: "byte"})
	if err != nil {
		panic(err)
	}
	fmt.Println(met.Desc.Name, met.Desc.Kind, met.Desc.OTelName, met.Desc.OTelUnit)
	fmt.Println(met.Max.Name)
	fmt.Println(met.Min.Name)

	// A curated name: a percentage becomes a ratio.
	met, err = m.Map("TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
		pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "sm", DimUnit: "gpc_cycle"})
	if err != nil {
		panic(err)
	}
	fmt.Println(met.Desc.Name, met.Scale, met.Desc.LabelNames)

	// A counter with a constant label.
	met, err = m.Map("PCI.TriageCompute.pcie__write_bytes.sum", pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"})
	if err != nil {
		panic(err)
	}
	fmt.Println(met.Desc.Name, met.Desc.Kind, met.Labels)
	// Output:
	// cupti_dram_read_bytes_per_second gauge cupti.dram.bytes_read.per_second By/s
	// cupti_dram_read_max_bytes_per_second
	// cupti_dram_read_min_bytes_per_second
	// cupti_sm_active_ratio 0.01 [gpu uuid model chip pci_bus_id]
	// cupti_pcie_bytes_total counter [{direction tx}]
}

func ExampleParseRules() {
	rules, err := mapping.ParseRules([]byte(`
rules:
  - match: dram__bytes_read.sum.per_second
    name: cupti_memory_read_bytes_per_second
`), "rules.yaml")
	if err != nil {
		panic(err)
	}
	m, err := mapping.New(rules...)
	if err != nil {
		panic(err)
	}
	met, err := m.Map("dram__bytes_read.sum.per_second", pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "byte"})
	if err != nil {
		panic(err)
	}
	fmt.Println(met.Desc.Name, met.Max.Name)

	_, err = mapping.ParseRules([]byte("rules:\n  - match: dram__bytes.sum\n    nmae: x\n"), "rules.yaml")
	fmt.Println(err)
	// Output:
	// cupti_memory_read_bytes_per_second cupti_memory_read_max_bytes_per_second
	// parse mapping rules rules.yaml: line 3: field nmae not found in type mapping.Rule
}

func ExampleSuggest() {
	known := []string{"sm__cycles_active", "sm__warps_active", "dram__bytes_read"}
	fmt.Println(mapping.Suggest("sm__cycle_active", known, 2))
	// Output:
	// [sm__cycles_active sm__warps_active]
}

func ExampleMapper_Curated() {
	m, _ := mapping.New()
	for _, c := range m.Curated()[:2] {
		fmt.Println(c.Name, c.Perfworks)
	}
	// Output:
	// cupti_graphics_engine_active_ratio FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed
	// cupti_sm_active_ratio TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed
}
