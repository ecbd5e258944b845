package testfleet

import (
	"context"
	"fmt"
	"path/filepath"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/metal3"
)

// StartSiteMetal3 starts Metal3's operator in test mode watching the site's edgefleet-hosts
// (BareMetalHosts and their BMC Secrets) and edgefleet-system (the hosts' first-boot data)
// namespaces; Fleet.Stop stops it. With the site's BPA (StartBPA) and real test hosts
// (HostNet.PlayIronic) the application cluster is built for real.
func (f *Fleet) StartSiteMetal3(ctx context.Context, site string) error {
	cp, ok := f.Sites[site]
	if !ok {
		return fmt.Errorf("no site control plane %q", site)
	}
	m3, err := metal3.Start(ctx, cp, metal3.Options{Namespaces: []string{sitev1.HostsNamespace, sitev1.InfoNamespace}, Dir: filepath.Join(f.Dir, site+"-metal3")})
	if err != nil {
		return err
	}
	f.stops = append(f.stops, m3.Stop)
	return nil
}
