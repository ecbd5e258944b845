package testfleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// BPA is a site's bin/bpa run by a Fleet.
type BPA struct {
	// Log is the BPA's log file.
	Log string
	// Metrics is the URL of its Prometheus metrics.
	Metrics string
}

// Reconciles is how many reconciles of the BPA's controller named controller have ended, in
// any result (controller-runtime's controller_runtime_reconcile_total): the BPA's install or
// pass over a cluster is one reconcile of "bpa-applicationcluster".
func (b BPA) Reconciles(ctx context.Context, controller string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.Metrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("BPA metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("BPA metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("BPA metrics: %w", err)
	}
	n := 0.0
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == controller {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n), nil
}

// StartBPA starts bin/bpa for a site, with the site control plane's admin kubeconfig, its
// secrets in vault (with the dev server's root token: --vault-auth=token, the token passed in
// the environment), retrying every two seconds, and waits until it is ready. A BPA running for
// the site is stopped first.
func (f *Fleet) StartBPA(ctx context.Context, site string, vault *testvault.Vault, args ...string) (BPA, error) {
	cp, ok := f.Sites[site]
	if !ok {
		return BPA{}, fmt.Errorf("no site control plane %q", site)
	}
	if err := f.StopBPA(site); err != nil {
		return BPA{}, err
	}
	b := BPA{Log: filepath.Join(f.Dir, site+"-bpa.log")}
	if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sitev1.InfoNamespace}})); err != nil {
		return b, fmt.Errorf("create namespace %s on %s: %w", sitev1.InfoNamespace, site, err)
	}
	// It trusts the site cache's CA, made here when the local controller has not started yet.
	if err := f.ensureSiteCacheCertificate(site); err != nil {
		return b, err
	}
	ports, err := proc.FreePorts(2)
	if err != nil {
		return b, err
	}
	health := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	b.Metrics = "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
	p, err := proc.Start(site+" BPA", filepath.Join(f.root, "bin", "bpa"), append(append(leaderElection(),
		"--kubeconfig", f.SiteKubeconfig(site),
		"--site-cache-ca-file", f.LocalController(site).CacheCAFile,
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--vault-addr", vault.Addr,
		"--vault-auth", "token",
		"--retry-interval", "2s"),
		args...), append(os.Environ(), vault.Env()...), b.Log)
	if err != nil {
		return b, err
	}
	f.bpas[site] = p
	if err := p.WaitReady(ctx, health+"/readyz"); err != nil {
		return b, errors.Join(err, f.StopBPA(site))
	}
	return b, nil
}

// StopBPA stops a site's BPA (SIGTERM, then SIGKILL after 10s).
func (f *Fleet) StopBPA(site string) error {
	defer delete(f.bpas, site)
	return f.bpas[site].Stop()
}

// KillBPA kills a site's BPA with SIGKILL, as a crash would.
func (f *Fleet) KillBPA(site string) error {
	defer delete(f.bpas, site)
	return f.bpas[site].Kill()
}
