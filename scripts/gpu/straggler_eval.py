"""The straggler stage's helpers (stages_straggler.sh), standard library only.

  straggler_eval.py ksm PORT [JOB POD...]
      a kube-state-metrics stand-in: kube_pod_labels of the ranks' pods (default ml/strag-0 and
      ml/strag-1) with the PyTorchJob label of their job (default "strag"), as kube-state-metrics
      serves it with that label allowlisted
  straggler_eval.py watch PROM_URL CSV STOP_FILE
      every 5 s until STOP_FILE exists: what the chart's training rules say in the local Prometheus
      (communication wait, gap and straggler record per rank, CuptiTrainingStraggler's state, the
      tensor-pipe share per rank and job), one CSV row per rank and poll
  straggler_eval.py summary CSV PHASE_LOG [SLOW_POD]
      per phase: the ranks' mean wait shares and gaps, alerts pending or firing, and for each slowed
      phase the seconds from its start to the first poll from which the straggler record names the
      slowed rank (strag-1) and keeps naming it; a wrong rank named at any time is reported
"""
import csv, http.server, json, os, sys, time, urllib.parse, urllib.request

JOB = "strag"


def ksm(port, job=JOB, *pods):
    pods = pods or ("strag-0", "strag-1")
    body = ("# HELP kube_pod_labels Kubernetes labels converted to Prometheus labels.\n# TYPE kube_pod_labels gauge\n" +
            "".join(f'kube_pod_labels{{namespace="ml",pod="{p}",uid="00000000-0000-4000-8000-{i:012d}",'
                    f'label_training_kubeflow_org_job_name="{job}"}} 1\n' for i, p in enumerate(pods))).encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", int(port)), H).serve_forever()


def query(prom, expr):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(u, timeout=10) as r:
        d = json.load(r)
    return [(s["metric"], float(s["value"][1])) for s in d["data"]["result"]]


def watch(prom, out, stop):
    exprs = {
        "wait": "training_job_rank:cupti_communication_wait:ratio_rate5m",
        "gap": "training_job_rank:cupti_communication_wait_gap:ratio_rate5m",
        "straggler": "training_job_rank:cupti_straggler_gap:ratio_rate5m",
        "tensor": "training_job_rank:cupti_tensor_pipe_active:ratio_rate5m",
        "compute": 'training_job_rank_state:cupti_pod_time:ratio_rate5m{state="compute"}',
        "idle": 'training_job_rank_state:cupti_pod_time:ratio_rate5m{state="idle"}',
    }
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "pod"] + list(exprs) + ["alert", "job_tensor"])
        while not os.path.exists(stop):
            t = time.time()
            rows = {}
            try:
                for k, e in exprs.items():
                    for m, v in query(prom, e):
                        rows.setdefault(m.get("pod", ""), {})[k] = v
                alerts = {m.get("pod", ""): m.get("alertstate", "") for m, _ in query(prom, 'ALERTS{alertname="CuptiTrainingStraggler"}')}
                jt = query(prom, "training_job:cupti_tensor_pipe_active:ratio_rate5m")
            except Exception as ex:  # Prometheus not up yet, or a query failed: next poll
                print("watch:", ex, file=sys.stderr)
                time.sleep(5)
                continue
            for pod in sorted(set(rows) | set(alerts)):
                r = rows.get(pod, {})
                w.writerow([f"{t:.1f}", pod] + [("%.4f" % r[k]) if k in r else "" for k in exprs] +
                           [alerts.get(pod, ""), ("%.4f" % jt[0][1]) if jt else ""])
            f.flush()
            time.sleep(max(0.0, 5 - (time.time() - t)))


def summary(path, log, slow="strag-1"):
    phases = []
    for line in open(log):
        name, t = line.split()
        phases.append((name, float(t)))
    rows = list(csv.DictReader(open(path)))
    num = lambda s: float(s) if s else None
    for i, (name, start) in enumerate(phases[:-1]):
        end = phases[i + 1][1]
        ph = [r for r in rows if start <= float(r["t"]) < end]
        mean = lambda pod, k: (lambda v: sum(v) / len(v) if v else float("nan"))([num(r[k]) for r in ph if r["pod"] == pod and r[k]])
        line = f"phase {name} ({end - start:.0f} s):"
        for pod in sorted({r["pod"] for r in ph if r["pod"]}):
            line += f" {pod} wait {mean(pod, 'wait'):.3f} gap {mean(pod, 'gap'):+.3f} compute {mean(pod, 'compute'):.3f} idle {mean(pod, 'idle'):.3f} tensor {mean(pod, 'tensor'):.3f};"
        alerts = sorted({(r["pod"], r["alert"]) for r in ph if r["alert"]})
        named = sorted({r["pod"] for r in ph if r["straggler"]})
        line += f" straggler named {named or 'none'}; alerts {alerts or 'none'}"
        if name != "balanced":
            polls = sorted((float(r["t"]), bool(r["straggler"])) for r in ph if r["pod"] == slow)
            # the first poll from which strag-1 stays named to the end of the phase
            first = None
            for t, on in polls:
                if on and first is None:
                    first = t
                elif not on:
                    first = None
            line += f"; {slow} named from {first - start:.0f} s after the slowdown" if first else f"; {slow} never named for good"
            pend = min((float(r["t"]) for r in ph if r["pod"] == slow and r["alert"]), default=None)
            line += f"; CuptiTrainingStraggler on {slow} from {pend - start:.0f} s (pending; firing after the rule's for:)" if pend else "; no alert"
        wrong = sorted({r["pod"] for r in ph if r["straggler"] and r["pod"] != slow})
        if wrong:
            line += f"; WRONG RANK NAMED {wrong}"
        print(line)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "ksm":
        ksm(*sys.argv[2:])
    elif cmd == "watch":
        watch(*sys.argv[2:5])
    elif cmd == "summary":
        summary(*sys.argv[2:5])
    else:
        sys.exit(__doc__)
