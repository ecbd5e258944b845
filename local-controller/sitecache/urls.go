package sitecache

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SignatureParam is the query parameter of a signed URL (URLs.URL).
const SignatureParam = "signature"

// URLKeySecret is the Secret, in the local controller's namespace, holding the key the site
// cache signs its URLs with (key URLKeyField). Deleting it, and restarting the local
// controller, revokes every URL signed before.
const (
	URLKeySecret = "edgefleet-site-cache-url-key"
	URLKeyField  = "key"
	urlKeySize   = 32
)

// URLs are the URLs of the site cache's content. Each is signed: it names one digest and
// carries an HMAC-SHA256 of it under the site's key, so that a reader that has no credential
// of the site — Ironic's agent on a host being provisioned, downloading the OS image its
// BareMetalHost names — reads that content, and nothing else, without one. A signed URL does
// not expire: what it reads never changes and holds no secret (OS images, packages, charts).
type URLs struct {
	base string
	key  []byte
}

// NewURLs returns the URLs of a cache served at base (e.g. "https://10.0.0.2:8180"), signed
// with key (at least 32 bytes).
func NewURLs(base string, key []byte) (URLs, error) {
	if len(key) < urlKeySize {
		return URLs{}, fmt.Errorf("site cache URL key: %d bytes, want at least %d", len(key), urlKeySize)
	}
	return URLs{base: strings.TrimSuffix(base, "/"), key: key}, nil
}

// URL is the signed URL of digest.
func (u URLs) URL(digest string) string {
	return u.base + PathPrefix + digest + "?" + SignatureParam + "=" + hex.EncodeToString(u.signature(digest))
}

func (u URLs) signature(digest string) []byte {
	m := hmac.New(sha256.New, u.key)
	m.Write([]byte("edgefleet-site-cache sha256:" + digest))
	return m.Sum(nil)
}

// signed reports whether sig (hex) is the signature of digest.
func (u URLs) signed(digest, sig string) bool {
	got, err := hex.DecodeString(sig)
	return err == nil && len(u.key) > 0 && hmac.Equal(got, u.signature(digest))
}

// EnsureURLKey returns the site cache's URL key from Secret URLKeySecret in namespace ns of the
// site cluster, making it the first time (the site's etcd encrypts Secrets at rest). A Secret
// whose key is too short is an error naming it: every URL signed with it would break.
func EnsureURLKey(ctx context.Context, c client.Client, ns string) ([]byte, error) {
	for range 2 { // a second pass reads what another replica made first
		s := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: URLKeySecret}, s)
		if err == nil {
			if k := s.Data[URLKeyField]; len(k) >= urlKeySize {
				return k, nil
			}
			return nil, fmt.Errorf("site cache URL key: Secret %s/%s: key %q holds %d bytes, want at least %d: delete the Secret to make a new key (URLs signed before stop working)", ns, URLKeySecret, URLKeyField, len(s.Data[URLKeyField]), urlKeySize)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("site cache URL key: %w", err)
		}
		key := make([]byte, urlKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: URLKeySecret, Labels: map[string]string{"app.kubernetes.io/managed-by": "edgefleet-local-controller"}},
			Data:       map[string][]byte{URLKeyField: key},
		}
		err = c.Create(ctx, s)
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("site cache URL key: create Secret %s/%s: %w", ns, URLKeySecret, err)
		}
	}
	return nil, errors.New("site cache URL key: the Secret was made and gone again; try again")
}
