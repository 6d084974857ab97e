package health

import (
	"context"
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/tick"
)

// xidPoll is how often the event set is read. NVML queues the events between reads, and each
// read is one short cgo call (nvmlEventSetWait without waiting) on the exporter's timetable
// (internal/tick), so an XID shows within a second. At health's default interval the read falls
// on the collection's wake-up: a cgo call made while every goroutine sleeps wakes the Go
// runtime's monitor thread into its polls, and two a second at 500 ms (one between
// collections) cost about 9 context switches a second (docs/performance.md, run GI). The
// blocking wait it replaced (up to 500 ms a call) kept a goroutine in a cgo call all the time,
// and the monitor polls while one is: 50-90 more of its wake-ups a second (runs EP-ER).
const xidPoll = time.Second

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
	t := tick.New(xidPoll)
	defer t.Stop()
	for {
		if !s.drainXIDs(set, labels) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// drainXIDs records every event the set holds; false when reading it failed (logged).
func (s *Source) drainXIDs(set nvml.EventSet, labels map[string][]string) bool {
	for {
		data, ret := set.Wait(0)
		switch ret {
		case nvml.SUCCESS:
			s.recordXID(data, labels)
		case nvml.ERROR_TIMEOUT:
			return true
		default:
			s.log.Warn("reading XID events failed; stopping the XID watch", "err", nvml.ErrorString(ret))
			return false
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
