package enroll

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestRetryable(t *testing.T) {
	for status, want := range map[int]bool{
		http.StatusBadRequest: false, http.StatusUnauthorized: false, http.StatusForbidden: false,
		http.StatusNotFound: true, http.StatusRequestTimeout: true, http.StatusConflict: true, http.StatusTooManyRequests: true,
		http.StatusInternalServerError: true, http.StatusBadGateway: true, http.StatusServiceUnavailable: true,
	} {
		if got := Retryable(status); got != want {
			t.Errorf("Retryable(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestPostRefusesPlainHTTP(t *testing.T) {
	_, err := post(t.Context(), http.DefaultClient, Options{GlobalURL: "http://global.example"}, nil)
	var perm *PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "not https://") {
		t.Fatalf("err = %v, want a permanent refusal of plain HTTP", err)
	}
}

func TestKubeconfigHasInlineCredentialsOnly(t *testing.T) {
	data, err := Kubeconfig("https://10.0.0.2:6443", []byte("CA"), "tok")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	c, u := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if c.Server != "https://10.0.0.2:6443" || string(c.CertificateAuthorityData) != "CA" || u.Token != "tok" || u.TokenFile != "" || u.Exec != nil {
		t.Fatalf("kubeconfig: %s", data)
	}
}

func TestPinnedClientNeedsACertificate(t *testing.T) {
	if _, err := pinnedClient([]byte("not PEM"), 0); err == nil {
		t.Fatal("no error for a CA without certificates")
	}
}
