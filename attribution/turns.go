package attribution

import (
	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
)

// What the turn model (package turns) needs of a chunk, and its answer.

// turnContexts lists the chunk's contexts into sc.tCtx (and the untraced ones' pods into
// sc.tPod): the traced processes present on the device (the MPS clients among them as one
// group), and the untraced processes NVML shows (untraced MPS clients in the group too);
// a.mu is held.
func (a *Attributor) turnContexts(d *devState, lo, hi int64) {
	sc := &d.sc
	sc.tCtx, sc.tPod = sc.tCtx[:0], sc.tPod[:0]
	add := func(ctx turns.Context, pod podKey) {
		sc.tCtx, sc.tPod = append(sc.tCtx, ctx), append(sc.tPod, pod)
	}
	mps := sc.mpsPIDs
	untracedMPS := false
	seen := map[int32]bool{}
	for _, oi := range sc.sobsAll {
		for _, u := range d.nvml[oi].untraced {
			if u.mps {
				untracedMPS = true
				continue
			}
			if !seen[u.class] {
				seen[u.class] = true
				add(turns.Context{Key: turns.Key{Kind: turns.Untraced, ID: int64(u.class)}, Slot: -1, Class: u.class}, u.pod)
			}
		}
	}
	var group []int32
	for _, ps := range a.tracedOn(d, lo, hi) {
		if mps[ps.pid] {
			group = append(group, ps.slot)
			continue
		}
		add(turns.Context{Key: turns.TracedKey(ps.slot, ps.pid), Slot: ps.slot, Class: -1}, podKey{})
	}
	if len(group) > 0 || untracedMPS {
		add(turns.Context{Key: turns.Key{Kind: turns.MPS}, Slot: -1, Class: -1, Slots: group}, podKey{})
	}
}

// turns sets sc.owners (a distribution over sc.tCtx per sample) for the chunk's samples when
// the device counts context switches and two or more contexts share it; a.mu is held.
func (a *Attributor) turns(d *devState, chunk []psample) bool {
	sc := &d.sc
	if !d.switches || len(chunk) == 0 {
		sc.tCtx = sc.tCtx[:0]
		return false
	}
	a.turnContexts(d, chunk[0].start, chunk[len(chunk)-1].end)
	if !d.turn.Chunk(sc.tCtx, &turnSamples{a, chunk}, &sc.cover, &sc.owners) {
		return false
	}
	if turnsHook != nil {
		turnsHook(chunk, sc.tCtx, &sc.owners)
	}
	return true
}

// turnSamples is a chunk's samples as the turn model reads them.
type turnSamples struct {
	a     *Attributor
	chunk []psample
}

func (t *turnSamples) Len() int                   { return len(t.chunk) }
func (t *turnSamples) Nanoseconds(s int) int64    { return t.chunk[s].end - t.chunk[s].start }
func (t *turnSamples) SwitchCycles(s int) float64 { return t.a.switchCycles(t.chunk[s]) }
func (t *turnSamples) Busy(s int) bool            { return t.a.busy(t.chunk[s]) }

// turnsHook, when set (tests), sees every chunk's owner distributions.
var turnsHook func(chunk []psample, ctxs []turns.Context, own *turns.Owners)

// mpsClients are the PIDs that the NVML observations the chunk's samples meet list as MPS
// clients (nil when none), kept for the chunk in sc.mpsPIDs by applyNVML; a.mu is held.
func (d *devState) mpsClients() map[uint32]bool {
	var mps map[uint32]bool
	for _, oi := range d.sc.sobsAll {
		for _, p := range d.nvml[oi].procs {
			if p.MPS == gpuprocs.MPSClient {
				if mps == nil {
					mps = map[uint32]bool{}
				}
				mps[p.PID] = true
			}
		}
	}
	return mps
}
