package campaign

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a dispatch waits to show in the cache before it is no longer
// assumed: by then the cache has it, or someone else overwrote it.
const expectationTTL = time.Minute

// expectations remembers the dispatches this controller wrote that its informer cache does not
// show yet, so that a reconcile right after a dispatch counts those sites as dispatched (and
// never exceeds the window) instead of reading the stale cache. A restarted controller starts
// with none and needs none: its cache is filled by a fresh LIST, which shows every dispatch
// written before.
type expectations struct {
	mu sync.Mutex
	m  map[types.UID]map[string]expected
}

type expected struct {
	id   string
	at   time.Time
	sent sentFor
}

func newExpectations() *expectations {
	return &expectations{m: map[types.UID]map[string]expected{}}
}

// expect records that site was dispatched operation id, for the campaign spec sent, at now.
func (e *expectations) expect(campaign types.UID, site, id string, sent sentFor, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m[campaign] == nil {
		e.m[campaign] = map[string]expected{}
	}
	e.m[campaign][site] = expected{id: id, at: now, sent: sent}
}

// sent returns, by site, what this controller dispatched for the campaign that the cache may
// not show yet (records older than expectationTTL left out).
func (e *expectations) sent(campaign types.UID, now time.Time) map[string]sentFor {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]sentFor, len(e.m[campaign]))
	for site, x := range e.m[campaign] {
		if now.Sub(x.at) <= expectationTTL {
			out[site] = x.sent
		}
	}
	return out
}

// pending returns the operation ID site was dispatched that the cache does not show yet: seen
// is the ID the cache shows (empty: none). A dispatch the cache shows, or older than
// expectationTTL, is forgotten.
func (e *expectations) pending(campaign types.UID, site, seen string, now time.Time) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[campaign][site]
	if !ok {
		return "", false
	}
	if x.id == seen || now.Sub(x.at) > expectationTTL {
		delete(e.m[campaign], site)
		return "", false
	}
	return x.id, true
}

// forget drops the campaign's records.
func (e *expectations) forget(campaign types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, campaign)
}
