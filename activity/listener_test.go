package activity

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// recordingListener logs the listener calls it gets.
type recordingListener struct {
	mu    sync.Mutex
	calls []string
	infos []ProcessInfo
}

func (l *recordingListener) log(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (l *recordingListener) ProcessConnected(p *record.Process, info ProcessInfo) {
	l.log("connected %d", p.PID)
	l.mu.Lock()
	l.infos = append(l.infos, info)
	l.mu.Unlock()
}
func (l *recordingListener) Records(p *record.Process, recs []record.Record) {
	l.log("records %d %d", p.PID, len(recs))
}
func (l *recordingListener) Coverage(p *record.Process, spans []record.Interval) {
	l.log("coverage %d %d", p.PID, len(spans))
}
func (l *recordingListener) ProcessDisconnected(p *record.Process) { l.log("disconnected %d", p.PID) }

// TestListenerCalls checks the order the attribution join relies on: a process is announced
// (with its pod and host GPU labels) before its first records, also when Add meets it
// without a Connect; Disconnect is forwarded once, and never for an unknown process.
func TestListenerCalls(t *testing.T) {
	l := &recordingListener{}
	a := NewAggregator(WithListener(l), WithGPUResolver(func(uuid string) (string, bool) {
		if uuid == "GPU-b" {
			return "3", true
		}
		return "", false
	}))
	p := &record.Process{PID: 1, DeviceUUIDs: []string{"GPU-a", "GPU-b"}, Pod: "pod", Namespace: "ns", Container: "c"}
	a.Connect(p)
	a.Connect(p) // a repeated hello is announced again, with the same state
	a.Add(p, []record.Record{{Kind: record.KindKernel, Name: "_Z1kv", Start: 1, End: 2}})
	a.Coverage(p, []record.Interval{{Start: 1, End: 5}})
	q := &record.Process{PID: 2}
	a.Add(q, []record.Record{{Kind: record.KindKernel, Name: "_Z1kv", Start: 1, End: 2}, {Kind: record.KindMemcpy, Start: 2, End: 3}})
	a.Disconnect(p)
	a.Disconnect(p)
	a.Disconnect(&record.Process{PID: 9})
	a.Add(q, nil) // nothing to forward
	want := []string{
		"connected 1", "connected 1", "records 1 1", "coverage 1 1",
		"connected 2", "records 2 2", "disconnected 1",
	}
	if !slices.Equal(l.calls, want) {
		t.Errorf("listener calls\n got %q\nwant %q", l.calls, want)
	}
	info := l.infos[0]
	if info.Pod != "pod" || info.Namespace != "ns" || info.Container != "c" ||
		!slices.Equal(info.GPUs, []string{"0", "3"}) || !slices.Equal(info.UUIDs, []string{"GPU-a", "GPU-b"}) {
		t.Errorf("process info %+v", info)
	}
}
