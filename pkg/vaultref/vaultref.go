// Package vaultref reads and writes the Vault entries that objects of the global cluster
// reference instead of Secrets: a Host's BMC credentials (spec.bmc.credentialsVaultRef) and a
// Site's kubeconfig (spec.kubeconfigVaultRef). The entries live in a KV version 2 engine under
// <prefix>/<namespace of the object>/<path>, so an object reaches only its own namespace's
// entries, as a Secret reference reaches only its namespace's Secrets.
package vaultref

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Entry is what an entry holds at one version.
type Entry struct {
	// Data are the entry's keys and their string values.
	Data map[string]string
	// Version is the KV version 2 version read or written: it changes with every write.
	Version int
}

// Store reads and writes referenced entries. Errors name the entry (Where), never a value.
type Store interface {
	// Read returns the entry's latest version; an error wrapping ErrNotFound when there is none
	// (never written, or its latest version deleted).
	Read(ctx context.Context, namespace, path string) (Entry, error)
	// Write stores data as the entry's new version.
	Write(ctx context.Context, namespace, path string, data map[string]string) (Entry, error)
	// Where names the entry for people: the mount and the full path.
	Where(namespace, path string) string
}

// ErrNotFound is wrapped by Read's error for an entry that does not exist.
var ErrNotFound = errors.New("no such Vault entry")

// pathPattern is the pattern of a reference's path (the CRDs' pattern too): segments that do not
// start with '.', so no segment is "." or "..".
var pathPattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`)

// ValidatePath checks a reference's path, as the CRDs do at admission.
func ValidatePath(p string) error {
	if len(p) == 0 || len(p) > 512 || !pathPattern.MatchString(p) {
		return fmt.Errorf("invalid Vault path %q: want segments of letters, digits, '.', '_' and '-', not starting with '.', separated by '/', at most 512 characters", p)
	}
	return nil
}

// Vault is the Store over a KV version 2 engine.
type Vault struct {
	kv     *vaultapi.KVv2
	mount  string
	prefix string
}

// New returns the Store over the KV version 2 engine mounted at mount (for example "secret"),
// under prefix (for example "edgefleet/global"). The client carries the address, the token and
// the bound of every call; it is used as it is.
func New(client *vaultapi.Client, mount, prefix string) *Vault {
	return &Vault{kv: client.KVv2(mount), mount: strings.Trim(mount, "/"), prefix: strings.Trim(prefix, "/")}
}

func (v *Vault) full(namespace, p string) (string, error) {
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", fmt.Errorf("invalid namespace %q: %s", namespace, msgs[0])
	}
	if err := ValidatePath(p); err != nil {
		return "", err
	}
	return path.Join(v.prefix, namespace, p), nil
}

// Where names the entry: "<mount>/<prefix>/<namespace>/<path>", as `vault kv get` takes it.
func (v *Vault) Where(namespace, p string) string {
	return path.Join(v.mount, v.prefix, namespace, p)
}

// Read returns the entry's latest version. A value that is not a string is refused, naming its
// key.
func (v *Vault) Read(ctx context.Context, namespace, p string) (Entry, error) {
	full, err := v.full(namespace, p)
	if err != nil {
		return Entry{}, err
	}
	s, err := v.kv.Get(ctx, full)
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return Entry{}, fmt.Errorf("%s: %w", v.Where(namespace, p), ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read Vault entry %s: %w", v.Where(namespace, p), err)
	}
	if s.Data == nil {
		return Entry{}, fmt.Errorf("%s (its latest version is deleted): %w", v.Where(namespace, p), ErrNotFound)
	}
	e := Entry{Data: make(map[string]string, len(s.Data))}
	if s.VersionMetadata != nil {
		e.Version = s.VersionMetadata.Version
	}
	for k, raw := range s.Data {
		str, ok := raw.(string)
		if !ok {
			return Entry{}, fmt.Errorf("Vault entry %s: key %q holds a %T, not a string", v.Where(namespace, p), k, raw)
		}
		e.Data[k] = str
	}
	return e, nil
}

// Write stores data as the entry's new version.
func (v *Vault) Write(ctx context.Context, namespace, p string, data map[string]string) (Entry, error) {
	full, err := v.full(namespace, p)
	if err != nil {
		return Entry{}, err
	}
	entry := make(map[string]any, len(data))
	for k, s := range data {
		entry[k] = s
	}
	s, err := v.kv.Put(ctx, full, entry)
	if err != nil {
		return Entry{}, fmt.Errorf("write Vault entry %s: %w", v.Where(namespace, p), err)
	}
	e := Entry{Data: data}
	if s.VersionMetadata != nil {
		e.Version = s.VersionMetadata.Version
	}
	return e, nil
}

// Policy is the Vault policy of a global controller using New(client, mount, prefix): read the
// referenced entries and write the kubeconfigs enrollment stores (create, read, update under
// <mount>/data/<prefix>/), and nothing else — no listing, no deleting, no other path.
func Policy(mount, prefix string) string {
	return fmt.Sprintf("path %q { capabilities = [\"create\", \"read\", \"update\"] }\n",
		path.Join(strings.Trim(mount, "/"), "data", strings.Trim(prefix, "/"))+"/*")
}
