package dashboards

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The end-to-end tests (prometheus_e2e_test.go, prometheus_fleet_e2e_test.go) share one build of the
// exporter and one synthetic recording: linking the exporter is most of their start-up.
var (
	e2eBuildOnce sync.Once
	e2eBuildDir  string
	e2eBuildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if e2eBuildDir != "" {
		os.RemoveAll(e2eBuildDir)
	}
	os.Exit(code)
}

// e2eExporter returns the exporter binary and the synthetic two-GPU recording, built on
// first use.
func e2eExporter(t *testing.T) (bin, synth string) {
	t.Helper()
	e2eBuildOnce.Do(func() {
		if e2eBuildDir, e2eBuildErr = os.MkdirTemp("", "cupti-dashboards-e2e"); e2eBuildErr != nil {
			return
		}
		e2eBuildErr = runErr("..", "go", "build", "-o", filepath.Join(e2eBuildDir, "cupti-exporter"), "./cmd/cupti-exporter")
		if e2eBuildErr == nil {
			e2eBuildErr = runErr("..", "go", "run", "./recording/internal/gensynthetic", "-o", filepath.Join(e2eBuildDir, "synthetic.cuptirec"))
		}
	})
	if e2eBuildErr != nil {
		t.Fatal(e2eBuildErr)
	}
	return filepath.Join(e2eBuildDir, "cupti-exporter"), filepath.Join(e2eBuildDir, "synthetic.cuptirec")
}

func runErr(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
