package sshexec

import (
	"context"
	"sync"

	"golang.org/x/crypto/ssh"
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
