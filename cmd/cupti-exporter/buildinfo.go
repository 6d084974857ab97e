package main

import (
	"runtime/debug"
	"strings"

	"github.com/prometheus/common/version"
)

// The version comes from the build: `make build` and the Dockerfile set
// github.com/prometheus/common/version.{Version,Revision,Branch,BuildUser,BuildDate} with
// -ldflags -X from git describe. A plain `go build` or `go run` leaves them empty; then
// fillVersion takes what the Go toolchain stamped into the binary (the module version, or
// the VCS revision, time and modified flag), so that --version, cupti_exporter_build_info
// and the OTLP service.version are never empty.
func init() { fillVersion(debug.ReadBuildInfo) }

func fillVersion(read func() (*debug.BuildInfo, bool)) {
	if version.Version != "" && version.Revision != "" {
		return
	}
	info, ok := read()
	if !ok {
		if version.Version == "" {
			version.Version = "unknown"
		}
		return
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if version.Revision == "" {
		version.Revision = rev
		if rev != "" && settings["vcs.modified"] == "true" {
			version.Revision += "-dirty"
		}
	}
	if version.BuildDate == "" {
		version.BuildDate = settings["vcs.time"]
	}
	if version.Version != "" {
		return
	}
	switch v := info.Main.Version; {
	case v != "" && v != "(devel)":
		version.Version = strings.TrimPrefix(v, "v") // a go install of a tagged module
	case rev != "":
		version.Version = "0.0.0-dev+" + rev[:min(12, len(rev))]
	default:
		version.Version = "0.0.0-dev"
	}
}
