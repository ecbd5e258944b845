// Package secretsfake is an in-memory fake of secrets.Store for unit tests. The real stores
// (Vault, Kubernetes Secrets) are tested against a real Vault and API server in pkg/secrets.
package secretsfake

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// Store keeps secrets in memory; the zero value is empty and ready.
type Store struct {
	mu   sync.Mutex
	data map[string]map[string][]byte
}

var _ secrets.Store = (*Store)(nil)

// Get returns a copy of the secret name, or an error wrapping secrets.ErrNotFound.
func (s *Store) Get(_ context.Context, name string) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.data[name]
	if !ok {
		return nil, fmt.Errorf("fake secret store: %s: %w", name, secrets.ErrNotFound)
	}
	return clone(d), nil
}

// Put stores a copy of data as the secret name.
func (s *Store) Put(_ context.Context, name string, data map[string][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		s.data = map[string]map[string][]byte{}
	}
	s.data[name] = clone(data)
	return nil
}

// Delete removes the secret name; a missing one is no error.
func (s *Store) Delete(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, name)
	return nil
}

func clone(d map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(d))
	for k, v := range d {
		out[k] = bytes.Clone(v)
	}
	return out
}
