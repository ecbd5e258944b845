// Package siteinit prepares a bootstrap machine's site control plane at every boot
// (`local-controller site-init`, run by edgefleet-site-init.service before etcd): the site's
// PKI, its API server's encryption configuration, a kubeconfig per component and the
// environment file the units read. It is idempotent: what exists and is still right is kept,
// so a second run changes nothing, and a reboot after a crash mid-run finishes the job.
// Everything it writes is readable by root only (files 0600, directories 0700).
package siteinit

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/encryption"
)

// APIPort is the site API server's port.
const APIPort = 6443

// ServiceIP is the address of Service kubernetes.default on the site cluster (the first of
// the API server's --service-cluster-ip-range 10.0.0.0/24).
const ServiceIP = "10.0.0.1"

// identity is a site component's client identity on its API server.
type identity struct {
	Name string // file names: pki/<Name>.{crt,key}, kubeconfig/<Name>.kubeconfig
	CN   string
	Orgs []string
}

// identities of the site's components on its API server. Each but the admin is an ordinary
// user bound by usb-image/stack/manifests/bindings.yaml to its component's generated role; the
// controller manager's is Kubernetes' own (bootstrap RBAC binds it).
func identities() []identity {
	return []identity{
		{"admin", "edgefleet:site-admin", []string{"system:masters"}},
		{"controller-manager", "system:kube-controller-manager", nil},
		{"local-controller", "edgefleet:local-controller", nil},
		{"bpa", "edgefleet:bpa", nil},
		{"baremetal-operator", "edgefleet:baremetal-operator", nil},
	}
}

// Options say where and for which addresses.
type Options struct {
	// Dir holds everything (/var/lib/edgefleet/site).
	Dir string
	// Addresses the API server's certificate is valid for besides loopback and the machine's
	// own addresses (IPs or DNS names).
	Addresses []string
	// AddressWait bounds the wait for the machine's first non-loopback address (the network
	// may come up just after this runs); without one the certificate holds loopback only
	// until a later run finds one.
	AddressWait time.Duration
	// Interfaces lists the machine's addresses; net.InterfaceAddrs when nil.
	Interfaces func() ([]net.Addr, error)
	// Now is the time certificates are checked and issued at; time.Now when nil.
	Now func() time.Time
}

// Result says what a run did.
type Result struct {
	// Changed lists the files written (relative to Dir); empty when everything was right.
	Changed []string
	// Address is the machine's address the site is reached at (SITE_ADDRESS), or 127.0.0.1.
	Address netip.Addr
}

// Run makes or completes the site's files in o.Dir.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Dir == "" || !filepath.IsAbs(o.Dir) {
		return Result{}, fmt.Errorf("site-init: --dir must be an absolute path, got %q", o.Dir)
	}
	if o.Interfaces == nil {
		o.Interfaces = net.InterfaceAddrs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var ips []netip.Addr
	var dns []string
	for _, a := range o.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil {
			ips = append(ips, ip)
		} else if a != "" {
			dns = append(dns, a)
		}
	}
	own, err := machineAddresses(ctx, o.Interfaces, o.AddressWait)
	if err != nil {
		return Result{}, err
	}
	res := Result{Address: netip.MustParseAddr("127.0.0.1")}
	if len(own) > 0 {
		res.Address = own[0]
	}
	ips = append(ips, own...)
	pki := filepath.Join(o.Dir, "pki")
	for _, d := range []string{o.Dir, pki, filepath.Join(o.Dir, "kubeconfig")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return res, fmt.Errorf("site-init: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return res, fmt.Errorf("site-init: %w", err)
		}
	}
	changed := func(file string) { res.Changed = append(res.Changed, file) }

	now := o.Now()
	ca, made, err := ensureCA(pki, now)
	if err != nil {
		return res, fmt.Errorf("site-init: %w", err)
	}
	if made {
		changed("pki/ca.crt")
	}
	hostname, _ := os.Hostname()
	serving := leaf{name: "apiserver", Leaf: certs.Leaf{
		CommonName: "kube-apiserver",
		DNSNames: slices.DeleteFunc(append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", hostname}, dns...),
			func(n string) bool { return n == "" }),
		IPs:    append([]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr(ServiceIP)}, ips...),
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}.Normalized()}
	// The site cache's serving certificate (the local controller reads it again when it
	// changes): the BPA and Ironic reach it at the machine's addresses.
	cache := leaf{name: "site-cache", Leaf: certs.Leaf{
		CommonName: "edgefleet-site-cache",
		DNSNames:   slices.DeleteFunc(append([]string{"localhost", hostname}, dns...), func(n string) bool { return n == "" }),
		IPs:        append([]netip.Addr{netip.MustParseAddr("127.0.0.1")}, ips...),
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}.Normalized()}
	leaves := []leaf{serving, cache}
	for _, id := range identities() {
		leaves = append(leaves, leaf{name: id.Name, Leaf: certs.Leaf{CommonName: id.CN, Organizations: id.Orgs, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}})
	}
	for _, l := range leaves {
		c, err := ensureLeaf(pki, l, ca, now)
		if err != nil {
			return res, fmt.Errorf("site-init: %w", err)
		}
		if c {
			changed("pki/" + l.name + ".crt")
		}
	}
	if c, err := ensureServiceAccountKey(pki); err != nil {
		return res, fmt.Errorf("site-init: service-account key: %w", err)
	} else if c {
		changed("pki/sa.key")
	}
	for _, id := range identities() {
		file := "kubeconfig/" + id.Name + ".kubeconfig"
		c, err := writeKubeconfig(filepath.Join(o.Dir, file), pki, id.Name)
		if err != nil {
			return res, fmt.Errorf("site-init: %w", err)
		}
		if c {
			changed(file)
		}
	}
	encCfg := filepath.Join(o.Dir, "encryption-config.yaml")
	if _, err := os.Stat(encCfg); errors.Is(err, fs.ErrNotExist) {
		key, err := encryption.SecretboxProvider("site-1")
		if err != nil {
			return res, fmt.Errorf("site-init: %w", err)
		}
		if err := encryption.WriteConfig(encCfg, key); err != nil {
			return res, fmt.Errorf("site-init: %w", err)
		}
		changed("encryption-config.yaml")
	} else if err != nil {
		return res, fmt.Errorf("site-init: %w", err)
	}
	env := fmt.Sprintf("# Written by local-controller site-init at every boot; read by the site stack's units.\nSITE_ADDRESS=%s\nSITE_SERVER=https://%s\n",
		res.Address, net.JoinHostPort(res.Address.String(), strconv.Itoa(APIPort)))
	if c, err := writeIfChanged(filepath.Join(o.Dir, "stack.env"), []byte(env)); err != nil {
		return res, fmt.Errorf("site-init: %w", err)
	} else if c {
		changed("stack.env")
	}
	return res, nil
}

// machineAddresses returns the machine's global unicast addresses (IPv4 first), waiting up to
// wait for one.
func machineAddresses(ctx context.Context, list func() ([]net.Addr, error), wait time.Duration) ([]netip.Addr, error) {
	deadline := time.Now().Add(wait)
	for {
		addrs, err := list()
		if err != nil {
			return nil, fmt.Errorf("site-init: the machine's addresses: %w", err)
		}
		var v4, v6 []netip.Addr
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok || !ip.IsGlobalUnicast() {
				continue
			}
			if ip = ip.Unmap(); ip.Is4() {
				v4 = append(v4, ip)
			} else {
				v6 = append(v6, ip)
			}
		}
		if all := append(v4, v6...); len(all) > 0 || !time.Now().Before(deadline) {
			return all, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeKubeconfig writes the kubeconfig of identity name: the site API server on loopback, the
// site CA inline (enrollment hands it to the global controller; a new CA rewrites the file),
// and the client certificate and key by path (they are renewed in place).
func writeKubeconfig(path, pki, name string) (bool, error) {
	ca, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return false, fmt.Errorf("kubeconfig %s: %w", name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["site"] = &clientcmdapi.Cluster{
		Server:                   "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(APIPort)),
		CertificateAuthorityData: ca,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate: filepath.Join(pki, name+".crt"),
		ClientKey:         filepath.Join(pki, name+".key"),
	}
	cfg.Contexts["site"] = &clientcmdapi.Context{Cluster: "site", AuthInfo: name}
	cfg.CurrentContext = "site"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return false, fmt.Errorf("kubeconfig %s: %w", name, err)
	}
	return writeIfChanged(path, data)
}

// writeIfChanged writes data to path (0600) unless path holds it already.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	return true, writeFile(path, data)
}

// writeFile replaces path with data at once (written beside it, then renamed), mode 0600.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), os.Remove(tmp.Name()))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), os.Remove(tmp.Name()))
	}
	return nil
}
