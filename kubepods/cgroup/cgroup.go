// Package cgroup finds the pod UID and container ID in a process's /proc/<pid>/cgroup:
// cgroup v1 and v2, the systemd and cgroupfs drivers, containerd, CRI-O and Docker. It is
// plain string work with no imports beyond strings, apart from package kubepods (which
// maps what it finds to pod names through client-go) so that its fuzz target builds fast.
package cgroup

import "strings"

// Ref is what a process's cgroup says about its pod and container.
type Ref struct {
	// PodUID is the pod's UID as the kubelet names its cgroup: a UUID with dashes for API
	// pods ("1f2e3d4c-..."), 32 hex digits for static pods (the mirror pod carries it in its
	// kubernetes.io/config.mirror annotation). Lower case.
	PodUID string
	// ContainerID is the runtime's container ID (64 hex digits for containerd, CRI-O and
	// Docker), "" when the process sits in the pod's own cgroup or the leaf is not a container.
	ContainerID string
	// Runtime is "containerd", "cri-o" or "docker" when the systemd cgroup driver names it
	// in the leaf; "" with the cgroupfs driver, whose leaf is the bare ID.
	Runtime string
}

// Parse reads the contents of /proc/<pid>/cgroup (cgroup v1: one line per hierarchy,
// "ID:controllers:path"; v2: "0::path"; a bare path is accepted too) and finds the pod
// UID and container ID that the kubelet and the container runtime put in the path, with
// either cgroup driver:
//
//	systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope
//	          (crio-<id>.scope, docker-<id>.scope; Guaranteed pods: kubepods-pod<uid>.slice)
//	cgroupfs: /kubepods/burstable/pod<uid>/<id>   (Guaranteed pods: /kubepods/pod<uid>/<id>)
//
// Prefixes before the kubepods part are ignored (kind's /kubelet.slice/kubelet-kubepods...,
// a node inside Docker, "/.." of another cgroup namespace, where a systemd pod slice
// names kubepods itself but a cgroupfs "pod<uid>" needs the kubepods segment above it). ok is false when no line names
// a pod, for example a process outside Kubernetes, or a container with a private cgroup
// namespace, which sees only "0::/". Any input is safe: nothing is allocated beyond the
// returned strings.
func Parse(text string) (ref Ref, ok bool) {
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if r, ok := parsePath(cgroupPath(line)); ok {
			return r, true
		}
	}
	return Ref{}, false
}

// cgroupPath is the path field of one /proc/<pid>/cgroup line, or the line itself when it
// is not in "ID:controllers:path" form.
func cgroupPath(line string) string {
	line = strings.TrimRight(line, "\r")
	i := strings.IndexByte(line, ':')
	if i <= 0 || !allDigits(line[:i]) {
		return line
	}
	rest := line[i+1:]
	j := strings.IndexByte(rest, ':')
	if j < 0 {
		return line
	}
	return rest[j+1:]
}

// parsePath finds "kubepods..." then the pod segment, then the container segment that
// follows it.
func parsePath(path string) (Ref, bool) {
	inKubepods := false
	for path != "" {
		var seg string
		if i := strings.IndexByte(path, '/'); i >= 0 {
			seg, path = path[:i], path[i+1:]
		} else {
			seg, path = path, ""
		}
		if !inKubepods && isKubepodsSegment(seg) {
			inKubepods = true
			continue
		}
		uid, ok := podSegmentUID(seg)
		// A systemd pod slice names kubepods itself; a cgroupfs "pod<uid>" counts only
		// below a kubepods segment.
		if !ok || !inKubepods && !strings.HasSuffix(seg, ".slice") {
			continue
		}
		ref := Ref{PodUID: uid}
		next := path
		if i := strings.IndexByte(next, '/'); i >= 0 {
			next = next[:i]
		}
		ref.ContainerID, ref.Runtime = containerSegment(next)
		return ref, true
	}
	return Ref{}, false
}

// isKubepodsSegment is true for the kubelet's top cgroup: "kubepods" (cgroupfs),
// "kubepods.slice" (systemd), or a systemd slice nested under another
// ("kubelet-kubepods.slice" in kind).
func isKubepodsSegment(seg string) bool {
	if seg == "kubepods" {
		return true
	}
	name, ok := strings.CutSuffix(seg, ".slice")
	return ok && (name == "kubepods" || strings.HasSuffix(name, "-kubepods"))
}

// podSegmentUID returns the UID of a pod's cgroup segment: "pod<uid>" (cgroupfs) or
// "...-pod<uid_with_underscores>.slice" (systemd).
func podSegmentUID(seg string) (string, bool) {
	var raw string
	if name, ok := strings.CutSuffix(seg, ".slice"); ok {
		i := strings.LastIndex(name, "-pod")
		if i < 0 || !strings.HasPrefix(name, "kubepods") && !strings.Contains(name, "-kubepods") {
			return "", false
		}
		raw = name[i+len("-pod"):]
	} else if rest, ok := strings.CutPrefix(seg, "pod"); ok {
		raw = rest
	} else {
		return "", false
	}
	return normalizeUID(raw)
}

// normalizeUID accepts a UUID (dashes or systemd's underscores) or a 32-digit hash, and
// returns it lower case with dashes.
func normalizeUID(raw string) (string, bool) {
	if len(raw) < 32 || len(raw) > 36 {
		return "", false
	}
	b := []byte(raw)
	hex := 0
	for i, c := range b {
		switch {
		case c == '_' || c == '-':
			b[i] = '-'
		case c >= 'A' && c <= 'F':
			b[i] = c + 'a' - 'A'
			hex++
		case c >= '0' && c <= '9' || c >= 'a' && c <= 'f':
			hex++
		default:
			return "", false
		}
	}
	if hex != 32 {
		return "", false
	}
	return string(b), true
}

// containerSegment reads the leaf below a pod's cgroup: "cri-containerd-<id>.scope",
// "crio-<id>.scope", "docker-<id>.scope" (systemd driver) or "<id>" (cgroupfs). CRI-O's
// "crio-conmon-<id>.scope" is its monitor, not the container: no ID.
func containerSegment(seg string) (id, runtime string) {
	name, scope := strings.CutSuffix(seg, ".scope")
	if scope {
		for _, p := range [...]struct{ prefix, runtime string }{
			{"cri-containerd-", "containerd"}, {"crio-", "cri-o"}, {"docker-", "docker"},
		} {
			if rest, ok := strings.CutPrefix(name, p.prefix); ok && isContainerID(rest) {
				return rest, p.runtime
			}
		}
		return "", ""
	}
	if isContainerID(name) {
		return name, ""
	}
	return "", ""
}

// isContainerID is true for 32 to 64 lower-case hex digits.
func isContainerID(s string) bool {
	if len(s) < 32 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
