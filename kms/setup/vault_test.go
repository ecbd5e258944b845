package setup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestRunWithKubernetesAuth runs the plugin logging in to a real Vault dev server with Vault's
// Kubernetes auth method, as the ServiceAccount of its role, against a real API server.
func TestRunWithKubernetesAuth(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "kms"})
	v := testvault.StartVault(t)
	ctx := t.Context()
	ns := cp.Namespace(t)
	if err := v.KubernetesAuth(ctx, cp, ns); err != nil {
		t.Fatal(err)
	}
	const key = "edgefleet-kms"
	if err := v.TransitKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := v.KubernetesRole(ctx, "kms-site-a", ns, "kms", "edgefleet-kms-site-a", encryption.TransitPolicy(testvault.TransitMount, key), time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	saFile, err := cp.ServiceAccountTokenFile(ctx, ns, "kms", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(): a Unix socket's path must be short.
	dir, err := os.MkdirTemp("", "edgefleet-kms-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts := DefaultOptions()
	opts.Socket, opts.HealthAddr, opts.TransitKey = filepath.Join(dir, "kms.sock"), testutil.FreeAddr(t), key
	opts.Vault.Addr, opts.Vault.Role, opts.Vault.ServiceAccountTokenFile = v.Addr, "kms-site-a", saFile
	log := slog.New(slog.DiscardHandler)

	wrong := opts
	wrong.Vault.Role = "bpa-site-a"
	if err := Run(ctx, wrong, log); err == nil || !strings.Contains(err.Error(), `as role "bpa-site-a"`) {
		t.Errorf("Run with a role that does not exist = %v, want a refused login naming the role", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var runErr error
	ran := make(chan struct{})
	go func() { runErr = Run(runCtx, opts, log); close(ran) }()
	t.Cleanup(func() { stop(); <-ran })
	var body string
	testutil.WaitFor(t, 30*time.Second, "/healthz answering 200", func() (bool, string) {
		var status int
		body, status = get(ctx, "http://"+opts.HealthAddr+"/healthz")
		return status == http.StatusOK, fmt.Sprintf("%d %s", status, body)
	})
	if want := "ok, key ID transit/" + key + ":v1\n"; body != want {
		t.Errorf("/healthz = %q, want %q", body, want)
	}
	stop()
	<-ran
	if runErr != nil {
		t.Errorf("Run: %v", runErr)
	}
}

// get returns the body and status of a GET of url; status 0 when it got no answer.
func get(ctx context.Context, url string) (string, int) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error(), 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return string(b), resp.StatusCode
}
