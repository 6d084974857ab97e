package cuptitest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// srcDir is the folder of this package's sources (internal/cupti/cuptitest).
func srcDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// FakeDir is the folder holding the fake's C sources.
func FakeDir() string { return filepath.Join(srcDir(), "..", "fake") }

// CatalogPath is the repository's GH100 catalog, the fake's default metric list.
func CatalogPath() string {
	return filepath.Clean(filepath.Join(srcDir(), "..", "..", "..", "testdata", "gh100_pm_sampling_base_metrics.tsv"))
}

// Build compiles the fake libraries (once per test binary) and returns Options pointing at them.
func Build(t testing.TB) cupti.Options {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the fake CUPTI libraries cannot be built")
	}
	buildOnce.Do(func() { buildDir, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("building the fake CUPTI: %v", buildErr)
	}
	return cupti.Options{
		LibraryPath:     filepath.Join(buildDir, "libcupti.so.13"),
		CUDALibraryPath: filepath.Join(buildDir, "libcuda.so.1"),
	}
}

// NoSetsDir is the folder, under Dir, of the fake variant without the CUPTI 13.2 single-pass-set
// symbols (built with -DFAKE_NO_SINGLE_PASS_SETS, version 130200 by default).
const NoSetsDir = "no-single-pass-sets"

// BuildWithoutSinglePassSets is Build for the variant whose libcupti lacks
// cuptiProfilerHostGetSinglePassSets and cuptiProfilerHostGetMetricsInSinglePassSet while
// reporting version 130200, so a test sees the symbol gate alone. It is a separate copy of the
// fake: Inject, SetFaults and Query do not reach it.
func BuildWithoutSinglePassSets(t testing.TB) cupti.Options {
	t.Helper()
	opts := Build(t)
	opts.LibraryPath = filepath.Join(buildDir, NoSetsDir, "libcupti.so.13")
	return opts
}

// Dir is where Build put the libraries ("" before Build).
func Dir() string { return buildDir }

func build() (string, error) {
	fake := FakeDir()
	catalog := CatalogPath()
	h := sha256.New()
	fmt.Fprintf(h, "catalog=%s\n", catalog)
	fmt.Fprintf(h, "layout=2\n") // 2: with the no-single-pass-sets variant
	for _, f := range []string{"fake_cupti.c", "fake_cuda.c", "fake_nvperf.c", "../cupti_decl.h"} {
		b, err := os.ReadFile(filepath.Join(fake, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "cupti-fake-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "libcuda.so.1")); err == nil {
		return dir, nil // built earlier by this or another test binary
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "cupti-fake-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	noSets := []string{"-DFAKE_NO_SINGLE_PASS_SETS", "-DFAKE_DEFAULT_VERSION=130200"}
	libs := []struct {
		out, src string
		defs     []string
	}{
		{"libcupti.so.13", "fake_cupti.c", nil},
		{"libnvperf_host.so", "fake_nvperf.c", nil},
		{"libnvperf_target.so", "fake_nvperf.c", nil},
		{filepath.Join(NoSetsDir, "libcupti.so.13"), "fake_cupti.c", noSets},
		{filepath.Join(NoSetsDir, "libnvperf_host.so"), "fake_nvperf.c", nil},
		{filepath.Join(NoSetsDir, "libnvperf_target.so"), "fake_nvperf.c", nil},
		{"libcuda.so.1", "fake_cuda.c", nil}, // last: its presence marks a complete build
	}
	if err := os.MkdirAll(filepath.Join(tmp, NoSetsDir), 0o755); err != nil {
		return "", err
	}
	for _, l := range libs {
		args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wl,-soname," + filepath.Base(l.out),
			"-DFAKE_DEFAULT_CATALOG=\"" + catalog + "\""}, l.defs...)
		args = append(args, "-o", filepath.Join(tmp, l.out), filepath.Join(fake, l.src), "-lpthread", "-ldl")
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("gcc %s: %v\n%s", l.src, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, NoSetsDir), 0o755); err != nil {
		return "", err
	}
	for _, l := range libs {
		// Rename within one file system is atomic, so concurrent test binaries never see half a file.
		if err := os.Rename(filepath.Join(tmp, l.out), filepath.Join(dir, l.out)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// CompileC compiles a one-file shared library from src into dir/name, for tests that need a
// broken libcupti (a missing symbol, say).
func CompileC(t testing.TB, dir, name, src string) string {
	t.Helper()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-o", out, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}
