package testenv

import (
	"context"
	"fmt"
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
// which writes nothing anywhere, so when a BareMetalHost reaches provisioned, PlayIronic writes
// the host's first-boot data — the hostname and ssh_authorized_keys of the cloud-config in the
// BareMetalHost's userData Secret — onto the host's disk and boots it, as a real host would
// come up after Ironic wrote the image. A host whose BareMetalHost leaves provisioned is powered
// off. It polls c until ctx is done or the returned stop is called; errors go to report.
func (hn *HostNet) PlayIronic(ctx context.Context, c client.Client, namespace string, report func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		booted := map[string]bool{}
		for {
			for _, h := range hn.Hosts {
				on, err := hn.playIronic(ctx, c, namespace, h, booted[h.Name])
				if err != nil && ctx.Err() == nil {
					report(err)
				}
				booted[h.Name] = on
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// playIronic brings one host in line with its BareMetalHost; it reports whether the host is
// on (booted by PlayIronic).
func (hn *HostNet) playIronic(ctx context.Context, c client.Client, namespace string, h *Host, on bool) (bool, error) {
	bmh := &metal3api.BareMetalHost{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: h.Name}, bmh); client.IgnoreNotFound(err) != nil {
		return on, fmt.Errorf("ironic of test host %s: %w", h.Name, err)
	}
	provisioned := bmh.Status.Provisioning.State == metal3api.StateProvisioned && bmh.Spec.UserData != nil
	switch {
	case provisioned && !on:
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
