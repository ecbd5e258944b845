package testvault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"

	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TransitMount is where TransitKey mounts Vault's transit engine.
const TransitMount = "transit"

// kmsTimeout bounds each of the API server's calls to a KMSPlugin; the plugin's own Vault
// calls are bounded by its default --vault-timeout, a little shorter.
const kmsTimeout = 5 * time.Second

// MountTransit mounts Vault's transit engine at TransitMount, unless it is there already.
func (v *Vault) MountTransit(ctx context.Context) error {
	mounts, err := v.Client.Sys().ListMountsWithContext(ctx)
	if err != nil {
		return fmt.Errorf("vault: list mounts: %w", err)
	}
	if _, ok := mounts[TransitMount+"/"]; !ok {
		if err := v.Client.Sys().MountWithContext(ctx, TransitMount, &vaultapi.MountInput{Type: "transit"}); err != nil {
			return fmt.Errorf("vault: mount the transit engine: %w", err)
		}
	}
	return nil
}

// TransitKey mounts Vault's transit engine (MountTransit) and creates the key name in it
// (aes256-gcm96, the engine's default type).
func (v *Vault) TransitKey(ctx context.Context, name string) error {
	if err := v.MountTransit(ctx); err != nil {
		return err
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, TransitMount+"/keys/"+name, nil); err != nil {
		return fmt.Errorf("vault: create transit key %s: %w", name, err)
	}
	return nil
}

// KMSPlugin is bin/edgefleet-kms serving the KMS v2 API on a Unix socket over a transit key of
// a Vault dev server, with a token that may use that key only (encryption.TransitPolicy).
type KMSPlugin struct {
	// Name is the plugin's provider name in the API server's configuration, and in the prefix
	// of what the API server stores with it ("k8s:enc:kms:v2:<name>:").
	Name string
	// Key is the transit key, at TransitMount.
	Key string
	// Socket is the plugin's Unix socket.
	Socket string
	// Log is the plugin's log file.
	Log string

	proc *proc.Process
}

// StartKMSPlugin creates the transit key named key in v (TransitKey) and a token of v limited
// to it, and starts bin/edgefleet-kms with that token; the plugin stops in the test's cleanup.
// Give its Provider to Options.Encryption.
func StartKMSPlugin(t testing.TB, v *Vault, key string) *KMSPlugin {
	t.Helper()
	// Not t.TempDir(): a Unix socket's path must be short (108 bytes), test names are long.
	dir, err := os.MkdirTemp("", "edgefleet-kms-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the KMS plugin's directory: %v", err)
		}
	})
	p, err := startKMSPlugin(t.Context(), dir, v, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.proc.Stop(); err != nil {
			t.Errorf("stop the KMS plugin: %v", err)
		}
	})
	return p
}

func startKMSPlugin(ctx context.Context, dir string, v *Vault, key string) (*KMSPlugin, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := v.TransitKey(ctx, key); err != nil {
		return nil, err
	}
	policy := "edgefleet-kms-" + key
	if err := v.Client.Sys().PutPolicyWithContext(ctx, policy, encryption.TransitPolicy(TransitMount, key)); err != nil {
		return nil, fmt.Errorf("vault: policy %s: %w", policy, err)
	}
	token, err := v.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{
		Policies: []string{policy}, NoDefaultPolicy: true,
	})
	if err != nil {
		return nil, fmt.Errorf("vault: token for the KMS plugin: %w", err)
	}
	tokenFile := filepath.Join(dir, "vault-token")
	if err := os.WriteFile(tokenFile, []byte(token.Auth.ClientToken), 0o600); err != nil {
		return nil, fmt.Errorf("KMS plugin: %w", err)
	}
	health, err := freeLocalAddr()
	if err != nil {
		return nil, fmt.Errorf("KMS plugin: %w", err)
	}
	p := &KMSPlugin{Name: "edgefleet-vault", Key: key, Socket: filepath.Join(dir, "kms.sock"), Log: filepath.Join(dir, "kms.log")}
	p.proc, err = proc.Start("edgefleet-kms", filepath.Join(root, "bin", "edgefleet-kms"), []string{
		"--socket=" + p.Socket,
		"--vault-addr=" + v.Addr,
		"--vault-auth=token",
		"--vault-token-file=" + tokenFile,
		"--transit-mount=" + TransitMount,
		"--transit-key=" + key,
		"--health-addr=" + health,
	}, []string{"PATH=/usr/bin:/bin"}, p.Log)
	if err != nil {
		return nil, fmt.Errorf("KMS plugin: %w", err)
	}
	if err := p.proc.WaitReady(ctx, "http://"+health+"/healthz"); err != nil {
		return nil, fmt.Errorf("KMS plugin: %w", errors.Join(err, p.proc.Kill()))
	}
	return p, nil
}

// Provider is the plugin's provider for Options.Encryption.
func (p *KMSPlugin) Provider() apiserverv1.ProviderConfiguration {
	return encryption.KMSProvider(p.Name, p.Socket, kmsTimeout)
}
