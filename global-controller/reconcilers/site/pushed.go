package site

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// pushedSecrets remembers, per site, which BMC Secrets the last push left on the site and from
// which version of their global Secret, so that a push where nothing changed (a campaign's
// dispatch, an operation poll) need not list them on the site again: listing them is a LIST of
// the site's Secrets by label, the most expensive read of a push. What it remembers is checked
// against the site (listed) on every heartbeat, when the site's client is rebuilt, when a
// host's Secret or the set of hosts changed, and after a failed push. A restarted controller
// remembers nothing, so its first push of each site lists. It is safe for concurrent use; a
// record is replaced whole and never changed, so a reader may keep what get returned.
type pushedSecrets struct {
	mu sync.Mutex
	m  map[types.NamespacedName]secretRecord
}

// secretRecord is what a push left on a site.
type secretRecord struct {
	// listedAt is when the site's BMC Secrets were last listed.
	listedAt time.Time
	// hosts maps each host whose BMC Secret is on the site to the fingerprint of the global
	// Secret it is a current copy of ("" when it is not current).
	hosts map[string]string
}

// get returns the site's record.
func (p *pushedSecrets) get(site types.NamespacedName) (secretRecord, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.m[site]
	return r, ok
}

// set replaces the site's record.
func (p *pushedSecrets) set(site types.NamespacedName, r secretRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]secretRecord{}
	}
	p.m[site] = r
}

// forget drops the site's record: its next push lists.
func (p *pushedSecrets) forget(site types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, site)
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
