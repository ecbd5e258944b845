package site

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// inFlight is the set of sites with an operation that has no verdict yet: what the operation
// polls are spread over. It is safe for concurrent use.
type inFlight struct {
	mu sync.Mutex
	m  map[types.NamespacedName]struct{}
}

// set records whether the site has an operation in flight.
func (f *inFlight) set(site types.NamespacedName, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !running {
		delete(f.m, site)
		return
	}
	if f.m == nil {
		f.m = map[types.NamespacedName]struct{}{}
	}
	f.m[site] = struct{}{}
}

// count is the number of sites with an operation in flight.
func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// pollInterval is how long a site with an operation in flight waits for its next poll:
// OperationPollInterval, or longer when the sites in flight would otherwise be polled more than
// OperationPollRate times a second all together. Polls beyond what the API servers can serve
// would only queue up in front of the dispatches and the sites' answers (a campaign of 10,000
// sites has 2,000 in flight at a 20 % window).
func (r *Reconciler) pollInterval() time.Duration {
	d := r.OperationPollInterval
	if r.OperationPollRate > 0 {
		d = max(d, time.Duration(float64(r.inFlight.count())/r.OperationPollRate*float64(time.Second)))
	}
	return d
}
