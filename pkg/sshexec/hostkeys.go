package sshexec

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// MemoryHostKeys is a HostKeyStore in memory, for one process's lifetime (tests, tools). An
// agent that must survive restarts keeps its pins where its state lives.
type MemoryHostKeys struct {
	mu   sync.Mutex
	keys map[string]ssh.PublicKey
}

// Get returns the key pinned for host, or nil.
func (m *MemoryHostKeys) Get(_ context.Context, host string) (ssh.PublicKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[host], nil
}

// Pin records key for host.
func (m *MemoryHostKeys) Pin(_ context.Context, host string, key ssh.PublicKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string]ssh.PublicKey{}
	}
	m.keys[host] = key
	return nil
}

// Forget removes host's pin, after the host was reprovisioned on purpose.
func (m *MemoryHostKeys) Forget(host string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, host)
}

// KeyValueStore is where StoredHostKeys keeps pins: named entries of bytes, as in the secret
// store (every secrets.Store is one). Get returns an error wrapping secrets.ErrNotFound when the
// entry does not exist.
type KeyValueStore interface {
	Get(ctx context.Context, name string) (map[string][]byte, error)
	Put(ctx context.Context, name string, data map[string][]byte) error
}

// hostKeyField is the entry's field holding the pinned key as an authorized_keys line.
const hostKeyField = "host-key"

// StoredHostKeys is a HostKeyStore kept in a KeyValueStore, so pins outlive the agent: one entry
// per host, named Prefix + host.
type StoredHostKeys struct {
	Store  KeyValueStore
	Prefix string
}

// Get returns the key pinned for host, or nil when none is.
func (s *StoredHostKeys) Get(ctx context.Context, host string) (ssh.PublicKey, error) {
	data, err := s.Store.Get(ctx, s.Prefix+host)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pinned host key of %s: %w", host, err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(data[hostKeyField])
	if err != nil {
		return nil, fmt.Errorf("pinned host key of %s (entry %s%s): %w", host, s.Prefix, host, err)
	}
	return key, nil
}

// Pin records key for host.
func (s *StoredHostKeys) Pin(ctx context.Context, host string, key ssh.PublicKey) error {
	if err := s.Store.Put(ctx, s.Prefix+host, map[string][]byte{hostKeyField: ssh.MarshalAuthorizedKey(key)}); err != nil {
		return fmt.Errorf("pin host key of %s: %w", host, err)
	}
	return nil
}
