#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd from the Go module proxy, once per machine, and prints
# the folder holding both. The e2e test TestWebhookAgainstAPIServer runs them (no kubelet,
# no scheduler) when KUBE_BIN_DIR names that folder; .ci/run sets it.
#
# scripts/ci/kube-apiserver/go.mod requires k8s.io/kubernetes v1.37.2 and replaces its
# staging modules (k8s.io/api, apiserver, ...: "./staging/src/..." in its own go.mod) with
# their published v0.37.2 releases; etcd is the v3.7.0 server Kubernetes pins there. Debian
# bookworm's etcd-server (3.4.23) also passes the test, but is older than the etcd releases
# Kubernetes 1.37 is tested with, and building etcd here costs about 30 s more.
# Cold build on 2 cores shared with other work (load average 20-40): kube-apiserver 95 min wall,
# 1,450 CPU-seconds (about 12-13 min on 2 idle cores); etcd then 26 s. Cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/cupti-exporter-ci/, keyed by that go.mod and go.sum, and
# rebuilt only when missing (cached: instant).
set -euo pipefail

src="$(cd "$(dirname "$0")/kube-apiserver" && pwd)"
key=$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-12)
out="${XDG_CACHE_HOME:-$HOME/.cache}/cupti-exporter-ci/kube-1.37.2-$key"
if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$out"
cd "$src"
for pkg in k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3; do
	name=$(basename "$pkg")
	[ "$name" = v3 ] && name=etcd
	[ -x "$out/$name" ] && continue
	start=$SECONDS
	GOFLAGS=-mod=readonly go build -trimpath -ldflags='-s -w' -o "$out/$name.tmp" "$pkg" >&2
	mv "$out/$name.tmp" "$out/$name"
	echo "built $name in $((SECONDS - start)) s" >&2
done
echo "$out"
