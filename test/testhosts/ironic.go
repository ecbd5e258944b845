package testhosts

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// PlayIronic plays Ironic's deploy step for the hosts of hn, which stand for the site's
// BareMetalHosts of the same names in namespace: Metal3 runs with its fixture provisioner,
// which writes nothing anywhere, so when a BareMetalHost reaches provisioned, PlayIronic reads
// the image it names as Ironic's agent does — by its URL alone, no credential (the site cache
// signs it), trusting the CA in imageCAFile — and checks its sha256; then it writes the host's
// first-boot data — the hostname and ssh_authorized_keys of the cloud-config in the
// BareMetalHost's userData Secret — onto the host's disk and boots it, as a real host would
// come up after Ironic wrote the image. A host whose BareMetalHost leaves provisioned is powered
// off. It polls c until ctx is done or the returned stop is called; errors go to report.
func (hn *HostNet) PlayIronic(ctx context.Context, c client.Client, namespace, imageCAFile string, report func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		booted := map[string]bool{}
		for {
			// One list a second for every host: a GET per host every half second was the
			// busiest client of the site's API server.
			bmhs := &metal3api.BareMetalHostList{}
			listCtx, cancelList := context.WithTimeout(ctx, 10*time.Second)
			err := c.List(listCtx, bmhs, client.InNamespace(namespace))
			cancelList()
			if err != nil {
				if ctx.Err() == nil {
					report(fmt.Errorf("ironic of the test hosts: %w", err))
				}
			} else {
				byName := map[string]*metal3api.BareMetalHost{}
				for i := range bmhs.Items {
					byName[bmhs.Items[i].Name] = &bmhs.Items[i]
				}
				for _, h := range hn.Hosts {
					on, err := hn.playIronic(ctx, c, imageCAFile, h, byName[h.Name], booted[h.Name])
					if err != nil && ctx.Err() == nil {
						report(err)
					}
					booted[h.Name] = on
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// playIronic brings one host in line with its BareMetalHost (nil: none); it reports whether
// the host is on (booted by PlayIronic).
func (hn *HostNet) playIronic(ctx context.Context, c client.Client, imageCAFile string, h *Host, bmh *metal3api.BareMetalHost, on bool) (bool, error) {
	provisioned := bmh != nil && bmh.Status.Provisioning.State == metal3api.StateProvisioned && bmh.Spec.UserData != nil
	switch {
	case provisioned && !on:
		if err := readImage(ctx, bmh, imageCAFile); err != nil {
			return false, err
		}
		ud, err := userData(ctx, c, bmh)
		if err != nil {
			return false, err
		}
		if err := h.Provision(ud); err != nil {
			return false, err
		}
		if err := h.Boot(); err != nil {
			return false, err
		}
		return true, nil
	case !provisioned && on:
		return false, h.Stop()
	}
	return on, nil
}

// readImage reads the image bmh names as Ironic's agent does: by its URL alone, with no
// credential, trusting the CA in caFile, its sha256 checked.
func readImage(ctx context.Context, bmh *metal3api.BareMetalHost, caFile string) error {
	img := bmh.Spec.Image
	if img == nil {
		return fmt.Errorf("ironic's agent on %s: the BareMetalHost names no image", bmh.Name)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("ironic's agent on %s: %w", bmh.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("ironic's agent on %s: %s holds no certificate", bmh.Name, caFile)
	}
	agent := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, img.URL, nil)
	if err != nil {
		return fmt.Errorf("ironic's agent on %s: %w", bmh.Name, err)
	}
	resp, err := agent.Do(req)
	if err != nil {
		return fmt.Errorf("ironic's agent on %s: %w", bmh.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("ironic's agent on %s: GET %s: %s: %s", bmh.Name, img.URL, resp.Status, msg)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, resp.Body); err != nil {
		return fmt.Errorf("ironic's agent on %s: read %s: %w", bmh.Name, img.URL, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); img.ChecksumType == metal3api.SHA256 && got != img.Checksum {
		return fmt.Errorf("ironic's agent on %s: %s has sha256 %s, its BareMetalHost says %s", bmh.Name, img.URL, got, img.Checksum)
	}
	return nil
}

// userData reads the cloud-config of a BareMetalHost's userData Secret (key userData, else
// value: Cluster-API's bootstrap data format).
func userData(ctx context.Context, c client.Client, bmh *metal3api.BareMetalHost) (UserData, error) {
	ns := bmh.Spec.UserData.Namespace
	if ns == "" {
		ns = bmh.Namespace
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: bmh.Spec.UserData.Name}, secret); err != nil {
		return UserData{}, fmt.Errorf("user data of BareMetalHost %s: %w", bmh.Name, err)
	}
	data, ok := secret.Data["userData"]
	if !ok {
		data = secret.Data["value"]
	}
	body, ok := strings.CutPrefix(string(data), "#cloud-config\n")
	if !ok {
		return UserData{}, fmt.Errorf("user data of BareMetalHost %s is not a #cloud-config", bmh.Name)
	}
	var cfg struct {
		Hostname          string   `json:"hostname"`
		SSHAuthorizedKeys []string `json:"ssh_authorized_keys"`
	}
	if err := yaml.UnmarshalStrict([]byte(body), &cfg); err != nil {
		return UserData{}, fmt.Errorf("user data of BareMetalHost %s: %w", bmh.Name, err)
	}
	return UserData{Hostname: cfg.Hostname, AuthorizedKeys: cfg.SSHAuthorizedKeys}, nil
}
