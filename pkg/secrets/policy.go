package secrets

import (
	"fmt"
	"path"
	"strings"
)

// VaultPolicy is the Vault policy of a component keeping its secrets with NewVault(client,
// mount, prefix): what the Store does under prefix in the KV v2 engine at mount — write and
// read the entries (<mount>/data/<prefix>/*), delete them with their versions
// (<mount>/metadata/<prefix>/*) — and nothing else, no listing, nothing outside prefix.
func VaultPolicy(mount, prefix string) string {
	under := func(kind string) string {
		return path.Join(strings.Trim(mount, "/"), kind, strings.Trim(prefix, "/")) + "/*"
	}
	return fmt.Sprintf(`path %q { capabilities = ["create", "read", "update"] }
path %q { capabilities = ["delete"] }
`, under("data"), under("metadata"))
}
