package setup

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"defaults with a Vault", func(*Options) {}, ""},
		{"relative socket", func(o *Options) { o.Socket = "kms.sock" }, "--socket must be an absolute path"},
		{"no Vault", func(o *Options) { o.Vault.Addr = "" }, "no Vault server: set --vault-addr or VAULT_ADDR"},
		{"no timeout", func(o *Options) { o.Vault.Timeout = 0 }, "--vault-timeout must be positive, got 0s"},
		{"kubernetes without a role", func(o *Options) { o.Vault.Role = "" }, "--vault-role is required with --vault-auth=kubernetes: name the Vault role bound to this component's ServiceAccount (or use --vault-auth=token with a dev server)"},
		{"no key", func(o *Options) { o.TransitKey = "" }, "--transit-key must not be empty"},
		{"no mount", func(o *Options) { o.TransitMount = "" }, "--transit-mount must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Vault.Addr, o.Vault.Role = "https://vault.example:8200", "kms-site-a"
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPrepareSocket(t *testing.T) {
	dir := t.TempDir()

	fresh := filepath.Join(dir, "new", "kms.sock")
	if err := prepareSocket(fresh); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(fresh)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v, %v; want mode 0700", st.Mode().Perm(), err)
	}

	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	_ = l.Close() // the socket file stays, as after a crash
	if err := prepareSocket(stale); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale socket is still there (%v)", err)
	}

	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareSocket(file); err == nil || !strings.Contains(err.Error(), "something other than a socket is there") {
		t.Errorf("prepareSocket over a file: %v, want a refusal", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the file was removed: %v", err)
	}
}
