package vaultauth

import (
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
		{"kubernetes with a role", func(*Options) {}, ""},
		{"token", func(o *Options) { o.Method, o.Role = MethodToken, "" }, ""},
		{"no role", func(o *Options) { o.Role = "" }, "--vault-role is required with --vault-auth=kubernetes: name the Vault role bound to this component's ServiceAccount (or use --vault-auth=token with a dev server)"},
		{"role with a token", func(o *Options) { o.Method = MethodToken }, "--vault-role is for --vault-auth=kubernetes; with --vault-auth=token the token comes from --vault-token-file or $VAULT_TOKEN"},
		{"unknown method", func(o *Options) { o.Method = "approle" }, `--vault-auth must be "kubernetes" or "token", got "approle"`},
		{"no mount", func(o *Options) { o.Mount = "" }, "--vault-k8s-mount must not be empty with --vault-auth=kubernetes"},
		{"no token file", func(o *Options) { o.ServiceAccountTokenFile = "" }, "--vault-sa-token-file must not be empty with --vault-auth=kubernetes"},
		{"no server", func(o *Options) { o.Addr = "" }, "no Vault server: set --vault-addr or VAULT_ADDR"},
		{"no timeout", func(o *Options) { o.Timeout = 0 }, "--vault-timeout must be positive, got 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Addr, o.Role = "https://vault.example:8200", "bpa-site-a"
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestStaticToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	writeFile(t, file, "from-file\n")
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	big := filepath.Join(dir, "big")
	writeFile(t, big, strings.Repeat("x", maxTokenFile+1))
	for _, tc := range []struct {
		name, file, env, want, wantErr string
	}{
		{"file first", file, "from-env", "from-file", ""},
		{"environment", "", "from-env", "from-env", ""},
		{"neither", "", "", "", "no Vault token: set --vault-token-file or VAULT_TOKEN (or use --vault-auth=kubernetes)"},
		{"empty file", empty, "from-env", "", "--vault-token-file " + empty + " is empty"},
		{"too big", big, "", "", "--vault-token-file " + big + ": more than 65536 bytes, not a token"},
		{"missing file", filepath.Join(dir, "missing"), "", "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VAULT_TOKEN", tc.env)
			got, err := staticToken(tc.file)
			if got != tc.want || tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("staticToken = %q, %v; want %q, error %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
