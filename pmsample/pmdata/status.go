package pmdata

import (
	"fmt"
	"time"
)

// State is the PM sampling state of a device.
type State string

const (
	StateSampling State = "sampling"
	StatePaused   State = "paused"
	StateBusy     State = "busy"  // another profiler holds the counters; retrying with backoff
	StateError    State = "error" // cannot sample (privileges, unsupported, failure); see Reason
	// StateIdle is a device whose PM session was released because the GPU sat idle (an idle
	// controller, package idle, called the sampler's Release). The exporter is healthy and
	// ready; it holds no session until Reacquire.
	StateIdle State = "idle-released"
	// StateYielded is a device whose counters were given to a profiler found on the host
	// (package profilers decides, the sampler's GiveWay and TakeBack act). Like a pause it is
	// not ready; DeviceStatus.Holder names the profiler.
	StateYielded State = "yielded"
)

// States are every state a device can be in, in the order the state metric lists them.
var States = [...]State{StateSampling, StatePaused, StateBusy, StateError, StateIdle, StateYielded}

// DeviceStatus is the readiness of one device, for health endpoints and the state metric.
type DeviceStatus struct {
	Device int       `json:"device"`
	UUID   string    `json:"uuid"`
	State  State     `json:"state"`
	Ready  bool      `json:"ready"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// PausedUntil is when a timed pause ends; zero when not paused or paused until Resume.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Holder is the profiler the counters were given to (state yielded); nil otherwise.
	Holder *Holder `json:"holder,omitempty"`
}

// Holder is a process that wants or holds a GPU's performance counters.
type Holder struct {
	// Tool is a bounded name (ncu, nsys, dcgm, named): the tool label of the give-way counter.
	Tool string `json:"tool"`
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

func (h Holder) String() string { return fmt.Sprintf("%s (pid %d, %s)", h.Tool, h.PID, h.Comm) }
