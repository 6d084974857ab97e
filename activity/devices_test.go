package activity

import (
	"fmt"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// Records of devices the sender did not declare, or that the host does not have, are
// refused and counted, and create no series; devices of gone processes are forgotten after
// the TTL and their memory returned to the budget.
func TestUnknownDevicesRefused(t *testing.T) {
	now := time.Unix(1000, 0)
	budget := NewBudget(64 << 20)
	a := NewAggregator(withClock(func() time.Time { return now }), WithBudget(budget),
		WithGPUResolver(func(uuid string) (string, bool) { return "0", uuid == "GPU-real" }),
		WithDeviceFilter(func(uuid string) (bool, bool) { return uuid == "GPU-real", true }))
	p := &record.Process{PID: 1, StartTime: 1, DeviceUUIDs: []string{"GPU-real", "GPU-fake"}}
	a.Connect(p)
	var recs []record.Record
	for d := range uint32(1000) {
		recs = append(recs, kernel(d, "_Z4busyPfii", 1000))
	}
	a.Add(p, recs)
	s := a.Snapshot()
	if n := len(family(t, s, "cupti_kernel_duration_seconds").Samples); n != 1 {
		t.Errorf("%d kernel series, want 1 (the real GPU only)", n)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_device").Value; v != 999 {
		t.Errorf("unknown_device drops = %g, want 999", v)
	}
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 1 {
		t.Errorf("kernel records = %g, want 1", v)
	}
	if len(a.devices) != 1 {
		t.Errorf("%d devices interned, want 1", len(a.devices))
	}
	if budget.Used() != a.deviceStateBytes() {
		t.Errorf("budget holds %d bytes, want one device's %d", budget.Used(), a.deviceStateBytes())
	}

	a.Disconnect(p)
	now = now.Add(DefaultSeriesTTL)
	s = a.Snapshot()
	if n := len(family(t, s, "cupti_kernel_duration_seconds").Samples); n != 0 {
		t.Errorf("%d kernel series after the TTL, want 0", n)
	}
	if len(a.devices) != 0 || budget.Used() != 0 {
		t.Errorf("after the TTL: %d devices, %d bytes held; want none", len(a.devices), budget.Used())
	}
}

// Without a filter that knows the host, hello devices are taken, but only up to the device
// limit and the budget: a flood of made-up UUIDs cannot grow state without bound.
func TestDeviceLimit(t *testing.T) {
	budget := NewBudget(1 << 40)
	a := NewAggregator(WithBudget(budget))
	for i := range 100 {
		uuids := make([]string, 64)
		for j := range uuids {
			uuids[j] = "GPU-" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + string(rune('a'+j%26)) + string(rune('a'+j/26))
		}
		p := &record.Process{PID: uint32(i), DeviceUUIDs: uuids}
		a.Connect(p)
		a.Add(p, []record.Record{kernel(63, "_Z4busyPfii", 1000)})
	}
	if len(a.devices) > maxDevices {
		t.Errorf("%d devices interned, limit %d", len(a.devices), maxDevices)
	}
	if budget.Used() > int64(maxDevices)*a.deviceStateBytes() {
		t.Errorf("budget holds %d bytes", budget.Used())
	}
	if v := mustSample(t, a.Snapshot(), "cupti_activity_dropped_records_total", "unknown_device").Value; v == 0 {
		t.Error("no unknown_device drops past the device limit")
	}
}

// When nothing knows the host's GPUs (PM sampling and NVML off), claimed hellos cannot take
// device slots with made-up UUIDs (before, 256 of them filled the table and real records
// were then dropped as unknown_device); a verified process's devices are taken.
func TestClaimedDevicesNeedAKnownHost(t *testing.T) {
	a := NewAggregator(WithDeviceFilter(func(string) (bool, bool) { return false, false }))
	for i := range maxDevices {
		p := &record.Process{PID: uint32(100 + i), Identity: record.IdentityClaimed, DeviceUUIDs: []string{fmt.Sprintf("GPU-made-up-%03d", i)}}
		a.Connect(p)
		a.Add(p, []record.Record{kernel(0, "_Z4evilv", 1000)})
	}
	real := &record.Process{PID: 7, Identity: record.IdentityVerified, DeviceUUIDs: []string{"GPU-real"}}
	a.Connect(real)
	a.Add(real, []record.Record{kernel(0, "_Z4realv", 1000)})
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_device").Value; v != maxDevices {
		t.Errorf("unknown_device drops = %g, want the %d claimed ones", v, maxDevices)
	}
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 1 {
		t.Errorf("kernel records = %g, want the real process's 1", v)
	}
	if len(a.devices) != 1 {
		t.Errorf("%d devices interned, want the real one", len(a.devices))
	}
}
