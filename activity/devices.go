package activity

import (
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// The device table holds at most maxDevices gpu/uuid pairs (aggregate.go). While nothing
// knows the host's GPUs (PM sampling and NVML off), a verified process's hello devices are
// taken on its word, so the table is shared out: one identity may bring at most
// maxDevicesPerIdentity devices into it, and a device new to a full table takes the place
// of one no connected process uses, else of one held by the identity holding the most
// (docs/security.md, "Fair shares").

// maxDevicesPerIdentity is the share of the device table one identity may fill: the devices
// one hello may declare (wire.MaxDevices), more than any node's GPUs and MIG instances.
const maxDevicesPerIdentity = 64

// Reasons of cupti_activity_device_evictions_total.
var deviceEvictionReasons = [...]string{"unused", "fair_share"}

const (
	evictedUnused = iota
	evictedFairShare
)

var deviceEvictionsDesc = descs.Counter("cupti_activity_device_evictions_total", "", "cupti.activity.device.evictions", "{device}", "Devices taken out of the full device table (256) to make room for a new one, with their series, by reason "+
	"(unused: no connected process used it; fair_share: it was held by the identity holding the most devices).", "reason")

// deviceOwner is the identity a process's devices are counted against: the container (cgroup)
// the kernel named, every claimed process together, every unchecked (recorded) one together.
func deviceOwner(p *record.Process) string {
	switch p.Identity {
	case record.IdentityVerified:
		return "cgroup:" + p.Cgroup
	case record.IdentityClaimed:
		return "claimed"
	}
	return "unchecked"
}

// inUse says whether a connected process uses d.
func (d *device) inUse() bool { return len(d.owners) > 0 }

// ownLocked adds n processes of owner to those using d (n < 0 removes them).
func (a *Aggregator) ownLocked(d *device, owner string, n int) {
	if d.owners == nil {
		d.owners = make(map[string]int)
	}
	before := d.owners[owner]
	after := before + n
	switch {
	case before == 0 && after > 0:
		a.idDevices[owner]++
	case before > 0 && after <= 0:
		if a.idDevices[owner]--; a.idDevices[owner] <= 0 {
			delete(a.idDevices, owner)
		}
	}
	if after > 0 {
		d.owners[owner] = after
	} else {
		delete(d.owners, owner)
	}
}

// roomForDeviceLocked says whether owner may bring a new device into the table, making room
// when it is full: the device no connected process uses that was left longest ago (unused),
// else the device least recently used of those held only by the identity that holds the most,
// when that holds at least two more than owner (fair_share: equals do not take devices from
// each other in turn).
func (a *Aggregator) roomForDeviceLocked(owner string) bool {
	if a.idDevices[owner] >= maxDevicesPerIdentity {
		return false
	}
	if len(a.devices) < maxDevices {
		return true
	}
	var unused *device
	for _, d := range a.devices {
		if !d.inUse() && (unused == nil || d.last.Before(unused.last)) {
			unused = d
		}
	}
	if unused != nil {
		a.evictDeviceLocked(unused, evictedUnused)
		return true
	}
	hog, most := "", 0
	for id, n := range a.idDevices {
		if id != owner && (n > most || n == most && id < hog) {
			hog, most = id, n
		}
	}
	if most < a.idDevices[owner]+2 {
		return false
	}
	var victim *device
	for _, d := range a.devices {
		if len(d.owners) == 1 && d.owners[hog] > 0 && (victim == nil || d.used.Before(victim.used)) {
			victim = d
		}
	}
	if victim == nil {
		return false // every device of the hog is shared with others: real GPUs
	}
	a.evictDeviceLocked(victim, evictedFairShare)
	return true
}

// evictDeviceLocked takes d out of the table with its series, counted by reason.
func (a *Aggregator) evictDeviceLocked(d *device, reason int) {
	a.devEvictions[reason]++
	a.forgetDevicesLocked(map[*device]bool{d: true})
}

// deviceEvictionsFamily is cupti_activity_device_evictions_total; a.mu is held.
func (a *Aggregator) deviceEvictionsFamily() snapshot.Family {
	f := snapshot.Family{Desc: deviceEvictionsDesc}
	for i, r := range deviceEvictionReasons {
		f.Samples = append(f.Samples, a.counter(float64(a.devEvictions[i]), r))
	}
	return f
}
