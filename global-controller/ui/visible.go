package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// Which sites a user sees.
const (
	// siteGrantTTL is how long a user's per-site decisions are kept: a binding granted or
	// revoked shows within this time, as with every other review of the UI.
	siteGrantTTL = 10 * time.Second
	// maxGrantUsers bounds the users whose per-site decisions are kept (each holds at most one
	// entry per site in the cache).
	maxGrantUsers = 64
	// siteCheckParallelism bounds the SubjectAccessReviews one page asks at once.
	siteCheckParallelism = 8
)

// siteGrants are one user's per-site answers to "get sites NAME".
type siteGrants struct {
	mu      sync.Mutex
	allowed map[types.NamespacedName]bool
}

func (g *siteGrants) lookup(k types.NamespacedName) (allowed, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	allowed, known = g.allowed[k]
	return allowed, known
}

func (g *siteGrants) set(k types.NamespacedName, allowed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allowed[k] = allowed
}

// grantsCache keeps siteGrants per user (kubeauth.User.Key) for siteGrantTTL.
type grantsCache struct {
	mu    sync.Mutex
	users *cache.LRUExpireCache
}

func newGrantsCache(clk cache.Clock) *grantsCache {
	return &grantsCache{users: cache.NewLRUExpireCacheWithClock(maxGrantUsers, clk)}
}

// of returns u's grants, fresh ones when none are kept or they expired.
func (c *grantsCache) of(u kubeauth.User) *siteGrants {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := u.Key()
	if g, ok := c.users.Get(key); ok {
		return g.(*siteGrants)
	}
	g := &siteGrants{allowed: map[types.NamespacedName]bool{}}
	c.users.Add(key, g, siteGrantTTL)
	return g
}

// listVisibleSites lists the Sites of namespace ns ("" for all) from the cache, keeping only
// those u may get (visibleSites). When u sees none and may not list sites in ns either, the
// answer is a 403 naming that access, as before there were per-site grants.
func (s *Server) listVisibleSites(ctx context.Context, req *request, ns string) ([]fleetv1.Site, error) {
	u := req.User
	sites := &fleetv1.SiteList{}
	if err := s.cfg.Cache.List(ctx, sites, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	visible, err := s.visibleSites(ctx, u, req.Token, ns, sites.Items)
	if err != nil {
		return nil, err
	}
	if len(visible) == 0 {
		if err := s.authorize(ctx, u, fleetAccess("list", "sites", ns, "")); err != nil {
			return nil, err
		}
	}
	return visible, nil
}

// visibleSites keeps of sites, all in namespace ns ("" for all namespaces), those u may get,
// reusing sites' backing array. It asks the widest question first: get sites in ns (one
// review, cached); then, for all namespaces, get sites in each namespace present; and only for
// the sites of namespaces where both were denied — a site operator's RoleBinding narrowed with
// resourceNames — get sites NAME, one review per site, at most siteCheckParallelism at once,
// kept per user for siteGrantTTL. With Config.Rules, the user's own rules of such a namespace
// (one SelfSubjectRulesReview with token) first say which sites they name at all: only those
// are reviewed, the others are not visible; when the rules are incomplete or cannot be read,
// every site is reviewed.
func (s *Server) visibleSites(ctx context.Context, u kubeauth.User, token, ns string, sites []fleetv1.Site) ([]fleetv1.Site, error) {
	mayGetAll := func(ns string) (bool, error) {
		ok, _, err := s.cfg.Auth.AuthorizeAccess(ctx, u, fleetAccess("get", "sites", ns, ""))
		if err != nil {
			return false, fmt.Errorf("check whether %s may get sites in %q: %w", u.Name, ns, err)
		}
		return ok, nil
	}
	all, err := mayGetAll(ns)
	if err != nil || all {
		return sites, err
	}
	wholeNamespace := map[string]bool{}
	if ns == "" {
		for i := range sites {
			n := sites[i].Namespace
			if _, asked := wholeNamespace[n]; asked {
				continue
			}
			if wholeNamespace[n], err = mayGetAll(n); err != nil {
				return nil, err
			}
		}
	}
	grants := s.grants.of(u)
	named := s.namedSites(ctx, u, token, ns, wholeNamespace)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(siteCheckParallelism)
	for i := range sites {
		k := types.NamespacedName{Namespace: sites[i].Namespace, Name: sites[i].Name}
		if _, known := grants.lookup(k); known || wholeNamespace[k.Namespace] {
			continue
		}
		if names, hinted := named[k.Namespace]; hinted && !names[k.Name] {
			grants.set(k, false)
			continue
		}
		g.Go(func() error {
			ok, _, err := s.cfg.Auth.AuthorizeAccess(gctx, u, fleetAccess("get", "sites", k.Namespace, k.Name))
			if err != nil {
				return fmt.Errorf("check whether %s may get site %s: %w", u.Name, k, err)
			}
			grants.set(k, ok)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	visible := sites[:0]
	for i := range sites {
		ok, _ := grants.lookup(types.NamespacedName{Namespace: sites[i].Namespace, Name: sites[i].Name})
		if ok || wholeNamespace[sites[i].Namespace] {
			visible = append(visible, sites[i])
		}
	}
	return visible, nil
}

// namedSites asks Config.Rules, for namespace ns or (ns "") each namespace of wholeNamespace
// that was denied, which sites the user's rules name for get; a namespace is left out (every
// site of it reviewed) when the rules grant every site, are incomplete or cannot be read.
func (s *Server) namedSites(ctx context.Context, u kubeauth.User, token, ns string, wholeNamespace map[string]bool) map[string]map[string]bool {
	if s.cfg.Rules == nil || token == "" {
		return nil
	}
	namespaces := []string{ns}
	if ns == "" {
		namespaces = namespaces[:0]
		for n, all := range wholeNamespace {
			if !all {
				namespaces = append(namespaces, n)
			}
		}
	}
	named := map[string]map[string]bool{}
	for _, n := range namespaces {
		names, all, complete, err := s.cfg.Rules.GettableSites(ctx, token, n)
		if err != nil {
			s.cfg.Log.Error(err, "read a user's rules; reviewing every site", "user", u.Name, "namespace", n)
			continue
		}
		if all || !complete {
			continue
		}
		set := make(map[string]bool, len(names))
		for _, name := range names {
			set[name] = true
		}
		named[n] = set
	}
	return named
}
