package snapshot

import (
	"slices"
	"testing"
)

func TestTable(t *testing.T) {
	before := len(Declared())
	tab := NewTable()
	a := &Desc{Name: "test_a"}
	if got := tab.Add(a); got != a {
		t.Fatalf("Add returned %p, want the Desc it was given (%p)", got, a)
	}
	b := tab.Add(&Desc{Name: "test_b"})
	if got := tab.Descs(); !slices.Equal(got, []*Desc{a, b}) {
		t.Errorf("Descs = %v, want a, b in the order added", got)
	}
	tab.Descs()[0] = nil // a copy: the table keeps its own
	if tab.Descs()[0] != a {
		t.Error("Descs handed out the table's own slice")
	}
	all := Declared()
	if len(all) != before+2 || all[len(all)-2] != a || all[len(all)-1] != b {
		t.Errorf("Declared has %d descriptors ending %v, want %d ending a, b", len(all), all[max(0, len(all)-2):], before+2)
	}
}

func TestDeviceLabels(t *testing.T) {
	got := DeviceLabels("reason")
	if want := []string{"gpu", "uuid", "model", "chip", "pci_bus_id", "reason"}; !slices.Equal(got, want) {
		t.Errorf("DeviceLabels(reason) = %v, want %v", got, want)
	}
	got[0] = "x"
	if DeviceLabelNames[0] != "gpu" || DeviceLabels()[0] != "gpu" {
		t.Error("DeviceLabels shares its array with DeviceLabelNames")
	}
}

func TestTableRows(t *testing.T) {
	tab := &Table{} // not NewTable: kept out of Declared
	for _, c := range []struct {
		got  *Desc
		want Desc
	}{
		{tab.Gauge("a_ratio", "ratio", "a", "1", "A.", "gpu"), Desc{Name: "a_ratio", Help: "A.", Kind: KindGauge, Unit: "ratio", OTelName: "a", OTelUnit: "1", LabelNames: []string{"gpu"}}},
		{tab.Counter("b_total", "", "b", "{b}", "B."), Desc{Name: "b_total", Help: "B.", Kind: KindCounter, OTelName: "b", OTelUnit: "{b}"}},
		{tab.Histogram("c_seconds", "seconds", "c", "s", "C.", "x", "y"), Desc{Name: "c_seconds", Help: "C.", Kind: KindHistogram, Unit: "seconds", OTelName: "c", OTelUnit: "s", LabelNames: []string{"x", "y"}}},
	} {
		g := *c.got
		if g.Name != c.want.Name || g.Help != c.want.Help || g.Kind != c.want.Kind || g.Unit != c.want.Unit || g.OTelName != c.want.OTelName ||
			g.OTelUnit != c.want.OTelUnit || !slices.Equal(g.LabelNames, c.want.LabelNames) || g.OTelAttributes != nil {
			t.Errorf("got %+v, want %+v", g, c.want)
		}
	}
	if got := tab.Descs(); len(got) != 3 || got[2].Name != "c_seconds" {
		t.Errorf("the table holds %d descriptors, want the 3 added", len(got))
	}
}
