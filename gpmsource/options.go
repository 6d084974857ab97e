package gpmsource

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Mode is when GPM serves the curated metrics.
type Mode string

const (
	// ModeFill serves them from GPM on each GPU while PM sampling does not sample it (paused,
	// busy, error, idle-released); PM sampling serves them otherwise. The default.
	ModeFill Mode = "fill"
	// ModeOnly serves them from GPM alone: no PM session (the low-cost mode).
	ModeOnly Mode = "only"
	// ModeOff never reads GPM for them.
	ModeOff Mode = "off"
)

// DefaultInterval is the time between two GPM samples of a GPU: NVML refreshes GPM every
// 100 ms, so a shorter period gives no newer data.
const DefaultInterval = 100 * time.Millisecond

// MinInterval is the shortest period accepted.
const MinInterval = 100 * time.Millisecond

// Option configures a Source.
type Option func(*config)

type config struct {
	mode      Mode
	interval  time.Duration
	window    time.Duration
	windowMin bool
	mig       bool
	devices   func() []pmdata.Device
	pmStatus  func() []pmdata.DeviceStatus
	pmFamily  func(name string) bool
	procRoot  string
	selfAll   bool
	families  []string // served families; nil: every one GPM serves
	now       func() time.Time
	recheck   time.Duration // Run's wait while no GPU wants GPM
}

func newConfig(opts []Option) config {
	c := config{mode: ModeFill, interval: DefaultInterval, window: aggregate.DefaultWindow, mig: true, now: time.Now,
		recheck: idleRecheck, devices: func() []pmdata.Device { return nil }, procRoot: "/proc"}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithFamilies limits the curated families GPM serves to these names (nil or empty: every one
// it serves, Families()); New refuses a name GPM does not serve. Leaving out
// cupti_graphics_engine_active_ratio is what makes gpm.mode=only cheap: its GPM metric is most
// of NVML's cost of a read (docs/performance.md "GPM mode").
func WithFamilies(names []string) Option { return func(c *config) { c.families = names } }

// WithMode sets when GPM serves the curated metrics (ModeFill by default).
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithInterval sets the time between two samples of a GPU (at least MinInterval; default
// DefaultInterval).
func WithInterval(d time.Duration) Option {
	return func(c *config) { c.interval = max(d, MinInterval) }
}

// WithWindow sets the span of the window statistics, as PM sampling's (aggregate.WithWindow).
func WithWindow(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.window = d
		}
	}
}

// WithWindowMin also serves the window minimums (the _min_ratio families), as PM sampling's.
func WithWindowMin(on bool) Option { return func(c *config) { c.windowMin = on } }

// WithMIG reads each MIG GPU instance of a GPU in MIG mode (default on).
func WithMIG(on bool) Option { return func(c *config) { c.mig = on } }

// WithPMDevices gives PM sampling's devices: a GPU's series carry the gpu label and chip of
// PM sampling's device of the same UUID, as the PM series do.
func WithPMDevices(f func() []pmdata.Device) Option {
	return func(c *config) {
		if f != nil {
			c.devices = f
		}
	}
}

// WithPMStatus gives PM sampling's state per GPU ((*pmsample.Sampler).Status): in ModeFill GPM
// reads a GPU while its state is other than sampling. Without it (no PM sampler) GPM reads
// every GPU.
func WithPMStatus(f func() []pmdata.DeviceStatus) Option {
	return func(c *config) { c.pmStatus = f }
}

// WithPMFamilies tells which curated families PM sampling serves (those its plan holds): in
// ModeFill GPM fills only those, so that no family comes and goes with the fill. Without it,
// every family GPM offers.
func WithPMFamilies(f func(name string) bool) Option {
	return func(c *config) { c.pmFamily = f }
}

// WithProcRoot sets the procfs where the holders of busy GPUs' PM counters are looked for
// (default /proc; it must be the host's PID namespace's for NVML's process IDs to resolve).
func WithProcRoot(dir string) Option {
	return func(c *config) {
		if dir != "" {
			c.procRoot = dir
		}
	}
}

// WithSelfMetrics serves cupti_gpm_samples_total for every GPU GPM reads (on in ModeOnly,
// where it replaces PM sampling's sample count); failures are counted either way.
func WithSelfMetrics(on bool) Option { return func(c *config) { c.selfAll = on } }

// withClock replaces time.Now (tests).
func withClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// withRecheck sets Run's wait while no GPU wants GPM (tests: an hour, so only a Kick ends it).
func withRecheck(d time.Duration) Option { return func(c *config) { c.recheck = d } }
