"""Resident memory of a bare process (ctypes, no exporter) at each step of CUDA and CUPTI start-up.

usage: initrss.py VARIANT   (libcupti.so.13 and libcuda.so.1 on the loader path; LIBDIR = CUPTI's folder)
  lazy     let CUPTI load what it needs
  thread   the same, with the profiler initialised from a second thread
  preload  first load libnvperf_target.so and libnvperf_host.so from LIBDIR (RTLD_GLOBAL), as the
           exporter once did
Prints one line: the RSS (MB) after each step and the nvperf libraries mapped at the end.
"""
import ctypes, os, re, sys, threading

def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/self/status").read()).group(1)) // 1024

class HostInit(ctypes.Structure):  # CUpti_Profiler_Host_Initialize_Params, 13.0 (48 bytes)
    _fields_ = [("structSize", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("profilerType", ctypes.c_int),
                ("pChipName", ctypes.c_char_p), ("pAvail", ctypes.c_void_p), ("pHostObject", ctypes.c_void_p)]

variant, steps = sys.argv[1], []
def step(what):
    steps.append(f"{what} {rss()}")

step("start")
if variant == "preload":
    for lib in ("libnvperf_target.so", "libnvperf_host.so"):
        ctypes.CDLL(os.path.join(os.environ["LIBDIR"], lib), mode=ctypes.RTLD_GLOBAL)
        step(lib)
cuda = ctypes.CDLL("libcuda.so.1")
step(f"cuInit({cuda.cuInit(0)})")
cupti = ctypes.CDLL("libcupti.so.13")
step("libcupti")

def profiler_init():
    step(f"profiler_init({cupti.cuptiProfilerInitialize((ctypes.c_size_t * 2)(16, 0))})")  # structSize 16, pPriv NULL
if variant == "thread":
    t = threading.Thread(target=profiler_init)
    t.start()
    t.join()
else:
    profiler_init()
h = HostInit(48, None, 1, b"GH100", None, None)  # profilerType 1: PM sampling
step(f"host_init({cupti.cuptiProfilerHostInitialize(ctypes.byref(h))})")
mapped = sorted({l.split()[-1].rsplit("/", 1)[-1] for l in open("/proc/self/maps") if "nvperf" in l})
print(f"{variant}: " + ", ".join(steps) + " MB; nvperf mapped: " + " ".join(mapped), flush=True)
