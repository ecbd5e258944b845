package site

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// perSite is what the reconciler remembers of each site between reconciles (lost on restart).
// It is safe for concurrent use; values are replaced whole, so a reader may keep what get
// returned.
type perSite[V any] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]V
}

// get returns the site's value and whether there is one.
func (p *perSite[V]) get(site types.NamespacedName) (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[site]
	return v, ok
}

// set replaces the site's value.
func (p *perSite[V]) set(site types.NamespacedName, v V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]V{}
	}
	p.m[site] = v
}

// forget drops the site's value.
func (p *perSite[V]) forget(site types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, site)
}
