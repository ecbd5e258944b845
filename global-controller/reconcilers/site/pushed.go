package site

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// secretRecord is what a push left on a site: which BMC Secrets and from which version of their
// global Secret, so that a push where nothing changed (a campaign's dispatch, an operation poll)
// need not list them on the site again: listing them is a LIST of the site's Secrets by label,
// the most expensive read of a push. The record is checked against the site (listed) on every
// heartbeat, when the site's client is rebuilt, when a host's Secret or the set of hosts
// changed, and after a failed push. A restarted controller remembers nothing, so its first push
// of each site lists. A record is never changed once made.
type secretRecord struct {
	// listedAt is when the site's BMC Secrets were last listed.
	listedAt time.Time
	// hosts maps each host whose BMC Secret is on the site to the fingerprint of the global
	// Secret it is a current copy of ("" when it is not current).
	hosts map[string]string
}

// recordOf returns what the listed Secrets of cluster hold, by host.
func recordOf(cluster string, secrets map[string]*corev1.Secret, listedAt time.Time) secretRecord {
	hosts := make(map[string]string, len(secrets))
	for host, s := range secrets {
		fp := s.Annotations[sitev1.SourceVersionAnnotation]
		if !bmcSecretCurrent(s, cluster, host, fp) {
			fp = ""
		}
		hosts[host] = fp
	}
	return secretRecord{listedAt: listedAt, hosts: hosts}
}
