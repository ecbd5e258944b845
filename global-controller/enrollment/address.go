package enrollment

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
)

// Resolver resolves a host name to its addresses: *net.Resolver.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// refusedClass names the class of addr when the global controller does not connect to it on
// an enrolling machine's word, "" when it does: loopback, link-local (169.254.0.0/16 and
// fe80::/10, where cloud metadata endpoints answer), unspecified and multicast addresses are
// refused unless one of allowed holds them.
func refusedClass(addr netip.Addr, allowed []netip.Prefix) string {
	addr = addr.Unmap()
	var class string
	switch {
	case addr.IsLoopback():
		class = "loopback"
	case addr.IsLinkLocalUnicast():
		class = "link-local"
	case addr.IsUnspecified():
		class = "unspecified"
	case addr.IsMulticast():
		class = "multicast"
	default:
		return ""
	}
	for _, p := range allowed {
		if p.Contains(addr) {
			return ""
		}
	}
	return class
}

// ParseNetworks parses a comma-separated list of CIDRs (as --enrollment-allowed-networks
// takes it), naming the first that is not one.
func ParseNetworks(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 127.0.0.0/8 or ::1/128", item)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// addressError is a site's API server whose host resolves to an address of a refused class.
type addressError struct {
	Host  string
	Addr  netip.Addr
	Class string
}

func (e *addressError) Error() string {
	return fmt.Sprintf("%s resolves to %s, a %s address", e.Host, e.Addr, e.Class)
}

// pin resolves the host of cfg's server and checks every address it resolves to; when all
// pass it returns a copy of cfg that dials only those addresses, directly (no proxy), so that
// a second resolution (DNS rebinding) cannot swap them for others. An address of a refused
// class is an *addressError.
func pin(ctx context.Context, resolver Resolver, cfg *rest.Config, allowed []netip.Prefix) (*rest.Config, error) {
	server, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", cfg.Host, err)
	}
	host := server.Hostname()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	for _, a := range addrs {
		if class := refusedClass(a, allowed); class != "" {
			return nil, &addressError{Host: host, Addr: a, Class: class}
		}
	}
	pinned := rest.CopyConfig(cfg)
	pinned.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	pinned.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		h, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(h, host) {
			return nil, fmt.Errorf("dial %s: only %s, whose addresses were checked, may be reached", address, host)
		}
		var d net.Dialer
		var errs []error
		for _, a := range addrs {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	return pinned, nil
}
