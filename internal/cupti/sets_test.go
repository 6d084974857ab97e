package cupti_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

var (
	wantSets   = []string{"TriageCompute", "Throughput"}
	wantTriage = []string{
		"gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
		"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
		"sm__warps_active.avg.pct_of_peak_sustained_active",
		"dram__throughput.avg.pct_of_peak_sustained_elapsed",
		"pcie__read_bytes.sum.per_second",
		"pcie__write_bytes.sum.per_second",
	}
	optionalSymbols = []string{"cuptiProfilerHostGetSinglePassSets", "cuptiProfilerHostGetMetricsInSinglePassSet"}
)

func TestSinglePassSets(t *testing.T) {
	cuptitest.Build(t)
	cuptitest.Inject(t, "version=130200")
	l := open(t)
	if !l.HasSinglePassSets() {
		t.Fatalf("HasSinglePassSets = false on API 130200 with the symbols (missing %v)", l.MissingOptional())
	}
	sets, err := l.SinglePassSets("GH100")
	if err != nil || !slices.Equal(sets, wantSets) {
		t.Fatalf("SinglePassSets(GH100) = %q, %v; want %q", sets, err, wantSets)
	}
	ms, err := l.MetricsInSinglePassSet("GH100", "TriageCompute")
	if err != nil || !slices.Equal(ms, wantTriage) {
		t.Fatalf("MetricsInSinglePassSet(TriageCompute) =\n%q, %v\nwant %q", ms, err, wantTriage)
	}
	if ms, err := l.MetricsInSinglePassSet("GH100", "Throughput"); err != nil || len(ms) != 5 || ms[1] != "lts__throughput.avg.pct_of_peak_sustained_elapsed" {
		t.Errorf("MetricsInSinglePassSet(Throughput) = %q, %v", ms, err)
	}
	// A known chip without sets: an empty list, not an error.
	if sets, err := l.SinglePassSets("GA100"); err != nil || sets == nil || len(sets) != 0 {
		t.Errorf("SinglePassSets(GA100) = %#v, %v", sets, err)
	}
	if _, err := l.SinglePassSets("XX999"); err == nil || !strings.Contains(err.Error(), "CUPTI_ERROR_INVALID_CHIP_NAME") ||
		!strings.Contains(err.Error(), "XX999") {
		t.Errorf("SinglePassSets(unknown chip) = %v", err)
	}
	_, err = l.MetricsInSinglePassSet("GH100", "NoSuchSet")
	var ce *cupti.CallError
	if !errors.As(err, &ce) || ce.Result != cupti.ErrorInvalidParameter || !strings.Contains(err.Error(), `"NoSuchSet"`) {
		t.Errorf("MetricsInSinglePassSet(unknown set) = %v", err)
	}
}

func TestSinglePassSetsVersionGate(t *testing.T) {
	// The default fake exports the symbols but reports 13.0 (130001): nothing may be called.
	l := open(t)
	check := func(what string, err error) {
		t.Helper()
		var fe *cupti.FeatureError
		if !errors.Is(err, cupti.ErrNotSupported) || !errors.As(err, &fe) || fe.MinVersion != 130200 || fe.Have != 130001 || fe.Missing != nil {
			t.Errorf("%s on 13.0 = %v; want a FeatureError for 130200", what, err)
			return
		}
		if !strings.Contains(err.Error(), "CUDA 13.2") {
			t.Errorf("%s: %q does not name CUDA 13.2", what, err)
		}
	}
	_, err := l.SinglePassSets("GH100")
	check("SinglePassSets", err)
	_, err = l.MetricsInSinglePassSet("GH100", "TriageCompute")
	check("MetricsInSinglePassSet", err)
	hosts := cuptitest.Query(t, "hosts")
	_, err = l.NewHostForSet("GH100", "TriageCompute", nil)
	check("NewHostForSet", err)
	if cuptitest.Query(t, "hosts") != hosts {
		t.Error("NewHostForSet on 13.0 called HostInitialize")
	}
	// No set: the 13.0 params, as NewHost sends.
	h, err := l.NewHostForSet("GH100", "", nil)
	if err != nil {
		t.Fatalf("NewHostForSet without a set on 13.0: %v", err)
	}
	defer h.Close()
	if got := cuptitest.Query(t, "host_init.struct_size"); got != 48 {
		t.Errorf("HostInitialize structSize = %d, want 48", got)
	}
}

func TestSinglePassSetsAbsentSymbols(t *testing.T) {
	l, err := cupti.Open(cuptitest.BuildWithoutSinglePassSets(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Version() != 130200 || !slices.Equal(l.MissingOptional(), optionalSymbols) || l.HasSinglePassSets() {
		t.Fatalf("Version = %d, MissingOptional = %v, HasSinglePassSets = %v", l.Version(), l.MissingOptional(), l.HasSinglePassSets())
	}
	if !strings.Contains(strings.Join(l.Warnings(), "\n"), "cuptiProfilerHostGetSinglePassSets") {
		t.Errorf("Warnings do not report the optional symbols: %q", l.Warnings())
	}
	for what, call := range map[string]func() error{
		"SinglePassSets":         func() error { _, err := l.SinglePassSets("GH100"); return err },
		"MetricsInSinglePassSet": func() error { _, err := l.MetricsInSinglePassSet("GH100", "TriageCompute"); return err },
	} {
		err := call()
		var fe *cupti.FeatureError
		if !errors.Is(err, cupti.ErrNotSupported) || !errors.As(err, &fe) || fe.MinVersion != 130200 ||
			!slices.Equal(fe.Missing, optionalSymbols) || !strings.Contains(err.Error(), "lacks cuptiProfilerHostGetSinglePassSets") {
			t.Errorf("%s without the symbols = %v", what, err)
		}
	}
}

func TestNewHostForSet(t *testing.T) {
	cuptitest.Build(t)
	cuptitest.Inject(t, "version=130200")
	l := open(t)
	av, err := l.CounterAvailability(0)
	if err != nil {
		t.Fatal(err)
	}
	withSet := cuptitest.Query(t, "hosts.with_set")
	h, err := l.NewHostForSet("GH100", "TriageCompute", av)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.SinglePassSet() != "TriageCompute" || h.Chip() != "GH100" {
		t.Errorf("SinglePassSet, Chip = %q, %q", h.SinglePassSet(), h.Chip())
	}
	if got := cuptitest.Query(t, "host_init.struct_size"); got != 56 {
		t.Errorf("HostInitialize structSize with a set = %d, want 56", got)
	}
	// The config image is built on a fresh host object, which must name the set too.
	img, err := h.ConfigImage(wantTriage)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Free()
	if n, err := img.Passes(); err != nil || n != 1 {
		t.Errorf("Passes = %d, %v", n, err)
	}
	if got := cuptitest.Query(t, "hosts.with_set") - withSet; got != 2 {
		t.Errorf("%d HostInitialize calls named the set, want 2 (host and config image)", got)
	}
	if _, err := l.NewHostForSet("GH100", "NoSuchSet", nil); err == nil || !strings.Contains(err.Error(), `"NoSuchSet"`) ||
		!strings.Contains(err.Error(), "CUPTI_ERROR_INVALID_PARAMETER") {
		t.Errorf("NewHostForSet(unknown set) = %v", err)
	}
	// Without a set, NewHost still sends the 13.0 size to a 13.2 library.
	h2, err := l.NewHost("GH100", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if got := cuptitest.Query(t, "host_init.struct_size"); got != 48 {
		t.Errorf("NewHost structSize on 13.2 = %d, want 48", got)
	}
}

// TestFakeSinglePassSetProtocol holds the fake to the documented two-phase protocol, from C,
// including the calls the binding never makes (one NULL buffer, short counts).
func TestFakeSinglePassSetProtocol(t *testing.T) {
	opts := cuptitest.Build(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "proto.c")
	prog := `
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "cupti_decl.h"
#define EXPECT(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); return 1; } } while (0)
typedef int (*faults_fn)(const char *);
int main(int argc, char **argv) {
	void *h = dlopen(argv[1], RTLD_NOW);
	EXPECT(h);
	faults_fn faults = (faults_fn)dlsym(h, "cuptiFakeSetFaults");
	cx_params_fn sets = (cx_params_fn)dlsym(h, "cuptiProfilerHostGetSinglePassSets");
	cx_params_fn metrics = (cx_params_fn)dlsym(h, "cuptiProfilerHostGetMetricsInSinglePassSet");
	EXPECT(faults && sets && metrics);
	CUpti_Profiler_Host_GetSinglePassSets_Params s = {CUpti_Profiler_Host_GetSinglePassSets_Params_STRUCT_SIZE};
	s.pChipName = "GH100";
	EXPECT(sets(&s) == 11); /* below 130200 */
	EXPECT(faults("version=130200") == 0);
	s.structSize = 32;
	EXPECT(sets(&s) == 1);
	s.structSize = CUpti_Profiler_Host_GetSinglePassSets_Params_STRUCT_SIZE;
	EXPECT(sets(&s) == 0 && s.numOfSinglePassSets == 2);
	const char *names[2] = {0};
	s.ppSinglePassSets = names;
	s.numOfSinglePassSets = 1;
	EXPECT(sets(&s) == 1); /* array too small */
	s.numOfSinglePassSets = 2;
	EXPECT(sets(&s) == 0 && !strcmp(names[0], "TriageCompute") && !strcmp(names[1], "Throughput"));

	CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params m = {CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params_STRUCT_SIZE};
	m.pChipName = "GH100";
	m.pSinglePassSetName = "Throughput";
	EXPECT(metrics(&m) == 0 && m.numOfMetricsInSinglePassSet == 5 && m.metricsBufferSize > 0);
	size_t idx[5];
	unsigned char buf[512];
	EXPECT(m.metricsBufferSize <= sizeof buf);
	m.pMetricsIndicesBuffer = idx; /* exactly one buffer: INVALID_PARAMETER */
	EXPECT(metrics(&m) == 1);
	m.pMetricsIndicesBuffer = NULL;
	m.pMetricsBuffer = buf;
	EXPECT(metrics(&m) == 1);
	m.pMetricsIndicesBuffer = idx;
	m.metricsBufferSize--;
	EXPECT(metrics(&m) == 1); /* buffer smaller than reported */
	m.metricsBufferSize++;
	EXPECT(metrics(&m) == 0);
	EXPECT(!strcmp((char *)buf + idx[0], "dram__throughput.avg.pct_of_peak_sustained_elapsed"));
	EXPECT(!strcmp((char *)buf + idx[4], "fe__throughput.avg.pct_of_peak_sustained_elapsed"));
	EXPECT(idx[4] + strlen((char *)buf + idx[4]) + 1 == m.metricsBufferSize);
	m.pSinglePassSetName = "Nope";
	EXPECT(metrics(&m) == 1);
	faults("");
	printf("ok\n");
	return 0;
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "proto")
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-I", filepath.Join(cuptitest.FakeDir(), ".."), "-o", bin, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	// A separate process: its copy of the fake has its own fault state.
	out, err := exec.Command(bin, opts.LibraryPath).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("protocol check: %v\n%s", err, out)
	}
}
