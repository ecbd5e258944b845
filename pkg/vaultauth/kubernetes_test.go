package vaultauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/vaultauth"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestKubernetesAuth logs a component in to a real Vault dev server with Vault's Kubernetes
// auth method against a real API server, and keeps it working past its token's max TTL.
func TestKubernetesAuth(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "vaultauth"})
	v := testvault.StartVault(t)
	ctx := t.Context()
	ns := cp.Namespace(t)
	if err := v.KubernetesAuth(ctx, cp, ns); err != nil {
		t.Fatal(err)
	}
	const prefix = "edgefleet/site-a"
	if err := v.KubernetesRole(ctx, "bpa-site-a", ns, "bpa", "edgefleet-bpa-site-a", secrets.VaultPolicy("secret", prefix), 10*time.Second, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bpaFile, err := cp.ServiceAccountTokenFile(ctx, ns, "bpa", dir)
	if err != nil {
		t.Fatal(err)
	}
	bpaJWT := readFile(t, bpaFile)
	var logs logBuffer
	opts := vaultauth.DefaultOptions()
	opts.Addr, opts.Role, opts.ServiceAccountTokenFile, opts.Timeout = v.Addr, "bpa-site-a", bpaFile, 5*time.Second
	opts.CheckInterval = time.Second
	sessionCtx, stop := context.WithCancel(ctx)
	s, err := vaultauth.Connect(sessionCtx, opts, logs.logger())
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-s.Done() })
	first := s.Client.Token()

	// Its own KV prefix: written and read; anything else: 403.
	store := secrets.NewVault(s.Client, "secret", prefix)
	want := map[string][]byte{"key": []byte("value")}
	if err := store.Put(ctx, "ssh-key", want); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"site-b's prefix": secrets.NewVault(s.Client, "secret", "edgefleet/site-b").Put(ctx, "ssh-key", want),
		"the transit key": func() error {
			_, err := s.Client.Logical().WriteWithContext(ctx, "transit/encrypt/edgefleet-kms", nil)
			return err
		}(),
	} {
		var re *vaultapi.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden {
			t.Errorf("writing to %s: %v, want 403", name, err)
		}
	}

	// Past max_ttl (30s) the component still reads its secrets: renewed, then logged in again.
	// The token's watcher hands over to the new login with 10-20 % of the token's TTL left
	// (vault/api's grace): with a TTL of 5 s, a login slowed by a loaded machine (Vault asking
	// the API server's TokenReview) once took longer than that, and a read in between was 403.
	testutil.WaitFor(t, 90*time.Second, "a renewal and a re-login after max_ttl", func() (bool, string) {
		st := s.Stats()
		if st.Renewals >= 1 && st.Expired >= 1 && st.Logins >= 2 {
			return true, ""
		}
		got, err := store.Get(ctx, "ssh-key")
		if err != nil || string(got["key"]) != "value" {
			t.Fatalf("reading its secret at %+v: %v, %q", st, err, got["key"])
		}
		return false, fmt.Sprintf("%+v", st)
	})
	if got, err := store.Get(ctx, "ssh-key"); err != nil || string(got["key"]) != "value" {
		t.Fatalf("reading its secret after logging in again: %v, %q", err, got["key"])
	}
	if s.Client.Token() == first {
		t.Error("the token did not change after logging in again")
	}
	if st := s.Stats(); st.LoginFailures != 0 || st.RenewalFailures != 0 || st.TokenFileChanges != 0 {
		t.Errorf("stats %+v: failures or file changes where there were none", st)
	}

	// A wrong role, and another ServiceAccount's token, are refused, naming the role and why.
	otherFile, err := cp.ServiceAccountTokenFile(ctx, ns, "other", dir)
	if err != nil {
		t.Fatal(err)
	}
	otherJWT := readFile(t, otherFile)
	for _, tc := range []struct{ name, role, file, want string }{
		{"wrong role", "no-such-role", bpaFile, `as role "no-such-role"`},
		{"another ServiceAccount", "bpa-site-a", otherFile, "service account name not authorized"},
	} {
		o := opts
		o.Role, o.ServiceAccountTokenFile = tc.role, tc.file
		_, err := vaultauth.Connect(ctx, o, logr.Discard())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Connect = %v, want an error with %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), bpaJWT) || strings.Contains(err.Error(), otherJWT) {
			t.Errorf("%s: the error carries a ServiceAccount token", tc.name)
		}
	}

	stop()
	<-s.Done()
	out := logs.String()
	if !strings.Contains(out, "logged in to Vault") || !strings.Contains(out, "renewed the Vault token") {
		t.Errorf("the log lacks the logins and renewals:\n%s", out)
	}
	for _, secret := range []string{first, s.Client.Token(), bpaJWT} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds a token:\n%s", out)
		}
	}
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logBuffer keeps what a logger logged, verbose lines included.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 1})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
