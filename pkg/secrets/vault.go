package secrets

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
)

// Vault is a Store over a KV version 2 secrets engine.
type Vault struct {
	kv     *vaultapi.KVv2
	mount  string
	prefix string
}

// NewVault returns a Store keeping secrets in the KV v2 engine mounted at mount (for example
// "secret"), under prefix (for example "edgefleet"; may be empty). The client carries the
// address and the token; it is used as is.
func NewVault(client *vaultapi.Client, mount, prefix string) *Vault {
	return &Vault{kv: client.KVv2(mount), mount: mount, prefix: strings.Trim(prefix, "/")}
}

func (v *Vault) path(name string) string {
	return path.Join(v.prefix, name)
}

// Put writes a new version of the secret.
func (v *Vault) Put(ctx context.Context, name string, data map[string][]byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := validateData(name, data); err != nil {
		return err
	}
	entry := make(map[string]any, len(data))
	for k, b := range data {
		entry[k] = base64.StdEncoding.EncodeToString(b)
	}
	if _, err := v.kv.Put(ctx, v.path(name), entry); err != nil {
		return fmt.Errorf("vault: put secret %s in %s: %w", name, v.mount, err)
	}
	return nil
}

// Get reads the latest version of the secret.
func (v *Vault) Get(ctx context.Context, name string) (map[string][]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	s, err := v.kv.Get(ctx, v.path(name))
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return nil, fmt.Errorf("vault: secret %s in %s: %w", name, v.mount, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("vault: get secret %s in %s: %w", name, v.mount, err)
	}
	data := make(map[string][]byte, len(s.Data))
	for k, raw := range s.Data {
		str, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("vault: secret %s in %s: key %q is a %T, not a base64 string", name, v.mount, k, raw)
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			// The decode error names an offset only, never the content.
			return nil, fmt.Errorf("vault: secret %s in %s: key %q: %w", name, v.mount, k, err)
		}
		data[k] = b
	}
	return data, nil
}

// Delete removes every version of the secret and its metadata.
func (v *Vault) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := v.kv.DeleteMetadata(ctx, v.path(name)); err != nil {
		return fmt.Errorf("vault: delete secret %s in %s: %w", name, v.mount, err)
	}
	return nil
}
