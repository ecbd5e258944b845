package siteclient

import (
	"errors"
	"strings"
	"testing"
)

const kubeconfigHeader = `apiVersion: v1
kind: Config
clusters:
- name: site
  cluster:
    server: %SERVER%
    certificate-authority-data: ""
%CLUSTER%
users:
- name: admin
  user:
%USER%
contexts:
- name: site
  context: {cluster: site, user: admin}
%CURRENT%
`

func kubeconfig(server, cluster, user, current string) []byte {
	r := strings.NewReplacer("%SERVER%", server, "%CLUSTER%", cluster, "%USER%", user, "%CURRENT%", current)
	return []byte(r.Replace(kubeconfigHeader))
}

func TestLoad(t *testing.T) {
	const token = "    token: abc"
	tests := []struct {
		name    string
		data    []byte
		wantErr error
		inError string
	}{
		{"inline token", kubeconfig("https://10.0.0.1:6443", "", token, "current-context: site"), nil, ""},
		{"single context without current-context", kubeconfig("https://10.0.0.1:6443", "", token, ""), nil, ""},
		{"inline client certificate", kubeconfig("https://10.0.0.1:6443", "", "    client-certificate-data: Zm9v\n    client-key-data: YmFy", "current-context: site"), nil, ""},
		{"empty", []byte("  \n"), ErrInvalid, "empty"},
		{"garbage", []byte("{{{ not yaml"), ErrInvalid, "invalid"},
		{"plain http server", kubeconfig("http://10.0.0.1:8080", "", token, "current-context: site"), ErrInvalid, `clusters["site"].server must be an https:// URL`},
		{"unknown current context", kubeconfig("https://10.0.0.1:6443", "", token, "current-context: other"), ErrInvalid, `context "other"`},
		{"exec plugin", kubeconfig("https://10.0.0.1:6443", "", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh", "current-context: site"), ErrUnsafe, `users["admin"].exec would run a command ("/bin/sh")`},
		{"auth provider", kubeconfig("https://10.0.0.1:6443", "", "    auth-provider:\n      name: gcp", "current-context: site"), ErrUnsafe, `users["admin"].auth-provider`},
		{"token file", kubeconfig("https://10.0.0.1:6443", "", "    tokenFile: /var/run/secrets/token", "current-context: site"), ErrUnsafe, `users["admin"].tokenFile is a file path`},
		{"client certificate file", kubeconfig("https://10.0.0.1:6443", "", "    client-certificate: /etc/cert.pem\n    client-key: /etc/key.pem", "current-context: site"), ErrUnsafe, `users["admin"].client-certificate is a file path`},
		{"CA file", kubeconfig("https://10.0.0.1:6443", "    certificate-authority: /etc/ca.pem", token, "current-context: site"), ErrUnsafe, `clusters["site"].certificate-authority is a file path`},
		{"proxy", kubeconfig("https://10.0.0.1:6443", "    proxy-url: http://proxy:3128", token, "current-context: site"), ErrUnsafe, "proxy-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.data)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if cfg.Host != "https://10.0.0.1:6443" {
					t.Errorf("Host = %q", cfg.Host)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Load error = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.inError) {
				t.Errorf("error %q does not contain %q", err, tt.inError)
			}
		})
	}
}
