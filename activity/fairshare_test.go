package activity

import (
	"fmt"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// madeUpHello is a hello of a verified process in cgroup declaring 64 made-up device UUIDs.
func madeUpHello(pid uint32, cgroup string, first int) *record.Process {
	uuids := make([]string, 64)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("GPU-%08x-dead-beef-0000-000000000000", first+i)
	}
	return &record.Process{PID: pid, StartTime: 1, Identity: record.IdentityVerified, Cgroup: cgroup, DeviceUUIDs: uuids}
}

// The attack on the device table, while nothing knows the host's GPUs: one verified
// process (one cgroup) opens four hello-only connections declaring 64 made-up UUIDs each.
// Before, that filled the 256-device table, and an honest process's 1,000 records were all
// dropped as unknown_device. Now one identity holds at most a share of the table, and a
// newcomer takes a device from whoever holds the most.
func TestDeviceTableFairShare(t *testing.T) {
	a := NewAggregator(WithDeviceFilter(func(string) (bool, bool) { return false, false }))
	for i := range 4 {
		a.Connect(madeUpHello(100, "0::/attacker", 64*i))
	}
	honest := &record.Process{PID: 7, StartTime: 1, Identity: record.IdentityVerified, Cgroup: "0::/honest", DeviceUUIDs: []string{"GPU-real"}}
	a.Connect(honest)
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = kernel(0, "_Z4realv", 1000)
	}
	a.Add(honest, recs)
	s := a.Snapshot()
	t.Logf("honest records counted %g, dropped as unknown_device %g; devices in the table %d",
		mustSample(t, s, "cupti_activity_records_total", "kernel").Value,
		mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_device").Value, len(a.devices))
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 1000 {
		t.Errorf("kernel records %g, want the honest process's 1000", v)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_device").Value; v != 0 {
		t.Errorf("unknown_device %g, want 0", v)
	}
	if len(a.devices) > maxDevices {
		t.Errorf("%d devices, limit %d", len(a.devices), maxDevices)
	}

	// Three more attacker identities fill the table with their shares; a newcomer still gets
	// its device, taken from an identity holding the most.
	for i := 2; i <= 4; i++ {
		for j := range 4 {
			a.Connect(madeUpHello(uint32(100*i), fmt.Sprintf("0::/attacker%d", i), 1000*i+64*j))
		}
	}
	if len(a.devices) != maxDevices {
		t.Fatalf("%d devices, want the table full (%d)", len(a.devices), maxDevices)
	}
	third := &record.Process{PID: 8, StartTime: 1, Identity: record.IdentityVerified, Cgroup: "0::/third", DeviceUUIDs: []string{"GPU-real-2"}}
	a.Connect(third)
	a.Add(third, recs[:10])
	s = a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 1010 {
		t.Errorf("kernel records %g, want 1010", v)
	}
	if v := mustSample(t, s, "cupti_activity_device_evictions_total", "fair_share").Value; v == 0 {
		t.Error("no fair_share device eviction counted")
	}
	for id, n := range a.idDevices {
		if n > maxDevicesPerIdentity {
			t.Errorf("identity %q holds %d devices, share %d", id, n, maxDevicesPerIdentity)
		}
	}
}

// Devices of processes that are gone make room at once when the table is full (before, they
// held it for the series TTL: real records were dropped for 5 minutes after the attacker left).
func TestDevicesOfGoneProcessesMakeRoom(t *testing.T) {
	clock := newFakeClock()
	a := NewAggregator(withClock(clock.now), WithDeviceFilter(func(string) (bool, bool) { return false, false }))
	var gone []*record.Process
	for i := range 4 {
		p := madeUpHello(uint32(100+i), fmt.Sprintf("0::/attacker-%d", i), 64*i)
		a.Connect(p)
		gone = append(gone, p)
	}
	for _, p := range gone {
		a.Disconnect(p)
	}
	clock.advance(time.Second)
	honest := &record.Process{PID: 7, StartTime: 1, Identity: record.IdentityVerified, Cgroup: "0::/honest", DeviceUUIDs: []string{"GPU-real"}}
	a.Connect(honest)
	a.Add(honest, []record.Record{kernel(0, "_Z4realv", 1000)})
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 1 {
		t.Errorf("kernel records %g, want 1 (dropped as unknown_device: %g)", v,
			mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_device").Value)
	}
	if v := mustSample(t, s, "cupti_activity_device_evictions_total", "unused").Value; v != 1 {
		t.Errorf("unused device evictions %g, want 1", v)
	}
}
