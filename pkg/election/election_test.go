package election_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/edgefleet/edgefleet/pkg/election"
)

func TestFlagsAndValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string // in Validate's error; "" for none
	}{
		"the defaults":              {nil, ""},
		"longer timings":            {[]string{"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s", "--leader-elect-retry-period=5s"}, ""},
		"a renew deadline too long": {[]string{"--leader-elect-renew-deadline=15s"}, "--leader-elect-lease-duration (15s) must be longer than --leader-elect-renew-deadline (15s)"},
		"a retry period too long":   {[]string{"--leader-elect-retry-period=10s"}, "--leader-elect-renew-deadline (10s) must be longer than --leader-elect-retry-period (10s)"},
		"no retry period":           {[]string{"--leader-elect-retry-period=0s"}, "--leader-elect-retry-period must be positive"},
		"off, timings not checked":  {[]string{"--leader-elect=false", "--leader-elect-retry-period=0s"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			o := election.Defaults()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	o := election.Options{Enabled: true, LeaseDuration: time.Minute, RenewDeadline: 45 * time.Second, RetryPeriod: 5 * time.Second}
	var mopts ctrl.Options
	o.Apply(&mopts, "edgefleet-bpa", "site-system")
	if !mopts.LeaderElection || mopts.LeaderElectionID != "edgefleet-bpa" || mopts.LeaderElectionNamespace != "site-system" || !mopts.LeaderElectionReleaseOnCancel {
		t.Errorf("election %v, id %q, namespace %q, release on cancel %v; want on, edgefleet-bpa, site-system, released", mopts.LeaderElection, mopts.LeaderElectionID, mopts.LeaderElectionNamespace, mopts.LeaderElectionReleaseOnCancel)
	}
	if mopts.LeaseDuration == nil || *mopts.LeaseDuration != time.Minute || mopts.RenewDeadline == nil || *mopts.RenewDeadline != 45*time.Second ||
		mopts.RetryPeriod == nil || *mopts.RetryPeriod != 5*time.Second {
		t.Errorf("timings %v %v %v; want 1m, 45s, 5s", mopts.LeaseDuration, mopts.RenewDeadline, mopts.RetryPeriod)
	}
}
