package artifactset

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/sitecache"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// reconcileCached writes the status of every artifact of the set from what the cache holds
// and returns how many are not cached.
func (r *Reconciler) reconcileCached(set *sitev1.ArtifactSet) int {
	previous := map[string]sitev1.CachedArtifact{}
	for _, a := range set.Status.Artifacts {
		previous[a.SHA256] = a
	}
	missing := 0
	set.Status.Artifacts = make([]sitev1.CachedArtifact, 0, len(set.Spec.Artifacts))
	for _, a := range set.Spec.Artifacts {
		e, ok, err := r.Cache.Check(a.SHA256)
		switch {
		case ok:
			set.Status.Artifacts = append(set.Status.Artifacts, cached(r.URLs, e))
			continue
		case errors.Is(err, sitecache.ErrCorrupt):
			r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "ArtifactCorrupted", "Verify",
				"cached %s failed verification and was removed; fetching it again: %v", describe(a), err)
		case err != nil:
			r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "CacheError", "Check", "check %s in the cache: %v", describe(a), err)
		}
		st := sitev1.CachedArtifact{SHA256: a.SHA256, Phase: sitev1.ArtifactPending, Message: "not in the site cache yet"}
		if p, ok := previous[a.SHA256]; ok && p.Phase == sitev1.ArtifactFailed {
			st = p // keep saying why the last attempt failed until the next one ends
		}
		set.Status.Artifacts = append(set.Status.Artifacts, st)
		missing++
	}
	summarize(set)
	return missing
}

// reconcileFetch fetches the missing artifacts from the global artifact API, one after the
// other, saving the status before each transfer so that progress shows while it runs.
func (r *Reconciler) reconcileFetch(ctx context.Context, set *sitev1.ArtifactSet, missing int, checkpoint func() error) error {
	fetcher, err := r.Fetchers(ctx)
	if errors.Is(err, ErrNotConfigured) {
		msg := fmt.Sprintf("cannot fetch %d artifacts: %v", missing, err)
		conditions.Set(&set.Status.Conditions, set.Generation, sitev1.ArtifactSetReadyCondition, metav1.ConditionFalse, sitev1.ReasonGlobalAPINotConfigured, msg)
		return nil // the Secret's watch brings the set back when it appears
	}
	if err != nil {
		return err
	}
	var errs []error
	for i := range set.Status.Artifacts {
		digest := set.Status.Artifacts[i].SHA256
		if set.Status.Artifacts[i].Phase == sitev1.ArtifactCached {
			continue
		}
		set.Status.Artifacts[i].Phase, set.Status.Artifacts[i].Message = sitev1.ArtifactFetching, "fetching from the global artifact API"
		summarize(set)
		// The checkpoint's patch decodes the answer into set: take no pointer into its status
		// across it.
		if err := checkpoint(); err != nil {
			return err
		}
		e, err := r.Cache.Fetch(ctx, digest, fetcher)
		if err != nil {
			set.Status.Artifacts[i].Phase, set.Status.Artifacts[i].Message = sitev1.ArtifactFailed, explainFetchError(err)
			errs = append(errs, err)
			continue
		}
		set.Status.Artifacts[i] = cached(r.URLs, e)
		r.Metrics.fetched(e.Size)
	}
	summarize(set)
	if len(errs) > 0 {
		return fmt.Errorf("fetch %d artifacts of ArtifactSet %s: %w", len(errs), client.ObjectKeyFromObject(set), errors.Join(errs...))
	}
	return nil
}

// unreachableHint is added to a fetch error that says the artifact API could not be reached.
const unreachableHint = "the site cannot reach the global artifact API: check the site's uplink and the URL the Site names (spec.artifactAPIURL); " +
	"a site without an uplink gets a release's artifacts from the site pack on its bootstrap image (edgefleet site image --with-release)"

// explainFetchError is a fetch error as the status says it: when the artifact API could not be
// reached at all (no route, refused, a name that does not resolve, a connection closed before
// an answer), with what to do about it. net/http says "no answer" with a *url.Error; how it
// words a closed connection varies (io.EOF, or "server closed idle connection" when the close
// races the request), so the hint keys on the *url.Error, not on the cause. A certificate the
// site does not trust is an answer of sorts and gets no such hint, nor does a transfer cut
// midway (io.ErrUnexpectedEOF while reading the body, which reached the API).
func explainFetchError(err error) string {
	var urlErr *url.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var authorityErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	if errors.As(err, &certErr) || errors.As(err, &authorityErr) || errors.As(err, &hostErr) {
		return err.Error()
	}
	if errors.As(err, &urlErr) || errors.As(err, &opErr) || errors.As(err, &dnsErr) {
		return err.Error() + "; " + unreachableHint
	}
	return err.Error()
}

// collectGarbage removes from the cache every artifact that no ArtifactSet lists.
func (r *Reconciler) collectGarbage(ctx context.Context) error {
	sets := &sitev1.ArtifactSetList{}
	if err := r.Client.List(ctx, sets); err != nil {
		return fmt.Errorf("list ArtifactSets to garbage-collect the cache: %w", err)
	}
	keep := map[string]bool{}
	for _, s := range sets.Items {
		for _, a := range s.Spec.Artifacts {
			keep[a.SHA256] = true
		}
	}
	removed, err := r.Cache.Keep(keep)
	if len(removed) > 0 {
		ctrl.LoggerFrom(ctx).Info("removed artifacts no ArtifactSet lists", "sha256", removed)
	}
	if err != nil {
		return fmt.Errorf("garbage-collect the cache: %w", err)
	}
	return nil
}

// summarize counts the cached artifacts and sets the Ready condition.
func summarize(set *sitev1.ArtifactSet) {
	var fetching, failed []string
	hint := "" // said once, not for every artifact
	set.Status.Cached, set.Status.Total = 0, int32(len(set.Spec.Artifacts))
	for _, a := range set.Status.Artifacts {
		switch a.Phase {
		case sitev1.ArtifactCached:
			set.Status.Cached++
		case sitev1.ArtifactFailed:
			msg, unreachable := strings.CutSuffix(a.Message, "; "+unreachableHint)
			if unreachable {
				hint = "; " + unreachableHint
			}
			failed = append(failed, "sha256:"+a.SHA256+": "+msg)
		default:
			fetching = append(fetching, "sha256:"+a.SHA256)
		}
	}
	switch {
	case len(failed) > 0:
		conditions.Set(&set.Status.Conditions, set.Generation, sitev1.ArtifactSetReadyCondition, metav1.ConditionFalse, sitev1.ReasonFetchFailed,
			fmt.Sprintf("%d of %d cached; %d failed, retried with a growing delay: %s%s", set.Status.Cached, set.Status.Total, len(failed), strings.Join(failed, "; "), hint))
	case len(fetching) > 0:
		conditions.Set(&set.Status.Conditions, set.Generation, sitev1.ArtifactSetReadyCondition, metav1.ConditionFalse, sitev1.ReasonFetching,
			fmt.Sprintf("%d of %d cached; fetching %s", set.Status.Cached, set.Status.Total, strings.Join(fetching, ", ")))
	default:
		conditions.Set(&set.Status.Conditions, set.Generation, sitev1.ArtifactSetReadyCondition, metav1.ConditionTrue, sitev1.ReasonAllCached,
			fmt.Sprintf("all %d artifacts cached and verified", set.Status.Total))
	}
}

func cached(urls sitecache.URLs, e sitecache.Entry) sitev1.CachedArtifact {
	return sitev1.CachedArtifact{SHA256: e.SHA256, Phase: sitev1.ArtifactCached, Size: e.Size, URL: urls.URL(e.SHA256)}
}

func describe(a sitev1.ArtifactRef) string {
	if a.Name != "" {
		return fmt.Sprintf("%s (sha256:%s)", a.Name, a.SHA256)
	}
	return "sha256:" + a.SHA256
}
