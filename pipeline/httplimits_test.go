package pipeline

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/exporter"
)

// The web listener's connections fit what the descriptor limit leaves once the activity
// socket, the health listener and the rest have their reserve; what cannot fit is refused
// with the numbers and the remedies.
func TestPlanDescriptors(t *testing.T) {
	cfg := DefaultConfig() // activity.max_connections 256, health listener on
	reserve := 2*256 + 2 + otherReserve + exporter.HealthMaxConnections + 1 + 1
	for _, tc := range []struct {
		name     string
		limit    int
		webConf  bool
		want     int // web connections; 0: refused
		activity bool
		given    int
		errHas   []string
	}{
		{name: "plenty", limit: 1 << 20, activity: true, want: exporter.DefaultMaxConnections},
		{name: "tight, picked", limit: 1024, activity: true, want: 1024 - 20 - reserve},
		{name: "tight, TLS", limit: 1024, activity: true, webConf: true, want: (1024 - 20 - reserve) / 5},
		{name: "no socket", limit: 1024, want: exporter.DefaultMaxConnections},
		{name: "too low", limit: 700, activity: true, errHas: []string{"RLIMIT_NOFILE) is 700", "20 open", "514 for the activity socket", "fewer than 16", "ulimit -n", "lower activity.max_connections (256)"}},
		{name: "given fits", limit: 1024, activity: true, given: 100, want: 100},
		{name: "given too many", limit: 1024, activity: true, given: 1000, errHas: []string{"web.max_connections 1000 does not fit", strconv.Itoa(1024 - 20 - reserve), "0 picks it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Web.MaxConnections = tc.given
			if tc.webConf {
				c.Web.ConfigFile = "web.yml"
			}
			b, err := planDescriptors(&c, tc.activity, tc.limit, 20)
			if tc.want == 0 {
				if err == nil {
					t.Fatalf("planned %d connections, want refused", b.webConnections)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil || b.webConnections != tc.want {
				t.Fatalf("%d connections, %v; want %d", b.webConnections, err, tc.want)
			}
			used := b.open + b.activity + b.other + b.health + 1 + b.webConnections*b.perConnection
			if used > tc.limit {
				t.Errorf("plan uses %d descriptors of %d", used, tc.limit)
			}
		})
	}
}
