package sshexec_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestKeyFromSecretStore is the path the BPA takes: the private key lives in Vault only, the
// host gets the public key, the executor logs in with the key read back into memory. Afterwards
// no file the test, the host or Vault wrote holds the private key.
func TestKeyFromSecretStore(t *testing.T) {
	ctx := t.Context()
	v := testvault.StartVault(t)
	store := secrets.NewVault(v.Client, "secret", "edgefleet")

	privPEM, authorized := testhosts.SSHKeyPEM(t)
	if err := store.Put(ctx, "site-a.ssh", map[string][]byte{"ssh-privatekey": privPEM}); err != nil {
		t.Fatal(err)
	}

	hostsDir := t.TempDir()
	hn := testhosts.StartHosts(t, 1, authorized, testhosts.HostOptions{Dir: hostsDir})
	h := hn.Hosts[0]

	data, err := store.Get(ctx, "site-a.ssh")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sshexec.ParseSigner(data["ssh-privatekey"])
	if err != nil {
		t.Fatal(err)
	}
	e := sshexec.New(signer, &sshexec.MemoryHostKeys{}, sshexec.Options{})
	t.Cleanup(e.Close)
	r, err := e.Run(ctx, sshexec.Target{Name: h.Name, Addr: h.SSHAddr()}, sshexec.Step{Name: "whoami", Command: "id -un", Timeout: 30 * time.Second})
	if err != nil || string(r.Stdout) != "root\n" {
		t.Fatalf("stdout %q, err %v", r.Stdout, err)
	}

	// The key in every form it could take in a file.
	raw, err := ssh.ParseRawPrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	priv, ok := raw.(*ed25519.PrivateKey)
	if !ok {
		t.Fatalf("key of type %T, want ed25519", raw)
	}
	seed := priv.Seed()
	pemLines := strings.Split(strings.TrimSpace(string(privPEM)), "\n")
	needles := map[string][]byte{
		"raw seed":       seed,
		"hex seed":       []byte(hex.EncodeToString(seed)),
		"base64 seed":    []byte(base64.StdEncoding.EncodeToString(seed)),
		"PEM (key part)": []byte(pemLines[len(pemLines)-2]),
	}
	for _, dir := range []string{hostsDir, filepath.Dir(v.Log)} {
		files := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for what, n := range needles {
				if bytes.Contains(b, n) {
					t.Errorf("%s holds the private key (%s)", path, what)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 {
			t.Fatalf("no file under %s: the search proves nothing", dir)
		}
	}
}
