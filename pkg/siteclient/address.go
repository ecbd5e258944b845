package siteclient

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

// AddressPolicy says which addresses of a site's API server the global controller connects
// to. A site names its API server itself (in the kubeconfig it enrolls with), so it could name
// the controller's own loopback services or a cloud metadata endpoint: loopback, link-local
// (169.254.0.0/16 and fe80::/10), unspecified and multicast addresses, and AWS's metadata
// endpoint over IPv6 (fd00:ec2::254), are refused unless one of Allowed holds them. The zero value refuses them all and resolves with net.DefaultResolver.
type AddressPolicy struct {
	// Allowed are where a site's API server may be although its address is of a refused class
	// (--enrollment-allowed-networks; test beds on one machine allow loopback).
	Allowed []netip.Prefix
	// Resolver resolves the server's host; net.DefaultResolver when nil.
	Resolver Resolver
}

// AddressError is a site's API server whose host resolves to an address of a refused class.
type AddressError struct {
	Host  string
	Addr  netip.Addr
	Class string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("the site's API server %s resolves to %s, a %s address, which the global controller does not connect to unless its operator allows it (--enrollment-allowed-networks)",
		e.Host, e.Addr, e.Class)
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

// cloudMetadataIPv6 is the metadata endpoint a cloud serves at an address that is not
// link-local: AWS's instance metadata service over IPv6 (the IPv4 ones, 169.254.169.254 of AWS,
// Azure and Google Cloud, are link-local).
var cloudMetadataIPv6 = netip.MustParseAddr("fd00:ec2::254")

// refusedClass names the class of addr when the policy refuses it, "" when it does not.
func (p AddressPolicy) refusedClass(addr netip.Addr) string {
	addr = addr.Unmap()
	var class string
	switch {
	case addr == cloudMetadataIPv6:
		class = "cloud metadata endpoint's"
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
	for _, a := range p.Allowed {
		if a.Contains(addr) {
			return ""
		}
	}
	return class
}

// resolve resolves host and checks every address it resolves to: one refused address refuses
// the host (a connection could reach any), with *AddressError.
func (p AddressPolicy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	resolver := p.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	for _, a := range addrs {
		if class := p.refusedClass(a); class != "" {
			return nil, &AddressError{Host: host, Addr: a, Class: class}
		}
	}
	return addrs, nil
}

// Check resolves the host of cfg's server now and fails with *AddressError when the policy
// refuses one of its addresses.
func (p AddressPolicy) Check(ctx context.Context, cfg *rest.Config) error {
	host, err := serverHost(cfg)
	if err != nil {
		return err
	}
	_, err = p.resolve(ctx, host)
	return err
}

// Guard returns a copy of cfg that connects to its server's host only, directly (no proxy),
// and checks the addresses at every connection: it resolves the host, refuses (with
// *AddressError) when the policy refuses one of its addresses, and dials the checked ones. So
// neither a name that resolves elsewhere later (DNS rebinding) nor a changed kubeconfig leads
// the controller to an address it refuses.
func (p AddressPolicy) Guard(cfg *rest.Config) (*rest.Config, error) {
	host, err := serverHost(cfg)
	if err != nil {
		return nil, err
	}
	guarded := rest.CopyConfig(cfg)
	guarded.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	guarded.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		h, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(h, host) {
			return nil, fmt.Errorf("dial %s: only %s, the site's API server, may be reached", address, host)
		}
		addrs, err := p.resolve(ctx, host)
		if err != nil {
			return nil, err
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
	return guarded, nil
}

func serverHost(cfg *rest.Config) (string, error) {
	server, err := url.Parse(cfg.Host)
	if err != nil {
		return "", fmt.Errorf("server %q: %w", cfg.Host, err)
	}
	return server.Hostname(), nil
}
