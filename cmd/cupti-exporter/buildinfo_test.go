package main

import (
	"runtime/debug"
	"testing"

	"github.com/prometheus/common/version"
)

func TestFillVersion(t *testing.T) {
	saved := [3]string{version.Version, version.Revision, version.BuildDate}
	t.Cleanup(func() { version.Version, version.Revision, version.BuildDate = saved[0], saved[1], saved[2] })
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-23T04:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name                string
		preset              string // version set with -ldflags
		info                *debug.BuildInfo
		wantVersion, wantRv string
	}{
		{"go build in a checkout", "", vcs, "0.0.0-dev+0123456789ab", "0123456789abcdef0123-dirty"},
		{"go install of a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "1.2.3", ""},
		{"ldflags win", "1.4.0-rc1", vcs, "1.4.0-rc1", "0123456789abcdef0123-dirty"},
		{"no build info", "", nil, "unknown", ""},
	} {
		version.Version, version.Revision, version.BuildDate = tc.preset, "", ""
		fillVersion(func() (*debug.BuildInfo, bool) { return tc.info, tc.info != nil })
		if version.Version != tc.wantVersion || version.Revision != tc.wantRv {
			t.Errorf("%s: version %q revision %q, want %q %q", tc.name, version.Version, version.Revision, tc.wantVersion, tc.wantRv)
		}
	}
}
