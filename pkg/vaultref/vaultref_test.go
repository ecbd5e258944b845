package vaultref_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/edgefleet/edgefleet/pkg/vaultref"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestVault runs the Store against a real Vault dev server, with a token of Policy alone.
func TestVault(t *testing.T) {
	v := testvault.StartVault(t)
	ctx := t.Context()
	if err := v.Client.Sys().PutPolicyWithContext(ctx, "edgefleet-global", vaultref.Policy("secret", "edgefleet/global")); err != nil {
		t.Fatal(err)
	}
	tok, err := v.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"edgefleet-global"}, NoDefaultPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := v.Client.Clone()
	if err != nil {
		t.Fatal(err)
	}
	client.SetToken(tok.Auth.ClientToken)
	store := vaultref.New(client, "secret", "/edgefleet/global/")

	if got, want := store.Where("fleet", "bmc/host-1"), "secret/edgefleet/global/fleet/bmc/host-1"; got != want {
		t.Errorf("Where = %q, want %q", got, want)
	}

	t.Run("write then read, versions counting up", func(t *testing.T) {
		first, err := store.Write(ctx, "fleet", "bmc/host-1", map[string]string{"username": "admin", "password": "first-pw"})
		if err != nil {
			t.Fatal(err)
		}
		second, err := store.Write(ctx, "fleet", "bmc/host-1", map[string]string{"username": "admin", "password": "second-pw"})
		if err != nil {
			t.Fatal(err)
		}
		if first.Version != 1 || second.Version != 2 {
			t.Errorf("versions %d, %d; want 1, 2", first.Version, second.Version)
		}
		got, err := store.Read(ctx, "fleet", "bmc/host-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 2 || got.Data["password"] != "second-pw" || got.Data["username"] != "admin" || len(got.Data) != 2 {
			t.Errorf("read %d %v, want version 2 with the second password", got.Version, keys(got.Data))
		}
		// What the operator sees with `vault kv get`: the value as written, not encoded.
		raw, err := v.Client.KVv2("secret").Get(ctx, "edgefleet/global/fleet/bmc/host-1")
		if err != nil || raw.Data["password"] != "second-pw" {
			t.Errorf("vault kv get: %v, %v", err, err == nil && raw.Data["password"] == "second-pw")
		}
	})

	t.Run("a namespace reaches its own entries only", func(t *testing.T) {
		_, err := store.Read(ctx, "other", "bmc/host-1")
		if !errors.Is(err, vaultref.ErrNotFound) || !strings.Contains(err.Error(), "secret/edgefleet/global/other/bmc/host-1") {
			t.Errorf("read of another namespace's path: %v, want not found naming the path", err)
		}
	})

	t.Run("a deleted latest version is not found", func(t *testing.T) {
		if _, err := store.Write(ctx, "fleet", "gone", map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
		if err := v.Client.KVv2("secret").Delete(ctx, "edgefleet/global/fleet/gone"); err != nil {
			t.Fatal(err)
		}
		_, err := store.Read(ctx, "fleet", "gone")
		if !errors.Is(err, vaultref.ErrNotFound) || !strings.Contains(err.Error(), "deleted") {
			t.Errorf("read of a deleted entry: %v", err)
		}
	})

	t.Run("a value that is not a string is refused, naming its key and not its value", func(t *testing.T) {
		if _, err := v.Client.KVv2("secret").Put(ctx, "edgefleet/global/fleet/odd", map[string]any{"password": map[string]any{"nested": "hidden-value"}}); err != nil {
			t.Fatal(err)
		}
		_, err := store.Read(ctx, "fleet", "odd")
		if err == nil || !strings.Contains(err.Error(), `key "password"`) || strings.Contains(err.Error(), "hidden-value") {
			t.Errorf("read of a non-string value: %v", err)
		}
	})

	t.Run("bad paths and namespaces are refused before Vault is asked", func(t *testing.T) {
		for _, c := range []struct{ ns, path string }{
			{"fleet", "../edgefleet/bpa/x"}, {"fleet", "a/../../b"}, {"fleet", "/abs"}, {"fleet", "a//b"},
			{"fleet", ""}, {"fleet", "a/"}, {"fleet", strings.Repeat("a", 513)}, {"Fleet", "a"}, {"", "a"}, {"a/b", "c"},
		} {
			if _, err := store.Read(ctx, c.ns, c.path); err == nil || errors.Is(err, vaultref.ErrNotFound) {
				t.Errorf("Read(%q, %q) = %v, want refused", c.ns, c.path, err)
			}
			if _, err := store.Write(ctx, c.ns, c.path, map[string]string{"k": "v"}); err == nil {
				t.Errorf("Write(%q, %q) accepted", c.ns, c.path)
			}
		}
	})

	t.Run("a frozen Vault trips the breaker: one deadline, then reads refused at once", func(t *testing.T) {
		short, err := client.Clone()
		if err != nil {
			t.Fatal(err)
		}
		short.SetToken(client.Token())
		short.SetClientTimeout(500 * time.Millisecond)
		b := vaultref.NewBreaker(vaultref.New(short, "secret", "edgefleet/global"), time.Minute)
		if err := v.Pause(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := v.Resume(); err != nil {
				t.Error(err)
			}
		}()
		if _, err := b.Read(ctx, "fleet", "bmc/host-1"); err == nil {
			t.Fatal("read from a frozen Vault succeeded")
		}
		// The breaker's own refusal: Vault was not asked (the classification of a real deadline).
		if _, err = b.Read(ctx, "fleet", "bmc/host-2"); err == nil || !strings.Contains(err.Error(), "not asked: Vault did not answer") {
			t.Errorf("second read within the cooldown: %v, want refused without asking", err)
		}
	})

	t.Run("the policy allows nothing outside the prefix, no listing and no deleting", func(t *testing.T) {
		if _, err := v.Client.KVv2("secret").Put(ctx, "edgefleet/bpa/site-a/ssh", map[string]any{"k": "v"}); err != nil {
			t.Fatal(err)
		}
		bpa := vaultref.New(client, "secret", "edgefleet/bpa")
		if _, err := bpa.Read(ctx, "site-a", "ssh"); !forbidden(err) {
			t.Errorf("read outside the prefix: %v, want 403", err)
		}
		if _, err := bpa.Write(ctx, "site-a", "ssh", map[string]string{"k": "v"}); !forbidden(err) {
			t.Errorf("write outside the prefix: %v, want 403", err)
		}
		if _, err := client.Logical().ListWithContext(ctx, "secret/metadata/edgefleet/global/fleet"); !forbidden(err) {
			t.Errorf("list: %v, want 403", err)
		}
		if err := client.KVv2("secret").DeleteMetadata(ctx, "edgefleet/global/fleet/bmc/host-1"); !forbidden(err) {
			t.Errorf("delete: %v, want 403", err)
		}
	})
}

func forbidden(err error) bool {
	var re *vaultapi.ResponseError
	return errors.As(err, &re) && re.StatusCode == 403
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
