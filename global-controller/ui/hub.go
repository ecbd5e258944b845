package ui

import (
	"context"
	"fmt"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// Kinds a Change is about.
const (
	KindSite     = "Site"
	KindHost     = "Host"
	KindCampaign = "Campaign"
	KindRelease  = "Release"
)

// Change says that an object the pages show was added, changed or deleted.
type Change struct {
	// Kind is KindSite, KindHost, KindCampaign or KindRelease.
	Kind            string
	Namespace, Name string
	// Site is the Site a Host belongs to (empty for other kinds).
	Site string
}

// Hub fans the informers' events out to the live pages. Each subscription holds at most one
// pending notification: a page that is behind re-renders once from the cache, however many
// changes it missed, so a slow stream never buffers more than that.
type Hub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewHub returns a Hub with no subscriptions.
func NewHub() *Hub { return &Hub{subs: map[*Subscription]struct{}{}} }

// Subscription receives a value on C after changes its filter matched.
type Subscription struct {
	// C has a value when something changed since it was last read.
	C     <-chan struct{}
	c     chan struct{}
	match func(Change) bool
	hub   *Hub
}

// Subscribe returns a subscription to the changes match accepts. Close it when done.
func (h *Hub) Subscribe(match func(Change) bool) *Subscription {
	c := make(chan struct{}, 1)
	s := &Subscription{C: c, c: c, match: match, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
}

// Publish notifies the subscriptions that match ch, without blocking.
func (h *Hub) Publish(ch Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.match(ch) {
			continue
		}
		select {
		case s.c <- struct{}{}:
		default: // a notification is pending already
		}
	}
}

// Informers gives the informers of kinds (the manager's cache).
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Watch feeds the hub from the informers of Sites, Hosts, Campaigns and Releases, what the pages show:
// every add, update and delete is published.
func (h *Hub) Watch(ctx context.Context, informers Informers) error {
	for _, w := range []struct {
		obj    client.Object
		change func(obj any) (Change, bool)
	}{
		{&fleetv1.Site{}, objectChange(KindSite)},
		{&fleetv1.Campaign{}, objectChange(KindCampaign)},
		{&fleetv1.Release{}, objectChange(KindRelease)},
		{&fleetv1.Host{}, func(obj any) (Change, bool) {
			ch, ok := objectChange(KindHost)(obj)
			if h, isHost := unwrapTombstone(obj).(*fleetv1.Host); ok && isHost {
				ch.Site = h.Spec.SiteRef.Name
			}
			return ch, ok
		}},
	} {
		inf, err := informers.GetInformer(ctx, w.obj)
		if err != nil {
			return fmt.Errorf("informer of %T for the web UI: %w", w.obj, err)
		}
		publish := func(obj any) {
			if ch, ok := w.change(obj); ok {
				h.Publish(ch)
			}
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { publish(obj) },
			UpdateFunc: func(_, obj any) { publish(obj) },
			DeleteFunc: publish,
		})
		if err != nil {
			return fmt.Errorf("watch %T for the web UI: %w", w.obj, err)
		}
	}
	return nil
}

// objectChange returns the Change of an informer's object (or deletion tombstone) of kind.
func objectChange(kind string) func(obj any) (Change, bool) {
	return func(obj any) (Change, bool) {
		m, err := apimeta.Accessor(unwrapTombstone(obj))
		if err != nil {
			return Change{}, false
		}
		return Change{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}, true
	}
}

func unwrapTombstone(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
