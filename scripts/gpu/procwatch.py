"""Watch the processes that start on this host (issue 32: how profilers start, and a give-way
simulated with the pause API).

usage: procwatch.py SECONDS OUT.jsonl [POLL_MS=2] [--pause-on=ncu,nsys] [--api=http://localhost:9477]

Every POLL_MS it lists /proc; a PID not seen before is recorded with the time it was first
seen, its parent, comm, exe, cmdline, the environment variables that tell a profiler
(CUDA_INJECTION64_PATH, LD_PRELOAD, NV*, NSYS*, CUDA_VISIBLE_DEVICES) and, while it lives (re-read
every 20 ms), any exec (comm change) and the libraries of interest it maps (nvperf, cupti,
injection libraries). With --pause-on it POSTs pause when a process whose comm is in the list
appears, and resume when the last such process is gone, logging both answers' times.
"""
import json, os, sys, time, urllib.request

secs, out = float(sys.argv[1]), sys.argv[2]
poll = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 and not sys.argv[3].startswith("--") else 0.002
opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--"))
pause_on = set(filter(None, opts.get("pause-on", "").split(",")))
api = opts.get("api", "http://localhost:9477")
ENV = ("CUDA_INJECTION64_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
LIBS = ("nvperf", "cupti", "Injection", "TreeLauncher", "nsys", "Nsight", "dcgm")

def rd(p, mode="r"):
    try:
        with open(p, mode) as f:
            return f.read()
    except OSError:
        return None

def info(pid):
    st = rd(f"/proc/{pid}/stat")
    if st is None:
        return None
    comm = st[st.index("(") + 1:st.rindex(")")]
    f = st[st.rindex(")") + 2:].split()
    d = {"pid": pid, "ppid": int(f[1]), "comm": comm, "start_ticks": int(f[19])}
    try:
        d["exe"] = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        d["exe"] = None
    c = rd(f"/proc/{pid}/cmdline", "rb")
    d["cmdline"] = c.decode(errors="replace").split("\0")[:-1] if c else None
    e = rd(f"/proc/{pid}/environ", "rb")
    if e:
        env = dict(kv.split("=", 1) for kv in e.decode(errors="replace").split("\0") if "=" in kv)
        d["env"] = {k: v for k, v in env.items() if k in ENV or k.startswith(("NV", "NSYS", "CUPTI"))}
    return d

def libs(pid):
    m = rd(f"/proc/{pid}/maps")
    if not m:
        return set()
    return {l.split()[-1] for l in m.splitlines() if len(l.split()) > 5 and any(s in l for s in LIBS)}

def post(path):
    t0 = time.time()
    try:
        r = urllib.request.urlopen(urllib.request.Request(api + path, method="POST"), timeout=10)
        body = r.read().decode()[:300]
    except Exception as ex:
        body = repr(ex)
    return {"t0": t0, "t1": time.time(), "body": body}

seen = set(int(p) for p in os.listdir("/proc") if p.isdigit())
live = {}  # pid -> (comm, libs)
log = open(out, "w")
def emit(**kw):
    kw.setdefault("t", time.time())
    log.write(json.dumps(kw) + "\n"); log.flush()

holders = set()
end = time.time() + secs
last_deep = 0.0
while time.time() < end:
    now = time.time()
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        if pid in seen:
            continue
        seen.add(pid)
        d = info(pid)
        if d is None:
            continue
        emit(ev="new", **d)
        live[pid] = (d["comm"], set())
    if now - last_deep > 0.02:
        last_deep = now
        for pid in list(live):
            d = info(pid)
            if d is None:
                emit(ev="gone", pid=pid, comm=live[pid][0]); del live[pid]; continue
            comm, ls = live[pid]
            if d["comm"] != comm:
                emit(ev="exec", **d)
            nl = libs(pid)
            if nl - ls:
                emit(ev="maps", pid=pid, comm=d["comm"], libs=sorted(nl - ls))
            live[pid] = (d["comm"], ls | nl)
    if pause_on:
        cur = {p for p, (c, _) in live.items() if c in pause_on}
        if cur and not holders:
            emit(ev="pause", who=sorted(live[p][0] for p in cur), **post("/api/v1/pm-sampling/pause"))
        if holders and not cur:
            emit(ev="resume", **post("/api/v1/pm-sampling/resume"))
        holders = cur
    time.sleep(poll)
