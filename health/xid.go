package health

import (
	"context"
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/tick"
)

// xidWait is how long one wait on the event set lasts at most before ctx is checked again.
const xidWait = 500 * time.Millisecond

// xidWaitMS is the next wait in ms: to just past the next multiple of xidWait, so the return
// from NVML (which wakes the Go runtime's sysmon thread into a millisecond of polls) falls in a
// wake-up the exporter's other loops have anyway (internal/tick) rather than one of its own.
func xidWaitMS(now time.Time) uint32 {
	return uint32(tick.Until(now, xidWait)/time.Millisecond) + 1
}

type xidKey struct {
	uuid string
	xid  uint64
}

type xidState struct {
	labels []string // device labels of the GPU
	count  uint64
	last   float64 // Unix seconds
}

// watchXIDs registers every GPU for XID events and counts them as they come, on its own
// goroutine: a counter per code and the time of the last one, never only "the last value".
func (s *Source) watchXIDs(ctx context.Context) {
	set, ret := s.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		s.log.Warn("XID events unavailable: cannot create an NVML event set", "err", nvml.ErrorString(ret))
		return
	}
	defer set.Free()
	s.mu.Lock()
	gpus := append([]*gpuState(nil), s.gpus...)
	s.mu.Unlock()
	labels := map[string][]string{}
	registered := 0
	for _, g := range gpus {
		if g.lost {
			continue
		}
		types, ret := g.dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || types&nvml.EventTypeXidCriticalError == 0 {
			s.log.Info("XID events not supported on this GPU", "gpu", g.gpu)
			continue
		}
		if ret := g.dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			s.log.Warn("cannot register for XID events", "gpu", g.gpu, "err", nvml.ErrorString(ret))
			continue
		}
		labels[g.uuid] = g.labels
		registered++
	}
	if registered == 0 {
		return
	}
	for ctx.Err() == nil {
		data, ret := set.Wait(xidWaitMS(time.Now()))
		switch ret {
		case nvml.SUCCESS:
			s.recordXID(data, labels)
		case nvml.ERROR_TIMEOUT:
		default:
			s.log.Warn("waiting for XID events failed; stopping the XID watch", "err", nvml.ErrorString(ret))
			return
		}
	}
}

func (s *Source) recordXID(data nvml.EventData, labels map[string][]string) {
	if data.EventType&nvml.EventTypeXidCriticalError == 0 || data.Device == nil {
		return
	}
	uuid, _ := data.Device.GetUUID()
	l, ok := labels[uuid]
	if !ok {
		return
	}
	s.log.Error("XID error", "gpu", l[0], "uuid", uuid, "xid", data.EventData, "gpu_instance", data.GpuInstanceId, "compute_instance", data.ComputeInstanceId)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := xidKey{uuid, data.EventData}
	st := s.xids[k]
	if st == nil {
		st = &xidState{labels: l}
		s.xids[k] = st
	}
	st.count++
	st.last = float64(s.cfg.now().UnixNano()) / 1e9
}

// xidFamilies adds the XID counters to b; s.mu is held.
func (s *Source) xidFamilies(b *builder) {
	for k, st := range s.xids {
		x := strconv.FormatUint(k.xid, 10)
		b.add(xidDesc, float64(st.count), append(append([]string{}, st.labels...), x)...)
		b.add(xidLastDesc, st.last, append(append([]string{}, st.labels...), x)...)
	}
}
