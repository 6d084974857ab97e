package activity

import (
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var (
	identitiesDesc    = descs.Counter("cupti_activity_identities_total", "", "cupti.activity.identities", "{connection}", "Traced-process connections by how their identity was checked at hello (verified: the kernel named the process and its /proc entry agreed; claimed: only the hello says who it is; refused: the kernel contradicted the hello, the connection was closed).", "identity")
	refusedClaimsDesc = descs.Counter("cupti_activity_refused_claims_total", "", "cupti.activity.refused_claims", "{claim}", "Claims of hellos the exporter refused, by claim (pid, start_time, pod, namespace, container, device_uuid, executable, cgroup) and reason (invalid: not valid text of its kind; contradicted: the kernel says otherwise).", "claim", "reason")
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
