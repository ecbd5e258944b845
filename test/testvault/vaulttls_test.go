package testvault_test

import (
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestVaultOverTLS starts a Vault dev server off 127.0.0.1: it answers over TLS with a
// certificate its CA file verifies, and refuses plain HTTP.
func TestVaultOverTLS(t *testing.T) {
	v := testvault.StartVaultWith(t, testvault.VaultOptions{Host: "127.0.0.2"})
	if !strings.HasPrefix(v.Addr, "https://127.0.0.2:") || v.CAFile == "" {
		t.Fatalf("Addr %q, CAFile %q: want https on 127.0.0.2 and a CA", v.Addr, v.CAFile)
	}
	if h, err := v.Client.Sys().HealthWithContext(t.Context()); err != nil || !h.Initialized || h.Sealed {
		t.Fatalf("health through the CA: %+v, %v", h, err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(v.Addr + "/v1/sys/health")
	if err == nil {
		resp.Body.Close()
	}
	if unknown := (x509.UnknownAuthorityError{}); !errors.As(err, &unknown) {
		t.Errorf("https without the CA: %v, want an unknown authority", err)
	}
	resp, err = hc.Get("http://" + strings.TrimPrefix(v.Addr, "https://") + "/v1/sys/health")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered %s", resp.Status)
		}
	}
}
