#!/usr/bin/env python3
"""What NVML says of the processes on GPU 0 while it is shared (issue 31; stage
attrib_share_record): every second the compute list (nvmlDeviceGetComputeRunningProcesses_v3)
and the MPS list (nvmlDeviceGetMPSComputeRunningProcesses_v3), each pid with its memory and
argv[0]; every 20 ms the new per-process utilisation samples (nvmlDeviceGetProcessUtilization),
which pid they credit and with what SM %. Under MPS this shows whether the driver lists and
credits the server, the clients, or both. No pynvml needed: ctypes on libnvidia-ml.so.1.

usage: nvml_mps.py SECONDS
output: "list T pid:mem_MiB:argv0 ...", "mps T pid:mem_MiB:argv0 ...", "util T pid ts_us sm mem"."""
import ctypes
import sys
import time


class ProcInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Sample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


def argv0(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(4096).split(b"\0")[0].decode(errors="replace") or "?"
    except OSError:
        return "-"


def plist(fn, h):
    buf = (ProcInfo * 256)()
    n = ctypes.c_uint(256)
    rc = fn(h, ctypes.byref(n), buf)
    if rc != 0:
        return f"rc={rc}"
    return " ".join(f"{buf[i].pid}:{buf[i].usedGpuMemory >> 20}:{argv0(buf[i].pid)}" for i in range(n.value))


def main():
    secs = float(sys.argv[1])
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    if nv.nvmlInit_v2() != 0:
        sys.exit("nvmlInit failed")
    h = ctypes.c_void_p()
    if nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) != 0:
        sys.exit("no GPU 0")
    last, next_list = 0, 0.0
    buf = (Sample * 1024)()
    t0 = time.time()
    while time.time() < t0 + secs:
        now = time.time()
        if now >= next_list:
            print(f"list {now - t0:.3f} {plist(nv.nvmlDeviceGetComputeRunningProcesses_v3, h)}")
            print(f"mps {now - t0:.3f} {plist(nv.nvmlDeviceGetMPSComputeRunningProcesses_v3, h)}")
            next_list = now + 1
        n = ctypes.c_uint(1024)
        rc = nv.nvmlDeviceGetProcessUtilization(h, buf, ctypes.byref(n), ctypes.c_ulonglong(last))
        if rc == 0:
            new = sorted((buf[i] for i in range(n.value) if buf[i].timeStamp > last), key=lambda s: s.timeStamp)
            for s in new:
                print(f"util {now - t0:.3f} {s.pid} {s.timeStamp} {s.smUtil} {s.memUtil}")
            if new:
                last = max(s.timeStamp for s in new)
        elif rc != 6:  # NVML_ERROR_NOT_FOUND: no sample since last
            print(f"# util rc {rc} at {now - t0:.3f}")
        sys.stdout.flush()
        time.sleep(0.02)


main()
