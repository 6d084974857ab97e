package receiver

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// launchTap is a listener that takes launch hints.
type launchTap struct{ at chan uint64 }

func (launchTap) ProcessConnected(*record.Process, activity.ProcessInfo) {}
func (launchTap) Records(*record.Process, []record.Record)               {}
func (launchTap) Coverage(*record.Process, []record.Interval)            {}
func (launchTap) ProcessDisconnected(*record.Process)                    {}
func (l launchTap) Launched(p *record.Process, at uint64)                { l.at <- at }

// TestServerLaunch: a launch frame reaches the listeners that take launch hints, with the
// time of the call, on the process that sent it.
func TestServerLaunch(t *testing.T) {
	tap := launchTap{at: make(chan uint64, 1)}
	agg := activity.NewAggregator(activity.WithListener(tap))
	srv, err := NewServer(filepath.Join(t.TempDir(), "activity.sock"), agg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	enc := wire.NewEncoder(dial(t, srv.Path()))
	const at = 1_750_000_000_000_000_042 // in the past: a launch hint in the future is refused
	if err := errors.Join(enc.Hello(selfProc()), enc.Launch(wire.Launch{Time: at, API: wire.LaunchRuntime, CBID: 211})); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-tap.at:
		if got != at {
			t.Fatalf("launch at %d, want %d", got, at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no launch hint reached the listener")
	}
}
