package receiver

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// maxUUIDLen bounds a device UUID: "GPU-" and 36 characters, or a MIG device's
// "MIG-GPU-<uuid>/<gi>/<ci>" of older drivers.
const maxUUIDLen = 64

// sanitizeHello drops, once per connection, the text of a hello that could not be a label
// value or is not what it claims to be: pod, namespace and container names that Kubernetes
// would not accept (invalid UTF-8 and control characters among them: one such label stopped
// every OTLP push), device UUIDs that are not UUID text (that device's records are then
// refused as unknown_device), and invalid UTF-8 (replaced) and control characters (removed:
// ESC, CR, NUL... which terminals, dashboards and log pipelines interpret) in the executable
// and cgroup. It returns the claims it refused.
func sanitizeHello(p *record.Process) (refused []string) {
	check := func(claim string, v *string, valid func(string) []string) {
		if *v != "" && len(valid(*v)) > 0 {
			*v = ""
			refused = append(refused, claim)
		}
	}
	check("pod", &p.Pod, validation.IsDNS1123Subdomain)
	check("namespace", &p.Namespace, validation.IsDNS1123Label)
	check("container", &p.Container, validation.IsDNS1123Label)
	badUUID := false
	for i, u := range p.DeviceUUIDs {
		if u != "" && !validUUID(u) {
			p.DeviceUUIDs[i] = activity.InvalidDeviceUUID
			badUUID = true
		}
	}
	if badUUID {
		refused = append(refused, "device_uuid")
	}
	for _, f := range []struct {
		claim string
		v     *string
	}{{"executable", &p.Executable}, {"cgroup", &p.Cgroup}} {
		if !utf8.ValidString(*f.v) || strings.ContainsFunc(*f.v, unicode.IsControl) {
			*f.v = strings.Map(dropControl, strings.ToValidUTF8(*f.v, "\uFFFD"))
			refused = append(refused, f.claim)
		}
	}
	return refused
}

// dropControl is a strings.Map function that removes control characters.
func dropControl(r rune) rune {
	if unicode.IsControl(r) {
		return -1
	}
	return r
}

// validUUID accepts what CUDA and NVML print for a device: letters, digits, '-', and '/'
// (MIG devices), at most 64 bytes.
func validUUID(u string) bool {
	if len(u) > maxUUIDLen {
		return false
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}
