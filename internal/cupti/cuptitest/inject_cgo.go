//go:build cgo

package cuptitest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef int (*set_faults_fn)(const char *);
typedef int (*query_fn)(const char *, unsigned long long *);

static void *fake_handle;

// fake_open keeps the fake libcupti loaded for the life of the process, so its state survives
// the binding's Close (dlclose) and Inject can reach it.
static const char *fake_open(const char *path) {
	if (!fake_handle)
		fake_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	return fake_handle ? NULL : dlerror();
}

static int fake_set_faults(const char *spec) {
	set_faults_fn f = (set_faults_fn)dlsym(fake_handle, "cuptiFakeSetFaults");
	return f ? f(spec) : -2;
}

static int fake_query(const char *key, unsigned long long *out) {
	query_fn f = (query_fn)dlsym(fake_handle, "cuptiFakeQuery");
	return f ? f(key, out) : -2;
}
*/
import "C"

import (
	"path/filepath"
	"sync"
	"testing"
	"unsafe"
)

var injectMu sync.Mutex

func hold(t testing.TB) {
	t.Helper()
	Build(t)
	p := C.CString(filepath.Join(Dir(), "libcupti.so.13"))
	defer C.free(unsafe.Pointer(p))
	if e := C.fake_open(p); e != nil {
		t.Fatalf("loading the fake libcupti: %s", C.GoString(e))
	}
}

// Inject replaces the fake's fault set (see ../fake/README.md) for the rest of the test and
// clears it at cleanup (a $CUPTI_FAKE_FAULTS set at load is not restored).
func Inject(t testing.TB, faults string) {
	t.Helper()
	injectMu.Lock()
	defer injectMu.Unlock()
	hold(t)
	set(t, faults)
	t.Cleanup(func() { set(t, "") })
}

// SetFaults changes the fault set now, without a cleanup (for flipping faults mid-test).
func SetFaults(t testing.TB, faults string) {
	t.Helper()
	injectMu.Lock()
	defer injectMu.Unlock()
	hold(t)
	set(t, faults)
}

func set(t testing.TB, faults string) {
	s := C.CString(faults)
	defer C.free(unsafe.Pointer(s))
	if rc := C.fake_set_faults(s); rc != 0 {
		t.Fatalf("fake libcupti rejected faults %q (rc %d)", faults, int(rc))
	}
}

// Query reads one of the fake's counters: init, deinit, hosts, sessions, setconfig.struct_size,
// setconfig.interval, setconfig.trigger, setconfig.append, setconfig.hwbuf.
func Query(t testing.TB, key string) uint64 {
	t.Helper()
	hold(t)
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var v C.ulonglong
	if rc := C.fake_query(k, &v); rc != 0 {
		t.Fatalf("fake libcupti: unknown counter %q", key)
	}
	return uint64(v)
}
