// Command uidemo runs the web UI on this machine over a simulated fleet, without root: a global
// control plane and one site control plane, bin/global-controller serving the UI over HTTPS (a
// certificate made for 127.0.0.1), -sites stores whose local controllers and BPAs a
// sitesim.ClusterSimulator plays (each operation takes -work-time; one store's patch fails),
// releases r0 (installed) and r1, a patch campaign to r1 that runs a few stores at a time, and
// tokens of a fleet admin and a fleet viewer to sign in with. It keeps everything running until
// Ctrl-C and stops all it started. Run it with `make ui-demo`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const ns = "fleet"

func main() {
	var (
		sites    = flag.Int("sites", 40, "Simulated stores.")
		workTime = flag.Duration("work-time", 15*time.Second, "How long each store takes for an operation.")
	)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *sites, *workTime); err != nil {
		fmt.Fprintln(os.Stderr, "uidemo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, workTime time.Duration) (err error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "bin", "uidemo")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	step("Starting a global control plane, a site control plane for the stores, and the global controller (UI over HTTPS)")
	fleet, err := testfleet.StartFleet(ctx, testfleet.FleetOptions{Dir: dir, Sites: []string{"sim"}, TLS: true,
		ControllerArgs: []string{"--site-heartbeat-interval=5s", "--site-operation-poll-interval=1s"}})
	if err != nil {
		return err
	}
	defer func() {
		step("Stopping the global controller and the control planes")
		err = errors.Join(err, fleet.Stop())
	}()
	for name, role := range map[string]string{"admin": "edgefleet-fleet-admin", "viewer": "edgefleet-fleet-viewer"} {
		token, err := fleet.Token(ctx, "edgefleet-system", "ui-"+name, role)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".token"), []byte(token), 0o600); err != nil {
			return err
		}
	}

	step(fmt.Sprintf("Simulating the stores' local controllers and BPAs (%s per operation; store-00005's patch fails)", workTime))
	sim := &sitesim.ClusterSimulator{WorkTime: workTime, Bootstrap: true, Fail: func(site, op string) bool { return site == "store-00005" && op != "" }}
	if err := sim.Start(ctx, fleet.Sites["sim"].Config); err != nil {
		return err
	}
	step("Uploading stand-in artifacts and creating releases r0 and r1")
	if err := fleet.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	if err := fleet.CreateSimulatedReleases(ctx, ns, map[string]string{"r0": "v1.36.2", "r1": "v1.36.3"}); err != nil {
		return err
	}
	step(fmt.Sprintf("Registering %d stores at release r0", n))
	if _, err := fleet.RegisterSimulatedSites(ctx, fleet.Sites["sim"], ns, "store", n, "r0", map[string]string{"chain": "stores"}); err != nil {
		return err
	}
	step("Starting a patch campaign to r1: one canary, then three stores at a time")
	one, three := intstr.FromInt32(1), intstr.FromInt32(3)
	camp := &fleetv1.Campaign{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patch-stores"},
		Spec: fleetv1.CampaignSpec{Action: fleetv1.ActionPatch, Release: "r1",
			Targets: fleetv1.CampaignTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"chain": "stores"}}},
			Strategy: fleetv1.CampaignStrategy{Canaries: &one, MaxConcurrency: &three,
				FailureBudget: &fleetv1.FailureBudget{MaxFailures: intstr.FromInt32(2)}}},
	}
	if err := fleet.Global.Client.Create(ctx, camp); err != nil {
		return err
	}
	fmt.Printf(`
The web UI: %[1]s/ui/?namespace=%[2]s
  Its certificate is made for 127.0.0.1 and signed by its own CA (%[3]s): your browser asks you
  to accept it once.
  Sign in as a fleet admin with the token in %[4]s (pause, resume, abort the campaign),
  or as a fleet viewer with the token in %[5]s (sees everything, may change nothing).

Everything keeps running until you press Ctrl-C. In another terminal:

  export KUBECONFIG=%[6]s
  bin/kubectl get sites,campaigns -n %[2]s
  bin/kubectl patch campaign patch-stores -n %[2]s --type merge -p '{"spec":{"paused":true}}'

Global controller log: %[7]s
`, fleet.APIURL, ns, fleet.APICAFile, filepath.Join(dir, "admin.token"), filepath.Join(dir, "viewer.token"), fleet.Kubeconfig(), fleet.ControllerLog())
	<-ctx.Done()
	fmt.Println()
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }
