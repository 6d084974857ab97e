//go:build !jointap

package pipeline

import (
	"log/slog"

	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// tapJoin returns the join's feed: the join itself (a build with -tags jointap can record
// it, jointap.go).
func tapJoin(a *attribution.Attributor, _ []pmdata.Device, _ []pmdata.CatalogEntry, _ *slog.Logger) joinFeed {
	return feedOf(a)
}
