#!/usr/bin/env python3
"""Polls NVML's per-process utilisation samples of GPU 0 (nvmlDeviceGetProcessUtilization)
every PERIOD seconds for SECONDS and prints every new sample once: wall time of the read,
pid, the sample's timestamp (µs, CPU clock), SM % and memory %. Shows how often the driver
takes a per-process sample and what it reports while processes time-slice (issue 21; stage
attrib_record). No pynvml needed: ctypes on libnvidia-ml.so.1.

usage: nvml_procutil.py SECONDS [PERIOD]"""
import ctypes
import sys
import time


class Sample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


def main():
    secs = float(sys.argv[1])
    period = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    if nv.nvmlInit_v2() != 0:
        sys.exit("nvmlInit failed")
    h = ctypes.c_void_p()
    if nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) != 0:
        sys.exit("no GPU 0")
    last = 0
    buf = (Sample * 1024)()
    end = time.time() + secs
    print("# read_s pid ts_us sm mem")
    while time.time() < end:
        n = ctypes.c_uint(1024)
        rc = nv.nvmlDeviceGetProcessUtilization(h, buf, ctypes.byref(n), ctypes.c_ulonglong(last))
        now = time.time()
        if rc == 0:
            new = sorted((buf[i] for i in range(n.value) if buf[i].timeStamp > last), key=lambda s: s.timeStamp)
            for s in new:
                print(f"{now:.4f} {s.pid} {s.timeStamp} {s.smUtil} {s.memUtil}")
            if new:
                last = max(s.timeStamp for s in new)
        elif rc not in (6,):  # NVML_ERROR_NOT_FOUND: no sample since last
            print(f"# rc {rc} at {now:.4f}")
        sys.stdout.flush()
        time.sleep(period)


main()
