package cgroup

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	uid     = "1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b"
	uidUS   = "1f2e3d4c_5b6a_4798_8a9b_0c1d2e3f4a5b" // systemd's escaping of the dashes
	staticU = "6d8f1e2a9b3c4d5e6f7a8b9c0d1e2f3a"     // a static pod's config hash
	cid     = "8b2f5c1d9e0a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Ref
		ok         bool
	}{
		{"v2 systemd containerd burstable",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUS + ".slice/cri-containerd-" + cid + ".scope\n",
			Ref{uid, cid, "containerd"}, true},
		{"v2 systemd containerd guaranteed",
			"0::/kubepods.slice/kubepods-pod" + uidUS + ".slice/cri-containerd-" + cid + ".scope",
			Ref{uid, cid, "containerd"}, true},
		{"v2 systemd cri-o besteffort",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidUS + ".slice/crio-" + cid + ".scope",
			Ref{uid, cid, "cri-o"}, true},
		{"v2 systemd cri-o conmon is no container",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidUS + ".slice/crio-conmon-" + cid + ".scope",
			Ref{uid, "", ""}, true},
		{"v1 systemd docker (cri-dockerd)",
			"12:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUS + ".slice/docker-" + cid + ".scope\n" +
				"11:cpu,cpuacct:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUS + ".slice/docker-" + cid + ".scope\n",
			Ref{uid, cid, "docker"}, true},
		{"v1 cgroupfs burstable, first lines name no pod",
			"13:rdma:/\n12:pids:/kubepods/burstable/pod" + uid + "/" + cid + "\n11:memory:/kubepods/burstable/pod" + uid + "/" + cid + "\n1:name=systemd:/kubepods/burstable/pod" + uid + "/" + cid + "\n0::/\n",
			Ref{uid, cid, ""}, true},
		{"v1 cgroupfs guaranteed", "4:devices:/kubepods/pod" + uid + "/" + cid, Ref{uid, cid, ""}, true},
		{"v2 cgroupfs besteffort (k3s)", "0::/kubepods/besteffort/pod" + uid + "/" + cid, Ref{uid, cid, ""}, true},
		{"kind node: kubelet.slice prefix",
			"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidUS + ".slice/cri-containerd-" + cid + ".scope",
			Ref{uid, cid, "containerd"}, true},
		{"node inside docker", "0::/docker/" + cid + "/kubepods/burstable/pod" + uid + "/" + cid, Ref{uid, cid, ""}, true},
		{"seen from another cgroup namespace", "0::/../../kubepods-burstable-pod" + uidUS + ".slice/cri-containerd-" + cid + ".scope",
			Ref{uid, cid, "containerd"}, true}, // the systemd pod slice names kubepods itself
		{"cgroupfs seen from another cgroup namespace", "0::/../pod" + uid + "/" + cid, Ref{}, false}, // no kubepods anchor: no guess
		{"seen from another cgroup namespace, anchor kept", "0::/../kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUS + ".slice/cri-containerd-" + cid + ".scope",
			Ref{uid, cid, "containerd"}, true},
		{"static pod hash", "0::/kubepods/burstable/pod" + staticU + "/" + cid, Ref{staticU, cid, ""}, true},
		{"upper-case UID", "0::/kubepods/pod" + strings.ToUpper(uid) + "/" + cid, Ref{uid, cid, ""}, true},
		{"pod cgroup itself (pause, no container)", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUS + ".slice",
			Ref{uid, "", ""}, true},
		{"nested cgroup inside the container", "0::/kubepods/burstable/pod" + uid + "/" + cid + "/init.scope", Ref{uid, cid, ""}, true},
		{"CRLF", "0::/kubepods/pod" + uid + "/" + cid + "\r\n", Ref{uid, cid, ""}, true},
		{"bare path", "/kubepods/pod" + uid + "/" + cid, Ref{uid, cid, ""}, true},
		{"private cgroup namespace", "0::/\n", Ref{}, false},
		{"host systemd service", "0::/system.slice/containerd.service", Ref{}, false},
		{"user session", "0::/user.slice/user-1000.slice/session-3.scope", Ref{}, false},
		{"plain docker container", "0::/system.slice/docker-" + cid + ".scope", Ref{}, false},
		{"pod segment outside kubepods", "0::/pod" + uid + "/" + cid, Ref{}, false},
		{"short UID", "0::/kubepods/pod1234/abcd", Ref{}, false},
		{"UID with a non-hex letter", "0::/kubepods/pod" + strings.Replace(uid, "f", "g", 1) + "/" + cid, Ref{}, false},
		{"container ID not hex", "0::/kubepods/pod" + uid + "/not-a-container", Ref{uid, "", ""}, true},
		{"synthetic", "/synthetic", Ref{}, false},
		{"empty", "", Ref{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.text)
			if ok != tc.ok || got != tc.want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.text, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzParse checks that any input is safe and that what comes out is well formed:
// a UID of 32 hex digits (with dashes) found in the input, a container ID of hex digits.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUS + ".slice/cri-containerd-" + cid + ".scope\n",
		"12:memory:/kubepods/burstable/pod" + uid + "/" + cid + "\n0::/\n",
		"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + uidUS + ".slice/crio-" + cid + ".scope",
		"0::/", "", ":::", "1:a:b:c:/kubepods/pod", "/kubepods/pod" + staticU,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ref, ok := Parse(text)
		if !ok {
			if ref != (Ref{}) {
				t.Fatalf("not ok but %+v", ref)
			}
			return
		}
		if !strings.Contains(text, "kubepods") {
			t.Fatalf("found %+v in %q, which names no kubepods cgroup", ref, text)
		}
		hex := 0
		for _, c := range ref.PodUID {
			switch {
			case c >= '0' && c <= '9' || c >= 'a' && c <= 'f':
				hex++
			case c == '-':
			default:
				t.Fatalf("UID %q has %q", ref.PodUID, c)
			}
		}
		if hex != 32 {
			t.Fatalf("UID %q has %d hex digits, want 32", ref.PodUID, hex)
		}
		if ref.ContainerID != "" && (!isContainerID(ref.ContainerID) || !strings.Contains(text, ref.ContainerID)) {
			t.Fatalf("container ID %q not hex or not in the input", ref.ContainerID)
		}
		if ref.ContainerID == "" && ref.Runtime != "" {
			t.Fatalf("runtime %q without a container ID", ref.Runtime)
		}
		if !utf8.ValidString(ref.PodUID) {
			t.Fatal("invalid UTF-8")
		}
	})
}
