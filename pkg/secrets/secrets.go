package secrets

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Store keeps named secrets. Put replaces the whole secret; Get of a name never put (or
// deleted) returns an error wrapping ErrNotFound; Delete of a missing name succeeds, so every
// call is safe to repeat.
type Store interface {
	Put(ctx context.Context, name string, data map[string][]byte) error
	Get(ctx context.Context, name string) (map[string][]byte, error)
	Delete(ctx context.Context, name string) error
}

// ErrNotFound is wrapped by the errors of Get for a secret that does not exist.
var ErrNotFound = errors.New("secret not found")

// ValidateName checks that name can name a secret in every backend: a DNS-1123 subdomain.
func ValidateName(name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("invalid secret name %q: %s", name, msgs[0])
	}
	return nil
}

// validateData checks that a secret has at least one key and that every key is usable as a
// Kubernetes Secret key (letters, digits, '-', '_', '.') — so that a secret can move between
// backends unchanged.
func validateData(name string, data map[string][]byte) error {
	if len(data) == 0 {
		return fmt.Errorf("secret %s: no data", name)
	}
	for k := range data {
		if msgs := validation.IsConfigMapKey(k); len(msgs) > 0 {
			return fmt.Errorf("secret %s: invalid key %q: %s", name, k, msgs[0])
		}
	}
	return nil
}
