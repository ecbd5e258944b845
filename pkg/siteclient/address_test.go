package siteclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

func TestParseNetworks(t *testing.T) {
	got, err := ParseNetworks(" 127.0.0.0/8, ::1/128,,10.1.2.3/8")
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseNetworks = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"127.0.0.1", "10.0.0.0/33", "loopback"} {
		if _, err := ParseNetworks("::1/128," + bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q is not a CIDR", bad)) {
			t.Errorf("ParseNetworks(%q) error = %v, want one naming it", bad, err)
		}
	}
}

// fakeResolver resolves every name to the address it holds at the time.
type fakeResolver struct{ addr atomic.Pointer[netip.Addr] }

func (r *fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{*r.addr.Load()}, nil
}

// TestGuardChecksEveryConnection: a site's API server named site.test resolves to the test
// server's loopback address, which the policy allows, and a request goes through; then the
// name resolves to a cloud metadata address (DNS rebinding, or a changed record after
// enrollment): the next connection is refused with *AddressError naming it and the flag,
// before any dial. A policy allowing nothing refuses loopback itself.
func TestGuardChecksEveryConnection(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	resolver := &fakeResolver{}
	loopback := netip.MustParseAddr("127.0.0.1")
	resolver.addr.Store(&loopback)
	get := func(p AddressPolicy) error {
		t.Helper()
		cfg, err := p.Guard(&rest.Config{Host: fmt.Sprintf("http://site.test:%d", port)})
		if err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(fmt.Sprintf("http://site.test:%d/version", port))
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	allowLoopback := AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Resolver: resolver}
	if err := get(allowLoopback); err != nil || served.Load() != 1 {
		t.Fatalf("through the allowed loopback address: %v, %d requests served", err, served.Load())
	}

	metadata := netip.MustParseAddr("169.254.169.254")
	resolver.addr.Store(&metadata)
	err := get(allowLoopback)
	var refused *AddressError
	if !errors.As(err, &refused) || refused.Class != "link-local" || refused.Addr != metadata {
		t.Fatalf("site.test now at %s: %v, want an *AddressError of a link-local address", metadata, err)
	}
	if !strings.Contains(err.Error(), "169.254.169.254, a link-local address") || !strings.Contains(err.Error(), "--enrollment-allowed-networks") {
		t.Errorf("error %q does not name the address and the flag", err)
	}

	resolver.addr.Store(&loopback)
	if err := get(AddressPolicy{Resolver: resolver}); !errors.As(err, &refused) || refused.Class != "loopback" {
		t.Errorf("loopback with nothing allowed: %v, want an *AddressError of a loopback address", err)
	}
	if served.Load() != 1 {
		t.Errorf("%d requests served; the refused connections must not reach the server", served.Load())
	}
}

// TestRefusedClasses checks the class of each kind of address the policy refuses, none for an
// address it connects to, and that Allowed lets a refused one through.
func TestRefusedClasses(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1":          "loopback",
		"::1":                "loopback",
		"::ffff:127.0.0.1":   "loopback",
		"169.254.169.254":    "link-local",
		"fe80::1":            "link-local",
		"0.0.0.0":            "unspecified",
		"::":                 "unspecified",
		"224.0.0.1":          "multicast",
		"fd00:ec2::254":      "cloud metadata endpoint's",
		"fd00:ec2::253":      "",
		"10.20.30.40":        "",
		"192.0.2.10":         "",
		"2001:db8::10":       "",
		"::ffff:10.20.30.40": "",
	} {
		if got := (AddressPolicy{}).refusedClass(netip.MustParseAddr(addr)); got != want {
			t.Errorf("refusedClass(%s) = %q, want %q", addr, got, want)
		}
	}
	allowed := AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("fd00:ec2::/64"), netip.MustParsePrefix("127.0.0.0/8")}}
	for _, addr := range []string{"fd00:ec2::254", "127.0.0.1"} {
		if got := allowed.refusedClass(netip.MustParseAddr(addr)); got != "" {
			t.Errorf("refusedClass(%s) with %v allowed = %q, want none", addr, allowed.Allowed, got)
		}
	}
}
