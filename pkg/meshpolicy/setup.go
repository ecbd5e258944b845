package meshpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Modes of --istio.
const (
	// ModeAuto keeps the policies where Istio's CRDs are installed and does nothing elsewhere.
	ModeAuto = "auto"
	// ModeOn keeps the policies, and fails to start where Istio's CRDs are not installed.
	ModeOn = "on"
	// ModeOff never touches Istio's objects (policies kept before stay as they are).
	ModeOff = "off"
)

// ValidateMode names a mode that is none of ModeAuto, ModeOn, ModeOff.
func ValidateMode(mode string) error {
	if !slices.Contains([]string{ModeAuto, ModeOn, ModeOff}, mode) {
		return fmt.Errorf("--istio must be %q, %q or %q, got %q", ModeAuto, ModeOn, ModeOff, mode)
	}
	return nil
}

// Installed reports whether the API server of cfg serves PeerAuthentication and
// AuthorizationPolicy in security.istio.io/v1, asking its discovery within timeout.
func Installed(ctx context.Context, cfg *rest.Config, timeout time.Duration) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("discovery client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	gv := securityv1.SchemeGroupVersion
	raw, err := dc.RESTClient().Get().AbsPath("/apis", gv.Group, gv.Version).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	var pa, ap bool
	for _, r := range list.APIResources {
		pa = pa || r.Name == "peerauthentications"
		ap = ap || r.Name == "authorizationpolicies"
	}
	return pa && ap, nil
}

// Setup adds the Reconciler of c to mgr as mode says: with ModeAuto only where Istio's CRDs
// are installed (it logs once when they are not), with ModeOn always (an error where they are
// not), never with ModeOff. Every request is bounded by timeout.
func Setup(ctx context.Context, mgr ctrl.Manager, mode string, c Component, timeout time.Duration) error {
	if err := ValidateMode(mode); err != nil {
		return err
	}
	log := mgr.GetLogger().WithName("meshpolicy")
	if mode == ModeOff {
		log.Info("mesh policies off (--istio=off)")
		return nil
	}
	ok, err := Installed(ctx, mgr.GetConfig(), timeout)
	switch {
	case err != nil:
		return fmt.Errorf("mesh policies: %w", err)
	case !ok && mode == ModeOn:
		return fmt.Errorf("--istio=on, but the API server does not serve %s peerauthentications and authorizationpolicies: install Istio's CRDs, or use --istio=auto", securityv1.SchemeGroupVersion)
	case !ok:
		log.Info("Istio CRDs absent, mesh policies off")
		return nil
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Component: c, Timeout: timeout}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up mesh policy reconciler: %w", err)
	}
	log.Info("keeping mesh policies current", "namespace", c.Namespace, "name", c.Name)
	return nil
}

// Uninstall deletes the PeerAuthentication and AuthorizationPolicy named name in namespace,
// the policies a Reconciler of that Component kept; where Istio's CRDs are not installed it
// does nothing. Every request is bounded by timeout. It is the documented uninstall's step
// (--uninstall-mesh-policies): run it before the controller's own objects are deleted.
func Uninstall(ctx context.Context, cfg *rest.Config, namespace, name string, timeout time.Duration) error {
	log := ctrl.LoggerFrom(ctx).WithName("meshpolicy")
	ok, err := Installed(ctx, cfg, timeout)
	switch {
	case err != nil:
		return fmt.Errorf("uninstall mesh policies: %w", err)
	case !ok:
		log.Info("Istio CRDs absent, no mesh policy to remove")
		return nil
	}
	s := runtime.NewScheme()
	if err := securityv1.AddToScheme(s); err != nil {
		return fmt.Errorf("uninstall mesh policies: scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("uninstall mesh policies: client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	var errs []error
	for _, o := range []client.Object{&securityv1.PeerAuthentication{ObjectMeta: meta}, &securityv1.AuthorizationPolicy{ObjectMeta: meta}} {
		kind, _ := parts(o)
		err := c.Delete(ctx, o)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, err))
		default:
			log.Info("removed mesh policy", "kind", kind, "namespace", namespace, "name", name)
		}
	}
	return errors.Join(errs...)
}

// SplitList splits a comma-separated flag value of principals or ranges, dropping empty items.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
