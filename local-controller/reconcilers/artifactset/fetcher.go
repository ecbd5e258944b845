package artifactset

import (
	"context"
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/sitecache"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// GlobalAPIFetchers returns a FetcherSource that reads the site's credentials from the Secret
// sitev1.GlobalAPISecretName in namespace (through reader, uncached: Secrets are not watched in
// full) and builds an artifact API client with them. A broken transfer is resumed up to retries
// times, the first after retryDelay.
func GlobalAPIFetchers(reader client.Reader, namespace string, retries int, retryDelay time.Duration) FetcherSource {
	return func(ctx context.Context) (sitecache.Fetcher, error) {
		key := client.ObjectKey{Namespace: namespace, Name: sitev1.GlobalAPISecretName}
		s := &corev1.Secret{}
		if err := reader.Get(ctx, key, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%w: Secret %s does not exist; it holds the keys %q, %q and optionally %q",
					ErrNotConfigured, key, sitev1.GlobalAPIURLKey, sitev1.GlobalAPITokenKey, sitev1.GlobalAPICAKey)
			}
			return nil, fmt.Errorf("read Secret %s: %w", key, err)
		}
		base, token := string(s.Data[sitev1.GlobalAPIURLKey]), string(s.Data[sitev1.GlobalAPITokenKey])
		if base == "" || token == "" {
			return nil, fmt.Errorf("%w: Secret %s lacks key %q or %q", ErrNotConfigured, key, sitev1.GlobalAPIURLKey, sitev1.GlobalAPITokenKey)
		}
		if u, err := url.Parse(base); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("%w: Secret %s key %q is %q, not an http(s) URL with a host", ErrNotConfigured, key, sitev1.GlobalAPIURLKey, base)
		}
		hc, err := rest.HTTPClientFor(&rest.Config{
			Host:            base,
			BearerToken:     token,
			TLSClientConfig: rest.TLSClientConfig{CAData: s.Data[sitev1.GlobalAPICAKey]},
		})
		if err != nil {
			return nil, fmt.Errorf("%w: HTTP client from Secret %s: %w", ErrNotConfigured, key, err)
		}
		hc.Timeout = 0 // transfers take as long as they take; a broken one is resumed
		return &artifactclient.Client{BaseURL: base, HTTP: hc, Retries: retries, RetryDelay: retryDelay}, nil
	}
}
