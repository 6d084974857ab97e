package activity

import (
	"fmt"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Identity says how far the exporter could check who a connected process is. The socket is
// open to every workload of the node, so what a hello says is a claim: the receiver asks the
// kernel who is at the other end (SO_PEERCRED) and reads the process's /proc entry itself
// (activity/receiver, docs/security.md).
type Identity uint8

const (
	// IdentityUnchecked: the process did not come through the socket (a recording replays
	// what was recorded; tests). Taken as given.
	IdentityUnchecked Identity = iota
	// IdentityVerified: the kernel named the process and its /proc entry agrees with the
	// hello. PID, StartTime and Cgroup are the kernel's, not the hello's.
	IdentityVerified
	// IdentityClaimed: the kernel could not name the process (it runs in a PID namespace the
	// exporter does not see, or its /proc entry could not be read): only its hello says who
	// it is. Its cgroup is not used, and its pod labels only with WithTrustHelloPods.
	IdentityClaimed
)

var identityNames = [...]string{IdentityUnchecked: "", IdentityVerified: "verified", IdentityClaimed: "claimed"}

func (i Identity) String() string {
	if int(i) < len(identityNames) {
		return identityNames[i]
	}
	return fmt.Sprintf("Identity(%d)", uint8(i))
}

// MarshalText writes the identity as recordings keep it ("verified", "claimed").
func (i Identity) MarshalText() ([]byte, error) {
	if int(i) >= len(identityNames) {
		return nil, fmt.Errorf("unknown identity %d", uint8(i))
	}
	return []byte(identityNames[i]), nil
}

// UnmarshalText reads what MarshalText wrote.
func (i *Identity) UnmarshalText(b []byte) error {
	for v, name := range identityNames {
		if string(b) == name {
			*i = Identity(v)
			return nil
		}
	}
	return fmt.Errorf("unknown identity %q", b)
}

var (
	identitiesDesc = &snapshot.Desc{
		Name: "cupti_activity_identities_total", Kind: snapshot.KindCounter,
		Help:     "Traced-process connections by how their identity was checked at hello (verified: the kernel named the process and its /proc entry agreed; claimed: only the hello says who it is; refused: the kernel contradicted the hello, the connection was closed).",
		OTelName: "cupti.activity.identities", OTelUnit: "{connection}", LabelNames: []string{"identity"},
	}
	refusedClaimsDesc = &snapshot.Desc{
		Name: "cupti_activity_refused_claims_total", Kind: snapshot.KindCounter,
		Help:     "Claims of hellos the exporter refused, by claim (pid, start_time, pod, namespace, container, device_uuid, executable, cgroup) and reason (invalid: not valid text of its kind; contradicted: the kernel says otherwise).",
		OTelName: "cupti.activity.refused_claims", OTelUnit: "{claim}", LabelNames: []string{"claim", "reason"},
	}
)

// Identity states counted in cupti_activity_identities_total.
var identityStates = []string{"verified", "claimed", "refused"}

// Reasons of cupti_activity_refused_claims_total.
const (
	ClaimInvalid      = "invalid"
	ClaimContradicted = "contradicted"
)

// IdentityRefused counts a connection closed because the kernel contradicted its hello's
// claim (pid or start_time).
func (a *Aggregator) IdentityRefused(claim string) {
	a.mu.Lock()
	a.identities["refused"]++
	a.refusedClaims[[2]string{claim, ClaimContradicted}]++
	a.mu.Unlock()
	a.gen.Add(1)
}

// ClaimRefused counts a claim of a hello the exporter did not take, by reason (ClaimInvalid,
// ClaimContradicted); the connection goes on without it.
func (a *Aggregator) ClaimRefused(claim, reason string) {
	a.mu.Lock()
	a.refusedClaims[[2]string{claim, reason}]++
	a.mu.Unlock()
	a.gen.Add(1)
}

// identityFamilies appends cupti_activity_identities_total and
// cupti_activity_refused_claims_total.
func (a *Aggregator) identityFamilies(fs []snapshot.Family) []snapshot.Family {
	ids := snapshot.Family{Desc: identitiesDesc}
	for _, s := range identityStates {
		ids.Samples = append(ids.Samples, a.counter(float64(a.identities[s]), s))
	}
	claims := snapshot.Family{Desc: refusedClaimsDesc}
	for k, v := range a.refusedClaims {
		claims.Samples = append(claims.Samples, a.counter(float64(v), k[0], k[1]))
	}
	return append(fs, ids, sorted(claims))
}
