package pipeline

import (
	"fmt"
	"log/slog"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/internal/httplimit"
)

// otherReserve is what the descriptor budget keeps besides the listeners and the activity
// socket: GPU device files opened after start, outbound connections (Kubernetes API, OTLP,
// kubelet), files read (configuration, /proc, a recording).
const otherReserve = 128

// minAutoConnections is the fewest connections web.max_connections=0 settles for: fewer,
// and the descriptor limit is refused as too low.
const minAutoConnections = 16

// descriptorBudget is how the descriptor limit (RLIMIT_NOFILE) is shared: what is open at
// start, the reserves, and the HTTP listeners' connections.
type descriptorBudget struct {
	limit, open     int
	activity, other int // reserves: the activity socket's connections, the rest
	health          int // the health listener's descriptors (0: no health listener)
	perConnection   int // descriptors of one web connection
	webConnections  int // web.max_connections, as given or picked
}

// planDescriptors fits the listeners' connections into the descriptor limit, leaving the
// activity socket (when served) room for all its connections, so that no number of HTTP
// clients can make its accept fail. Each listener also needs one descriptor beyond its
// connections: the newcomer accepted before it replaces another.
func planDescriptors(cfg *Config, activitySocket bool, limit, open int) (descriptorBudget, error) {
	b := descriptorBudget{limit: limit, open: open, other: otherReserve, perConnection: httplimit.PerConnection(cfg.Web.ConfigFile != "")}
	if activitySocket {
		// A connection, a /proc file read while it is identified, and the newcomer
		// accepted before it replaces one.
		b.activity = 2*cfg.Activity.MaxConnections + 2
	}
	if cfg.Web.HealthListenAddress != "" {
		b.health = exporter.HealthMaxConnections + 1
	}
	left := limit - open - b.activity - b.other - b.health - 1
	fit := max(left/b.perConnection, 0)
	switch want := cfg.Web.MaxConnections; {
	case want == 0 && fit >= minAutoConnections:
		b.webConnections = min(exporter.DefaultMaxConnections, fit)
	case want == 0:
		return b, fmt.Errorf("the descriptor limit (RLIMIT_NOFILE) is %d: with %d open, %s, only %d web connections fit, fewer than %d; raise the limit (ulimit -n, systemd LimitNOFILE=, the container runtime's nofile)%s",
			limit, open, b.reserves(cfg), fit, minAutoConnections, b.activityHint(cfg))
	case want > fit:
		return b, fmt.Errorf("web.max_connections %d does not fit the descriptor limit (RLIMIT_NOFILE) %d: with %d open, %s, %d web connections fit (%s); lower web.max_connections to %d or less (0 picks it), or raise the limit (ulimit -n, systemd LimitNOFILE=, the container runtime's nofile)%s",
			want, limit, open, b.reserves(cfg), fit, b.each(), fit, b.activityHint(cfg))
	default:
		b.webConnections = want
	}
	return b, nil
}

// reserves says what the budget holds back, for an error.
func (b descriptorBudget) reserves(cfg *Config) string {
	s := fmt.Sprintf("%d kept for files and outbound connections", b.other)
	if b.activity > 0 {
		s += fmt.Sprintf(", %d for the activity socket (2 per connection of activity.max_connections %d, plus 2)", b.activity, cfg.Activity.MaxConnections)
	}
	if b.health > 0 {
		s += fmt.Sprintf(", %d for the health listener", b.health)
	}
	return s
}

// each says what one web connection takes.
func (b descriptorBudget) each() string {
	if b.perConnection == 1 {
		return "1 descriptor each"
	}
	return fmt.Sprintf("%d descriptors each: --web.config.file's file is read at each TLS handshake and request", b.perConnection)
}

func (b descriptorBudget) activityHint(cfg *Config) string {
	if b.activity == 0 {
		return ""
	}
	return fmt.Sprintf(", or lower activity.max_connections (%d)", cfg.Activity.MaxConnections)
}

// log reports the plan at start.
func (b descriptorBudget) log(logger *slog.Logger) {
	logger.Info("HTTP connection limits fit the descriptor limit", "nofile", b.limit, "open", b.open,
		"web_max_connections", b.webConnections, "descriptors_per_web_connection", b.perConnection,
		"health_max_connections", exporter.HealthMaxConnections*min(b.health, 1),
		"activity_reserve", b.activity, "other_reserve", b.other,
		"unused", b.limit-b.open-b.activity-b.other-b.health-1-b.webConnections*b.perConnection)
}

// httpServerLimits plans the descriptors of serveSources' HTTP listeners (activity socket
// served when live and enabled) and logs the plan.
func httpServerLimits(logger *slog.Logger, cfg *Config, activitySocket bool) (int, error) {
	limit, open, err := httplimit.Descriptors()
	if err != nil {
		return 0, err
	}
	b, err := planDescriptors(cfg, activitySocket, limit, open)
	if err != nil {
		return 0, err
	}
	b.log(logger)
	return b.webConnections, nil
}
