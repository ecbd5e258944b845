package setup

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/edgefleet/edgefleet/local-controller/siteinit"
)

// SiteInitOptions are the settings of `local-controller site-init`, run by the bootstrap
// machine at every boot before its site control plane starts.
type SiteInitOptions struct {
	siteinit.Options
}

// DefaultSiteInitOptions returns the defaults of `local-controller site-init`.
func DefaultSiteInitOptions() SiteInitOptions {
	return SiteInitOptions{siteinit.Options{Dir: "/var/lib/edgefleet/site", AddressWait: 30 * time.Second}}
}

// AddFlags binds the options to flags.
func (o *SiteInitOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Dir, "dir", o.Dir, "Directory of the site control plane's PKI, kubeconfigs, encryption configuration and stack.env (made 0700).")
	fs.Func("address", "Comma-separated extra IPs or DNS names the site API server's certificate is valid for (besides loopback and the machine's addresses).", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.Addresses = append(o.Addresses, a)
			}
		}
		return nil
	})
	fs.DurationVar(&o.AddressWait, "address-wait", o.AddressWait, "How long to wait for the machine's first non-loopback address.")
}

// RunSiteInit makes or completes the site's files and logs what changed.
func RunSiteInit(ctx context.Context, o SiteInitOptions) error {
	res, err := siteinit.Run(ctx, o.Options)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("site-init")
	if len(res.Changed) == 0 {
		log.Info("Site files up to date", "dir", o.Dir, "address", res.Address.String())
		return nil
	}
	log.Info("Site files written", "dir", o.Dir, "address", res.Address.String(), "changed", fmt.Sprint(res.Changed))
	return nil
}
