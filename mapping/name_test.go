package mapping

import (
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

func TestParseNameValid(t *testing.T) {
	tests := []struct {
		in   string
		want Name
	}{
		{"dram__bytes_read.sum.per_second", Name{Unit: "dram", Quantity: "bytes_read", Rollup: "sum", Submetric: "per_second"}},
		{"sm__warps_active.avg.pct_of_peak_sustained_active", Name{Unit: "sm", Quantity: "warps_active", Rollup: "avg", Submetric: "pct_of_peak_sustained_active"}},
		{"gr__cycles_elapsed.max", Name{Unit: "gr", Quantity: "cycles_elapsed", Rollup: "max"}},
		{"FBSP.TriageCompute.dramc__cycles_elapsed", Name{Prefix: "FBSP.TriageCompute", Unit: "dramc", Quantity: "cycles_elapsed"}},
		{"TriageCompute.sm__throughput.avg.pct_of_peak_sustained_elapsed", Name{Prefix: "TriageCompute", Unit: "sm", Quantity: "throughput", Rollup: "avg", Submetric: "pct_of_peak_sustained_elapsed"}},
		{"lts__t_sector_hit_rate.pct", Name{Unit: "lts", Quantity: "t_sector_hit_rate", Submetric: "pct"}},
		{"smsp__average_inst_executed_per_warp.max_rate", Name{Unit: "smsp", Quantity: "average_inst_executed_per_warp", Submetric: "max_rate"}},
		{"dram__bytes.sum.peak_sustained_active.per_second", Name{Unit: "dram", Quantity: "bytes", Rollup: "sum", Submetric: "peak_sustained_active.per_second"}},
		{"l1tex__m_xbar2l1tex_read_sectors.min.per_cycle_in_region", Name{Unit: "l1tex", Quantity: "m_xbar2l1tex_read_sectors", Rollup: "min", Submetric: "per_cycle_in_region"}},
	}
	for _, tt := range tests {
		got, err := ParseName(tt.in)
		if err != nil {
			t.Errorf("ParseName(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseName(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("ParseName(%q).String() = %q", tt.in, got.String())
		}
	}
}

// TestParseNameErrors checks that each bad name is refused with an error that names the
// offending part.
func TestParseNameErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty name"},
		{"dram_bytes_read.sum", `no "__"`},
		{"dram__bytes..sum", "empty segment 2"},
		{"dram__bytes.sum.", "empty segment 3"},
		{"DRAM__bytes.sum", `bad unit "DRAM"`},
		{"l1-tex__bytes.sum", `bad unit "l1-tex"`},
		{"dram__Bytes.sum", `bad quantity "Bytes"`},
		{"dram__bytes__read.sum", `bad quantity "bytes__read"`},
		{"dram__bytes_.sum", `bad quantity "bytes_"`},
		{"9x.dram__bytes.sum", `bad prefix segment "9x"`},
		{"dram__bytes.summ", `unknown rollup or submetric "summ"`},
		{"dram__bytes.summ.per_second", `unknown rollup "summ"`},
		{"dram__bytes.sum.per_minute", `unknown submetric "per_minute"`},
		{"dram__bytes.sum.pct", `submetric "pct" takes no rollup`},
		{"dram__bytes.per_second", `submetric "per_second" needs a rollup`},
		{"dram__bytes.peak_sustained_active.per_second", `needs a rollup`},
	}
	for _, tt := range tests {
		_, err := ParseName(tt.in)
		if err == nil {
			t.Errorf("ParseName(%q): no error, want one containing %q", tt.in, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"`+tt.in+`"`) {
			t.Errorf("ParseName(%q) error %q: want the name and %q", tt.in, err, tt.want)
		}
	}
}

func TestCheckType(t *testing.T) {
	tests := []struct {
		in   string
		typ  pmdata.MetricType
		fail bool
	}{
		{"dram__bytes.sum", pmdata.TypeCounter, false},
		{"dram__bytes.sum.per_second", pmdata.TypeCounter, false},
		{"dram__bytes", pmdata.TypeCounter, true},
		{"lts__t_sector_hit_rate.ratio", pmdata.TypeRatio, false},
		{"lts__t_sector_hit_rate.ratio", pmdata.TypeCounter, true},
		{"dram__throughput.avg.pct_of_peak_sustained_elapsed", pmdata.TypeThroughput, false},
		{"dram__throughput.avg", pmdata.TypeThroughput, true},
		{"dram__throughput.avg.per_second", pmdata.TypeThroughput, true},
		{"dram__throughput.pct", pmdata.TypeThroughput, true},
		{"dram__bytes.sum", pmdata.MetricType(9), true},
	}
	for _, tt := range tests {
		n, err := ParseName(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.checkType(tt.typ); (err != nil) != tt.fail {
			t.Errorf("%s as type %d: err = %v, want failure %v", tt.in, tt.typ, err, tt.fail)
		}
	}
}

// TestValidNamesParse checks that every name ValidNames lists parses back to its parts and
// suits the type.
func TestValidNamesParse(t *testing.T) {
	base := Name{Prefix: "TPC.TriageCompute", Unit: "sm", Quantity: "cycles_active"}
	for typ, want := range map[pmdata.MetricType]int{pmdata.TypeCounter: 4 * (1 + len(CounterSubmetrics)), pmdata.TypeRatio: 3, pmdata.TypeThroughput: 16} {
		names := ValidNames(base, typ)
		if len(names) != want {
			t.Errorf("type %d: %d names, want %d", typ, len(names), want)
		}
		for _, s := range names {
			n, err := ParseName(s)
			if err != nil {
				t.Fatal(err)
			}
			if n.Base() != base.String() || n.String() != s {
				t.Errorf("%s: base %s, string %s", s, n.Base(), n.String())
			}
			if err := n.checkType(typ); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	}
}
