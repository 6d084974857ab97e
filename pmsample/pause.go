package pmsample

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Pause releases the performance counters of every device (Stop, Disable) so that another
// profiler (ncu, nsys, DCGM) can use them, and waits up to 5 s for the devices to let go.
// With d > 0 sampling resumes by itself after d; with d == 0 it waits for Resume.
func (s *Sampler) Pause(ctx context.Context, d time.Duration) error {
	var until time.Time
	if d > 0 {
		until = time.Now().Add(d)
	}
	for _, r := range s.runners {
		r.mu.Lock()
		r.pause, r.pausedUntil = true, until
		r.mu.Unlock()
		r.poke()
	}
	if s.running.TryLock() { // not running: nothing holds the counters
		s.running.Unlock()
		for _, r := range s.runners {
			if !r.fixed {
				r.setState(pmdata.StatePaused, "paused on request")
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.waitState(ctx, func(st pmdata.State) bool { return st == pmdata.StatePaused })
}

// waitState waits until every device that can sample satisfies ok, woken by each change of
// a device's state.
func (s *Sampler) waitState(ctx context.Context, ok func(pmdata.State) bool) error {
	for {
		changed := s.changeSignal() // before looking: a change after the look still wakes the wait
		i := slices.IndexFunc(s.runners, func(r *runner) bool { return !r.fixed && !ok(r.status().State) })
		if i < 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			r := s.runners[i]
			return fmt.Errorf("waiting for device %d (state %s): %w", r.dev.Index, r.status().State, ctx.Err())
		case <-changed:
		}
	}
}

// Resume retakes the counters (Enable, SetConfig, Start) on every paused device; a device
// whose counters are still busy goes to state busy and retries with backoff.
func (s *Sampler) Resume() {
	for _, r := range s.runners {
		r.mu.Lock()
		r.pause, r.pausedUntil = false, time.Time{}
		r.mu.Unlock()
		r.poke()
	}
}

func (r *runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// PauseResponse is the JSON body of the pause and resume endpoints.
type PauseResponse struct {
	Devices []pmdata.DeviceStatus `json:"devices"`
	Error   string                `json:"error,omitempty"`
}

// MaxPause is the longest timed pause the handler accepts: a longer one is more likely a typo
// (or a client holding the counters for years) than a profiling session; an indefinite pause
// (no duration) stays possible and ends with resume.
const MaxPause = 24 * time.Hour

// Handler serves POST /api/v1/pm-sampling/pause (optional ?duration=30s, auto-resume after)
// and POST /api/v1/pm-sampling/resume; both answer the devices' states as JSON.
func (s *Sampler) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/pm-sampling/pause", func(w http.ResponseWriter, req *http.Request) {
		var d time.Duration
		if v := req.URL.Query().Get("duration"); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d < 0 {
				s.reply(w, http.StatusBadRequest, fmt.Sprintf("parsing duration %q: want a positive Go duration such as 30s or 5m", v))
				return
			}
			if d > MaxPause {
				s.reply(w, http.StatusBadRequest, fmt.Sprintf("duration %s is longer than the %s a timed pause may last: pause without a duration and resume explicitly", d, MaxPause))
				return
			}
		}
		if err := s.Pause(req.Context(), d); err != nil {
			s.reply(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		s.logger.Info("pm sampling paused on request", "duration", d, "remote", req.RemoteAddr)
		s.reply(w, http.StatusOK, "")
	})
	mux.HandleFunc("POST /api/v1/pm-sampling/resume", func(w http.ResponseWriter, req *http.Request) {
		s.Resume()
		if !s.running.TryLock() { // running: give the devices a moment to retake the counters
			ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
			_ = s.waitState(ctx, func(st pmdata.State) bool { return st != pmdata.StatePaused })
			cancel()
		} else {
			s.running.Unlock()
		}
		s.logger.Info("pm sampling resumed on request", "remote", req.RemoteAddr)
		s.reply(w, http.StatusOK, "")
	})
	return mux
}

func (s *Sampler) reply(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(PauseResponse{Devices: s.Status(), Error: msg})
}
