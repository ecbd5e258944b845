package vaultauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// fakeWatch scripts one watcher of fakeVault: renewals renewals, then (when end) done on
// DoneCh; then nothing until stopped.
type fakeWatch struct {
	renewals int
	end      bool
	done     error
}

// fakeVault is a scripted fake of Vault's logins and token watchers. Login i (from 0) fails
// with loginErrs[i] when that is not nil, else gives the token "token-<i>"; watcher j follows
// watches[j], and later watchers never end.
type fakeVault struct {
	loginErrs []error
	watches   []fakeWatch

	mu       sync.Mutex
	attempts int
	jwts     []string // of the successful logins
	used     []string // tokens made the component's, in order
	watched  []string // tokens watched, in order
}

func (f *fakeVault) Login(_ context.Context, jwt string) (*vaultapi.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.attempts
	f.attempts++
	if i < len(f.loginErrs) && f.loginErrs[i] != nil {
		return nil, f.loginErrs[i]
	}
	f.jwts = append(f.jwts, jwt)
	return &vaultapi.Secret{Auth: &vaultapi.SecretAuth{ClientToken: fmt.Sprintf("token-%d", i), LeaseDuration: 5, Renewable: true}}, nil
}

func (f *fakeVault) Use(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used = append(f.used, token)
}

func (f *fakeVault) Watch(secret *vaultapi.Secret) (watcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := len(f.watched)
	f.watched = append(f.watched, secret.Auth.ClientToken)
	script := fakeWatch{}
	if j < len(f.watches) {
		script = f.watches[j]
	}
	return &fakeWatcher{script: script, renewCh: make(chan *vaultapi.RenewOutput), doneCh: make(chan error, 1), stop: make(chan struct{})}, nil
}

func (f *fakeVault) state() (used, watched, jwts []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.used), slices.Clone(f.watched), slices.Clone(f.jwts)
}

type fakeWatcher struct {
	script   fakeWatch
	renewCh  chan *vaultapi.RenewOutput
	doneCh   chan error
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *fakeWatcher) Start() {
	for range w.script.renewals {
		select {
		case w.renewCh <- &vaultapi.RenewOutput{Secret: &vaultapi.Secret{Auth: &vaultapi.SecretAuth{LeaseDuration: 5}}}:
		case <-w.stop:
			return
		}
	}
	if w.script.end {
		w.doneCh <- w.script.done
	}
	<-w.stop
}

func (w *fakeWatcher) Stop()                                 { w.stopOnce.Do(func() { close(w.stop) }) }
func (w *fakeWatcher) DoneCh() <-chan error                  { return w.doneCh }
func (w *fakeWatcher) RenewCh() <-chan *vaultapi.RenewOutput { return w.renewCh }

func TestKeeper(t *testing.T) {
	errDown := errors.New("connection refused")
	for _, tc := range []struct {
		name      string
		loginErrs []error
		watches   []fakeWatch
		// act runs once the first login is done; jwtFile is the ServiceAccount token file.
		act func(t *testing.T, jwtFile string)
		// until says when the keeper has done what the case is about.
		until       func(Stats, int) bool
		want        Stats
		wantUsed    []string
		wantWatched []string
		wantJWTs    []string
	}{
		{
			name:        "renews, then logs in again when the token can no longer be renewed",
			watches:     []fakeWatch{{renewals: 2, end: true}},
			until:       func(s Stats, _ int) bool { return s.Logins == 2 },
			want:        Stats{Logins: 2, Renewals: 2, Expired: 1},
			wantUsed:    []string{"token-0", "token-1"},
			wantWatched: []string{"token-0", "token-1"},
			wantJWTs:    []string{"jwt-1", "jwt-1"},
		},
		{
			name:        "logs in again when a renewal fails",
			watches:     []fakeWatch{{renewals: 1, end: true, done: errors.New("permission denied")}},
			until:       func(s Stats, _ int) bool { return s.Logins == 2 },
			want:        Stats{Logins: 2, Renewals: 1, RenewalFailures: 1},
			wantUsed:    []string{"token-0", "token-1"},
			wantWatched: []string{"token-0", "token-1"},
			wantJWTs:    []string{"jwt-1", "jwt-1"},
		},
		{
			name:        "retries a failing login with backoff, keeping the old token meanwhile",
			loginErrs:   []error{nil, errDown, errDown, errDown},
			watches:     []fakeWatch{{end: true}},
			until:       func(s Stats, _ int) bool { return s.Logins == 2 },
			want:        Stats{Logins: 2, LoginFailures: 3, Expired: 1},
			wantUsed:    []string{"token-0", "token-4"},
			wantWatched: []string{"token-0", "token-4"},
			wantJWTs:    []string{"jwt-1", "jwt-1"},
		},
		{
			name: "logs in again with the new ServiceAccount token when its file changes",
			act: func(t *testing.T, jwtFile string) {
				writeFile(t, jwtFile, "jwt-2\n")
			},
			until:       func(s Stats, _ int) bool { return s.Logins == 2 },
			want:        Stats{Logins: 2, TokenFileChanges: 1},
			wantUsed:    []string{"token-0", "token-1"},
			wantWatched: []string{"token-0", "token-1"},
			wantJWTs:    []string{"jwt-1", "jwt-2"},
		},
		{
			name: "a file rewritten with the same token, or unreadable for a while, changes nothing",
			act: func(t *testing.T, jwtFile string) {
				writeFile(t, jwtFile, "jwt-1")
				if err := os.Remove(jwtFile); err != nil {
					t.Fatal(err)
				}
			},
			until:       func(_ Stats, reads int) bool { return reads >= 5 },
			want:        Stats{Logins: 1},
			wantUsed:    []string{"token-0"},
			wantWatched: []string{"token-0"},
			wantJWTs:    []string{"jwt-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jwtFile := filepath.Join(t.TempDir(), "token")
			writeFile(t, jwtFile, "jwt-1\n")
			fake := &fakeVault{loginErrs: tc.loginErrs, watches: tc.watches}
			var reads atomic.Int64
			opts := DefaultOptions()
			opts.Role, opts.ServiceAccountTokenFile = "bpa-site-a", jwtFile
			opts.CheckInterval, opts.MinBackoff, opts.MaxBackoff = 5*time.Millisecond, time.Millisecond, 4*time.Millisecond
			k := &keeper{vault: fake, opts: opts, log: logr.Discard(), readJWT: func() ([]byte, error) {
				reads.Add(1)
				return readTokenFile(jwtFile, "--vault-sa-token-file")
			}}
			ctx, cancel := context.WithCancel(t.Context())
			s := &Session{keeper: k, done: make(chan struct{})}
			if err := s.start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); <-s.Done() })
			if tc.act != nil {
				tc.act(t, jwtFile)
			}
			testutil.WaitFor(t, 10*time.Second, "the keeper where the case is about", func() (bool, string) {
				st, n := s.Stats(), reads.Load()
				return tc.until(st, int(n)), fmt.Sprintf("%+v after %d reads", st, n)
			})
			if got := s.Stats(); got != tc.want {
				t.Errorf("stats = %+v, want %+v", got, tc.want)
			}
			used, watched, jwts := fake.state()
			if !slices.Equal(used, tc.wantUsed) || !slices.Equal(watched, tc.wantWatched) || !slices.Equal(jwts, tc.wantJWTs) {
				t.Errorf("tokens used %v, watched %v, logins with %v; want %v, %v, %v", used, watched, jwts, tc.wantUsed, tc.wantWatched, tc.wantJWTs)
			}
			cancel()
			select {
			case <-s.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the keeper did not stop with its context")
			}
		})
	}
}

func TestKeeperStopsWhileLoginsFail(t *testing.T) {
	jwtFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, jwtFile, "jwt-1")
	down := errors.New("connection refused")
	fake := &fakeVault{loginErrs: []error{nil, down, down, down, down, down, down, down, down, down, down, down, down}, watches: []fakeWatch{{end: true}}}
	opts := DefaultOptions()
	opts.Role, opts.ServiceAccountTokenFile = "bpa-site-a", jwtFile
	opts.MinBackoff, opts.MaxBackoff = time.Millisecond, time.Hour
	k := &keeper{vault: fake, opts: opts, log: logr.Discard(), readJWT: func() ([]byte, error) { return readTokenFile(jwtFile, "--vault-sa-token-file") }}
	ctx, cancel := context.WithCancel(t.Context())
	s := &Session{keeper: k, done: make(chan struct{})}
	if err := s.start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "a failed login", func() (bool, string) {
		st := s.Stats()
		return st.LoginFailures > 0, fmt.Sprintf("%+v", st)
	})
	cancel()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not stop with its context while backing off")
	}
}

func TestFirstLoginError(t *testing.T) {
	jwtFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, jwtFile, "the-jwt")
	opts := DefaultOptions()
	opts.Role, opts.ServiceAccountTokenFile = "bpa-site-a", jwtFile
	k := &keeper{vault: &fakeVault{loginErrs: []error{errors.New("invalid role name")}}, opts: opts, log: logr.Discard(),
		readJWT: func() ([]byte, error) { return readTokenFile(jwtFile, "--vault-sa-token-file") }}
	s := &Session{keeper: k, done: make(chan struct{})}
	err := s.start(t.Context())
	want := `vault: log in at auth/kubernetes/login as role "bpa-site-a" with the ServiceAccount token of ` + jwtFile + `: invalid role name`
	if err == nil || err.Error() != want {
		t.Errorf("start = %v, want %q", err, want)
	}
}

func writeFile(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
