package setup

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os/exec"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/edgefleet/edgefleet/local-controller/siteinit"
)

// SiteInitOptions are the settings of `local-controller site-init`, run by the bootstrap
// machine at every boot before its site control plane starts.
type SiteInitOptions struct {
	siteinit.Options
	// RestartChanged restarts the stack's services that read a file the run changed
	// (siteinit.RestartUnits) with systemctl try-restart: the renewal timer's run, while the
	// stack is up. At boot the services start after site-init and read the files anyway.
	RestartChanged bool
	// RestartTimeout bounds that restart (each service waits until it is healthy).
	RestartTimeout time.Duration
}

// DefaultSiteInitOptions returns the defaults of `local-controller site-init`.
func DefaultSiteInitOptions() SiteInitOptions {
	return SiteInitOptions{Options: siteinit.Options{Dir: "/var/lib/edgefleet/site", AddressWait: 30 * time.Second}, RestartTimeout: 10 * time.Minute}
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
	fs.BoolVar(&o.RestartChanged, "restart-changed", o.RestartChanged, "Restart (systemctl try-restart) the site stack's services that read a file this run changed, e.g. a renewed client certificate (edgefleet-site-renew.service).")
	fs.DurationVar(&o.RestartTimeout, "restart-timeout", o.RestartTimeout, "Bound of the restart of --restart-changed.")
}

// RunSiteInit makes or completes the site's files and logs what changed.
func RunSiteInit(ctx context.Context, o SiteInitOptions) error {
	if o.RestartChanged && o.RestartTimeout <= 0 {
		return fmt.Errorf("site-init: --restart-timeout must be positive with --restart-changed, got %s", o.RestartTimeout)
	}
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
	units := siteinit.RestartUnits(res.Changed)
	if !o.RestartChanged || len(units) == 0 {
		return nil
	}
	log.Info("Restarting the services that read the changed files", "units", fmt.Sprint(units))
	ctx, cancel := context.WithTimeout(ctx, o.RestartTimeout)
	defer cancel()
	// One unit at a time, in the stack's start order: each waits until it is healthy.
	for _, u := range units {
		if out, err := exec.CommandContext(ctx, "systemctl", "try-restart", u).CombinedOutput(); err != nil {
			return fmt.Errorf("site-init: restart %s for its new files: %w: %s", u, err, bytes.TrimSpace(out))
		}
	}
	return nil
}
