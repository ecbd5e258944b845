package vaultref

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/utils/clock"
)

// Breaker is a Store that stops asking Vault for a while once Vault did not answer: for Cooldown
// after a call failed for want of Vault (no connection, a deadline met, a 5xx such as a sealed
// Vault), every call fails at once with that error instead of waiting out its own deadline, so
// that an outage costs the controller one deadline per Cooldown, not one per host and site. The
// first call after Cooldown asks Vault again. An answer of Vault, refusal and absence included
// (403, ErrNotFound), is passed on and trips nothing: it is about one entry, not about Vault.
type Breaker struct {
	Store    Store
	Cooldown time.Duration
	Clock    clock.PassiveClock

	mu    sync.Mutex
	until time.Time
	last  error
}

// NewBreaker returns a Breaker over store.
func NewBreaker(store Store, cooldown time.Duration) *Breaker {
	return &Breaker{Store: store, Cooldown: cooldown, Clock: clock.RealClock{}}
}

// Read reads through the Store unless Vault failed to answer within the last Cooldown.
func (b *Breaker) Read(ctx context.Context, namespace, path string) (Entry, error) {
	if err := b.open(namespace, path); err != nil {
		return Entry{}, err
	}
	e, err := b.Store.Read(ctx, namespace, path)
	b.record(err)
	return e, err
}

// Write writes through the Store unless Vault failed to answer within the last Cooldown.
func (b *Breaker) Write(ctx context.Context, namespace, path string, data map[string]string) (Entry, error) {
	if err := b.open(namespace, path); err != nil {
		return Entry{}, err
	}
	e, err := b.Store.Write(ctx, namespace, path, data)
	b.record(err)
	return e, err
}

// Where names the entry.
func (b *Breaker) Where(namespace, path string) string { return b.Store.Where(namespace, path) }

func (b *Breaker) open(namespace, path string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last != nil && b.Clock.Now().Before(b.until) {
		return fmt.Errorf("%s not asked: Vault did not answer %s ago, asked again after %s: %w",
			b.Store.Where(namespace, path), b.Cooldown-b.until.Sub(b.Clock.Now()).Round(time.Second), b.Cooldown, b.last)
	}
	return nil
}

func (b *Breaker) record(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !unanswered(err) {
		b.last = nil
		return
	}
	b.last, b.until = err, b.Clock.Now().Add(b.Cooldown)
}

// unanswered reports whether err means that Vault did not answer (no connection, a deadline
// met) or could not (a 5xx), as opposed to its answer about an entry (not found, 403, 400).
func unanswered(err error) bool {
	if err == nil {
		return false
	}
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= 500
	}
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded)
}
