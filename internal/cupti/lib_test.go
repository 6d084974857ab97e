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

// open loads the fake and closes it at the end of the test.
func open(t *testing.T) *cupti.Lib {
	t.Helper()
	l, err := cupti.Open(cuptitest.Build(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func TestOpen(t *testing.T) {
	opts := cuptitest.Build(t)
	l, err := cupti.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version() != 130001 {
		t.Errorf("Version = %d", l.Version())
	}
	if l.Path() != opts.LibraryPath {
		t.Errorf("Path = %s, want %s", l.Path(), opts.LibraryPath)
	}
	// The fake exports the 13.2 symbols but reports 13.0: the version gate alone says no.
	if l.MissingOptional() != nil || l.HasSinglePassSets() {
		t.Errorf("MissingOptional = %v, HasSinglePassSets = %v", l.MissingOptional(), l.HasSinglePassSets())
	}
	if l.DriverError() != nil {
		t.Errorf("DriverError = %v", l.DriverError())
	}
	// The profiler is initialised once per process (whichever test opened first) and never
	// de-initialised: real CUPTI refuses to initialise again after a DeInitialize (39).
	if got := cuptitest.Query(t, "init"); got != 1 {
		t.Errorf("cuptiProfilerInitialize ran %d times in this process, want 1", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := cupti.Open(opts)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if _, err := l2.Devices(); err != nil {
		t.Errorf("Devices on the second Lib: %v", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if got, deinit := cuptitest.Query(t, "init"), cuptitest.Query(t, "deinit"); got != 1 || deinit != 0 {
		t.Errorf("after close, open, close: init %d, deinit %d; want 1 and 0", got, deinit)
	}
	if err := l2.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := l2.Devices(); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("Devices after Close: %v", err)
	}
}

func TestOpenFromEnvFolder(t *testing.T) {
	opts := cuptitest.Build(t)
	t.Setenv(cupti.EnvLibrary, filepath.Dir(opts.LibraryPath))
	l, err := cupti.Open(cupti.Options{CUDALibraryPath: opts.CUDALibraryPath})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Path() != opts.LibraryPath {
		t.Errorf("Path = %s", l.Path())
	}
}

func TestOpenExplicitMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcupti.so.13")
	_, err := cupti.Open(cupti.Options{LibraryPath: missing})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "No such file") {
		t.Errorf("Open(missing) = %v; want the path and dlerror's text", err)
	}
}

func TestOpenMissingSymbol(t *testing.T) {
	cuptitest.Build(t)
	dir := t.TempDir()
	lib := cuptitest.CompileC(t, dir, "libcupti.so.13", `
int cuptiGetVersion(unsigned *v) { *v = 130001; return 0; }
int cuptiGetResultString(int r, const char **s) { return 1; }
int cuptiGetTimestamp(unsigned long long *t) { *t = 0; return 0; }
int cuptiProfilerInitialize(void *p) { return 0; }
`)
	_, err := cupti.Open(cupti.Options{LibraryPath: lib})
	if err == nil {
		t.Fatal("Open succeeded without the profiler symbols")
	}
	for _, w := range []string{"cuptiProfilerDeInitialize", "undefined symbol", lib} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

func TestOpenNoDriver(t *testing.T) {
	opts := cuptitest.Build(t)
	opts.CUDALibraryPath = filepath.Join(t.TempDir(), "libcuda.so.1")
	l, err := cupti.Open(opts)
	if err != nil {
		t.Fatalf("Open must work without the driver (host-only use): %v", err)
	}
	defer l.Close()
	if l.DriverError() == nil {
		t.Fatal("DriverError = nil")
	}
	if _, err := l.Devices(); !errors.Is(err, cupti.ErrNotSupported) {
		t.Errorf("Devices without a driver: %v", err)
	}
	h, err := l.NewHost("GH100", nil)
	if err != nil {
		t.Fatalf("NewHost without a driver: %v", err)
	}
	h.Close()
}

func TestVersionGating(t *testing.T) {
	opts := cuptitest.Build(t)
	cuptitest.Inject(t, "version=23")
	_, err := cupti.Open(opts)
	var fe *cupti.FeatureError
	if !errors.Is(err, cupti.ErrNotSupported) || !errors.As(err, &fe) || fe.MinVersion != 24 || fe.Have != 23 {
		t.Fatalf("Open on API 23 = %v", err)
	}

	cuptitest.SetFaults(t, "version=25")
	l := open(t)
	s, img := enableConfigured(t, l, 0, nil)
	_ = s
	err = s.SetConfig(img, cupti.SetConfig{HardwareBufferSize: 1 << 26, Interval: 1e6, Trigger: cupti.TriggerGPUTime, KeepLatest: true})
	if !errors.As(err, &fe) || fe.MinVersion != 26 {
		t.Errorf("KeepLatest on API 25 = %v", err)
	}
	if got := cuptitest.Query(t, "setconfig.struct_size"); got != 60 {
		t.Errorf("SetConfig structSize on API 25 = %d, want 60", got)
	}

	cuptitest.SetFaults(t, "")
	l2 := open(t)
	s2, _ := enableConfigured(t, l2, 1, nil)
	_ = s2
	if got := cuptitest.Query(t, "setconfig.struct_size"); got != 64 {
		t.Errorf("SetConfig structSize on 13.0 = %d, want 64", got)
	}
}

func TestDevices(t *testing.T) {
	l := open(t)
	devs, err := l.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []cupti.DeviceInfo{
		{Index: 0, Name: "NVIDIA H200", UUID: "GPU-f0010203-0405-0607-0809-0a0b0c0d0e0f", PCIBusID: "0000:19:00.0"},
		{Index: 1, Name: "NVIDIA H200", UUID: "GPU-f1010203-0405-0607-0809-0a0b0c0d0e0f", PCIBusID: "0000:29:00.0"},
	}
	if !slices.Equal(devs, want) {
		t.Errorf("Devices:\n got %+v\nwant %+v", devs, want)
	}
	for i := range devs {
		if err := l.PMSamplingSupported(i); err != nil {
			t.Errorf("PMSamplingSupported(%d): %v", i, err)
		}
		if chip, err := l.ChipName(i); err != nil || chip != "GH100" {
			t.Errorf("ChipName(%d) = %q, %v", i, chip, err)
		}
	}
	if _, err := l.ChipName(2); err == nil || !strings.Contains(err.Error(), "CUPTI_ERROR_INVALID_DEVICE") {
		t.Errorf("ChipName(2) = %v", err)
	}
	av, err := l.CounterAvailability(0)
	if err != nil || len(av) != 9184 {
		t.Errorf("CounterAvailability = %d bytes, %v", len(av), err)
	}
	ts, err := l.Timestamp()
	if err != nil || ts < 1_700_000_000e9 {
		t.Errorf("Timestamp = %d, %v", ts, err)
	}
}

func TestDeviceCountFromEnv(t *testing.T) {
	t.Setenv("CUPTI_FAKE_DEVICES", "4")
	l := open(t)
	devs, err := l.Devices()
	if err != nil || len(devs) != 4 || devs[3].PCIBusID != "0000:49:00.0" {
		t.Errorf("Devices = %+v, %v", devs, err)
	}
}

func TestPMSamplingUnsupported(t *testing.T) {
	l := open(t)
	for fault, words := range map[string][]string{
		"unsupported=vgpu": {"vGPU disabled", "enable_profiling"},
		"unsupported=arch": {"architecture unsupported", "Turing"},
		"unsupported=cc":   {"confidential compute unsupported"},
	} {
		cuptitest.Inject(t, fault)
		err := l.PMSamplingSupported(0)
		if !errors.Is(err, cupti.ErrNotSupported) {
			t.Errorf("%s: %v does not match ErrNotSupported", fault, err)
			continue
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", fault, err, w)
			}
		}
	}
}

// libnvperf_target.so costs about 100 MB resident on load and CUPTI 13.0's PM sampling does not
// need it: Open leaves it alone, and only a NOT_INITIALIZED answer (CUPTI could not dlopen it by
// its bare name) makes the binding load it from libcupti's folder and retry.
// It runs in a child process: other tests (nvperf_missing) make the binding load the library,
// and a loaded library stays for the life of the process.
func TestNVPerfTargetLoadedOnlyWhenNeeded(t *testing.T) {
	if os.Getenv("CUPTI_TEST_NVPERF_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNVPerfTargetLoadedOnlyWhenNeeded$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CUPTI_TEST_NVPERF_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child test: %v\n%s", err, out)
		}
		return
	}
	l := open(t)
	if cuptitest.Query(t, "nvperf_target_loaded") != 0 {
		t.Fatal("Open loaded libnvperf_target.so")
	}
	cuptitest.SetFaults(t, "needs_nvperf_target")
	s, err := l.Enable(0)
	if err != nil {
		t.Fatalf("Enable when CUPTI needs nvperf_target: %v", err)
	}
	defer s.Disable()
	if cuptitest.Query(t, "nvperf_target_loaded") != 1 {
		t.Fatal("libnvperf_target.so not loaded after CUPTI asked for it")
	}
}
