package testvault

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// Vault is a Vault dev server (bin/vault, built by hack/tools.sh vault) for one test: in-memory
// storage, unsealed, KV version 2 mounted at "secret", listening on a free port of 127.0.0.1,
// or over TLS on another address (VaultOptions.Host).
type Vault struct {
	// Addr is the server's URL (http://127.0.0.1:PORT, or https://HOST:PORT).
	Addr string
	// CAFile is, with VaultOptions.Host, the PEM file of the CA of the server's certificate
	// (made by the dev server for the run, in the test's directory); "" otherwise.
	CAFile string
	// Client is a client of the server holding the root token. The token is made at random for
	// each server; it reaches the server through its environment (not its command line) and is
	// cut out of the server's log.
	Client *vaultapi.Client
	// Log is the server's log file.
	Log string

	proc *proc.Process
}

// VaultOptions say where a Vault dev server listens.
type VaultOptions struct {
	// Host, when set, is the address the server listens on (a free port of it) over TLS, with a
	// certificate for that address and 127.0.0.1 signed by a CA of the run: for clients off
	// loopback, such as test hosts on their bridge's gateway (test/testhosts' HostNet.Gateway).
	Host string
}

// StartVault starts a Vault dev server on 127.0.0.1 and stops it in the test's cleanup.
func StartVault(t testing.TB) *Vault {
	t.Helper()
	return StartVaultWith(t, VaultOptions{})
}

// StartVaultWith starts a Vault dev server as opts say and stops it in the test's cleanup.
func StartVaultWith(t testing.TB, opts VaultOptions) *Vault {
	t.Helper()
	v, err := startVault(t.Context(), t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Stop(); err != nil {
			t.Errorf("stop vault: %v", err)
		}
	})
	return v
}

// Stop stops the server; its in-memory storage goes with it.
func (v *Vault) Stop() error { return v.proc.Stop() }

// Pause freezes the server (SIGSTOP): it keeps its in-memory storage, and its port still
// accepts connections, but no request gets an answer until Resume — as when Vault hangs or the
// link to it drops packets, so its clients meet their deadlines.
func (v *Vault) Pause() error { return v.proc.Pause() }

// Resume lets a paused server answer again, its storage intact.
func (v *Vault) Resume() error { return v.proc.Resume() }

// StartVaultIn starts a Vault dev server keeping its log (and HOME) in dir, for programs that
// are not tests (the demo); Stop stops it.
func StartVaultIn(ctx context.Context, dir string) (*Vault, error) {
	return startVault(ctx, dir, VaultOptions{})
}

func startVault(ctx context.Context, dir string, opts VaultOptions) (*Vault, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "bin", "vault")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("vault: %s not found: run 'make tools' (or hack/tools.sh vault) first", bin)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("vault: root token: %w", err)
	}
	// Not "hvs.": Vault refuses custom token IDs with the prefixes of the tokens it makes.
	token := "edgefleet-test-" + hex.EncodeToString(raw)
	host := "127.0.0.1"
	if opts.Host != "" {
		host = opts.Host
	}
	addr, err := freeAddr(host)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	v := &Vault{Addr: "http://" + addr, Log: filepath.Join(dir, "vault.log")}
	args := []string{"server", "-dev", "-dev-listen-address=" + addr, "-dev-no-store-token"}
	hc := &http.Client{Timeout: 2 * time.Second}
	if opts.Host != "" {
		// The dev server makes a CA and a certificate for the listen address (and 127.0.0.1)
		// into the directory; only the CA is kept once it answers.
		tlsDir := filepath.Join(dir, "tls")
		if err := os.MkdirAll(tlsDir, 0o700); err != nil {
			return nil, fmt.Errorf("vault: %w", err)
		}
		args = append(args, "-dev-tls", "-dev-tls-cert-dir="+tlsDir)
		v.Addr, v.CAFile = "https://"+addr, filepath.Join(tlsDir, "vault-ca.pem")
	}
	// HOME in the test's directory, and -dev-no-store-token: the dev server would otherwise
	// write the token to ~/.vault-token.
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "VAULT_DEV_ROOT_TOKEN_ID=" + token}
	v.proc, err = proc.StartFiltered("vault", bin, args, env, v.Log, func(w io.Writer) io.WriteCloser {
		return &redactor{w: w, secrets: [][]byte{[]byte(token)}, linePrefixes: [][]byte{[]byte("Unseal Key:")}}
	})
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	if v.CAFile != "" {
		if hc, err = caClient(ctx, v.CAFile); err != nil {
			_ = v.proc.Kill()
			return nil, fmt.Errorf("vault: %w", err)
		}
	}
	if err := v.proc.WaitReadyWith(ctx, v.Addr+"/v1/sys/health", hc); err != nil {
		_ = v.proc.Kill()
		return nil, fmt.Errorf("vault: %w", err)
	}
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	if v.CAFile != "" {
		if err := cfg.ConfigureTLS(&vaultapi.TLSConfig{CACert: v.CAFile}); err != nil {
			_ = v.proc.Kill()
			return nil, fmt.Errorf("vault: %w", err)
		}
	}
	if v.Client, err = vaultapi.NewClient(cfg); err != nil {
		_ = v.proc.Kill()
		return nil, fmt.Errorf("vault: client: %w", err)
	}
	v.Client.SetToken(token)
	return v, nil
}

// freeLocalAddr returns an address of 127.0.0.1 with a port free a moment ago.
func freeLocalAddr() (string, error) { return freeAddr("127.0.0.1") }

// freeAddr returns an address of host with a port free a moment ago.
func freeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// caClient is an HTTP client trusting the CA of the PEM file caFile, written by a server that
// is starting: until the file is there, it waits (up to a minute).
func caClient(ctx context.Context, caFile string) (*http.Client, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		pem, err := os.ReadFile(caFile)
		if err == nil && len(pem) > 0 {
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s holds no certificate", caFile)
			}
			return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("the file is empty")
			}
			return nil, fmt.Errorf("no CA in %s a minute after the start: %w", caFile, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// redactor passes output on line by line, with every occurrence of a secret replaced and the
// lines starting with one of linePrefixes (after spaces) cut after the prefix.
type redactor struct {
	w            io.Writer
	secrets      [][]byte
	linePrefixes [][]byte
	buf          []byte
}

func (r *redactor) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := r.w.Write(r.redact(r.buf[:i+1])); err != nil {
			return len(p), err
		}
		r.buf = r.buf[i+1:]
	}
	return len(p), nil
}

// Close writes what is left of an unfinished line.
func (r *redactor) Close() error {
	if len(r.buf) == 0 {
		return nil
	}
	_, err := r.w.Write(r.redact(r.buf))
	r.buf = nil
	return err
}

func (r *redactor) redact(line []byte) []byte {
	out := line
	for _, s := range r.secrets {
		out = bytes.ReplaceAll(out, s, []byte("[redacted]"))
	}
	trimmed := bytes.TrimLeft(out, " \t")
	for _, prefix := range r.linePrefixes {
		if bytes.HasPrefix(trimmed, prefix) {
			return append(append([]byte{}, prefix...), " [redacted]\n"...)
		}
	}
	return out
}

// Env is the environment by which a component's Vault client reaches the server: its root token,
// and the CA of its certificate when it serves TLS.
func (v *Vault) Env() []string {
	env := []string{"VAULT_TOKEN=" + v.Client.Token()}
	if v.CAFile != "" {
		env = append(env, "VAULT_CACERT="+v.CAFile)
	}
	return env
}
