package enroll

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Names on the site cluster.
const (
	// ServiceAccount is the identity the global controller gets on the site; deploy/rbac/site
	// binds its Role to it.
	ServiceAccount = "edgefleet-global"
	// StateConfigMap records, in sitev1.InfoNamespace, that the site enrolled.
	StateConfigMap = "edgefleet-enrollment"
)

// Options say where and as what the site enrolls.
type Options struct {
	// GlobalURL is the global controller's API (https://…).
	GlobalURL string
	// CA is the PEM bundle the global controller's certificate must chain to; nothing else is
	// trusted.
	CA []byte
	// Token is the enrollment token.
	Token string
	// Namespace and Site name the Site on the global cluster; Machine is this machine's name.
	Namespace, Site, Machine string
	// SiteServer is the URL at which the global controller reaches the site's API server; the
	// admin config's host when empty.
	SiteServer string
	// AccessManifest is deploy/rbac/site/global-access.yaml, applied as shipped.
	AccessManifest []byte
	// CredentialTTL is the lifetime of the ServiceAccount token handed over.
	CredentialTTL time.Duration
	// RequestTimeout bounds each request to the global controller; RetryDelay is the first
	// wait after a failed attempt, doubling up to MaxRetryDelay. The context's deadline ends it.
	RequestTimeout, RetryDelay, MaxRetryDelay time.Duration
	Log                                       logr.Logger
}

// PermanentError is an enrollment the global controller refused, or a TLS peer that is not the
// pinned one: retrying cannot help.
type PermanentError struct {
	Reason, Message string
}

func (e *PermanentError) Error() string {
	if e.Reason == "" {
		return "enrollment refused: " + e.Message
	}
	return fmt.Sprintf("enrollment refused (%s): %s", e.Reason, e.Message)
}

// Enroll enrolls the site whose admin config is admin, unless it did already.
func Enroll(ctx context.Context, admin *rest.Config, opts Options) (restv1.Enrolled, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return restv1.Enrolled{}, fmt.Errorf("client of the site cluster: %w", err)
	}
	if done, ok, err := enrolled(ctx, c, opts); err != nil || ok {
		return done, err
	}
	if err := applyAccess(ctx, c, opts.AccessManifest); err != nil {
		return restv1.Enrolled{}, err
	}
	kubeconfig, err := credential(ctx, admin, opts)
	if err != nil {
		return restv1.Enrolled{}, err
	}
	hc, err := pinnedClient(opts.CA, opts.RequestTimeout)
	if err != nil {
		return restv1.Enrolled{}, err
	}
	body, err := json.Marshal(restv1.Enroll{Namespace: opts.Namespace, Site: opts.Site, Machine: opts.Machine, Kubeconfig: string(kubeconfig)})
	if err != nil {
		return restv1.Enrolled{}, err
	}
	delay := opts.RetryDelay
	for attempt := 1; ; attempt++ {
		got, err := post(ctx, hc, opts, body)
		if err == nil {
			return got, record(ctx, c, opts, got)
		}
		var perm *PermanentError
		if errors.As(err, &perm) {
			return restv1.Enrolled{}, err
		}
		opts.Log.Info("Enrollment attempt failed; retrying", "attempt", attempt, "error", err.Error(), "retryIn", delay)
		select {
		case <-ctx.Done():
			return restv1.Enrolled{}, fmt.Errorf("enroll site %s/%s at %s: gave up after %d attempts: %w", opts.Namespace, opts.Site, opts.GlobalURL, attempt, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, opts.MaxRetryDelay)
	}
}

// enrolled reads the state a finished enrollment left.
func enrolled(ctx context.Context, c client.Client, opts Options) (restv1.Enrolled, bool, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: StateConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return restv1.Enrolled{}, false, nil
	case err != nil:
		return restv1.Enrolled{}, false, fmt.Errorf("read enrollment state %s/%s: %w", sitev1.InfoNamespace, StateConfigMap, err)
	}
	d := cm.Data
	if d["namespace"] != opts.Namespace || d["site"] != opts.Site || d["global"] != opts.GlobalURL {
		return restv1.Enrolled{}, false, nil
	}
	return restv1.Enrolled{Namespace: d["namespace"], Site: d["site"], Secret: d["secret"], VaultEntry: d["vaultEntry"], Fingerprint: d["fingerprint"]}, true, nil
}

// record keeps, on the site, that the enrollment is done.
func record(ctx context.Context, c client.Client, opts Options, got restv1.Enrolled) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: StateConfigMap}}
	data := map[string]string{"namespace": got.Namespace, "site": got.Site, "global": opts.GlobalURL, "secret": got.Secret, "vaultEntry": got.VaultEntry, "fingerprint": got.Fingerprint,
		"machine": opts.Machine, "enrolled": time.Now().UTC().Format(time.RFC3339)}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); apierrors.IsNotFound(err) {
		cm.Data = data
		err = c.Create(ctx, cm)
		if err != nil {
			return fmt.Errorf("record enrollment in %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("read enrollment state %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	cm.Data = data
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("record enrollment in %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// applyAccess creates the namespaces of the manifest's objects (edgefleet-system,
// edgefleet-hosts) when missing, and every object of manifest, or updates them to the manifest's
// content.
func applyAccess(ctx context.Context, c client.Client, manifest []byte) error {
	objs, err := decodeManifest(manifest)
	if err != nil {
		return err
	}
	namespaces := []string{sitev1.InfoNamespace}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	for _, name := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	for _, o := range objs {
		err := c.Create(ctx, o.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err = c.Get(ctx, client.ObjectKeyFromObject(o), cur); err == nil {
				upd := o.DeepCopy()
				upd.SetResourceVersion(cur.GetResourceVersion())
				err = c.Update(ctx, upd)
			}
		}
		if err != nil {
			return fmt.Errorf("apply %s %s/%s of the site access manifest: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// decodeManifest reads the objects of a multi-document YAML manifest.
func decodeManifest(manifest []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decode the site access manifest: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		return nil, errors.New("the site access manifest holds no objects")
	}
	return objs, nil
}

// credential mints a token of ServiceAccount and returns a kubeconfig with it: inline CA and
// token only, as the global controller requires.
func credential(ctx context.Context, admin *rest.Config, opts Options) ([]byte, error) {
	if len(admin.CAData) == 0 {
		return nil, errors.New("the site's admin kubeconfig has no certificate-authority-data: the global controller needs the site cluster's CA")
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("client of the site cluster: %w", err)
	}
	secs := int64(opts.CredentialTTL / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(sitev1.InfoNamespace).CreateToken(ctx, ServiceAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of ServiceAccount %s/%s: %w", sitev1.InfoNamespace, ServiceAccount, err)
	}
	server := opts.SiteServer
	if server == "" {
		server = admin.Host
	}
	return Kubeconfig(server, admin.CAData, tr.Status.Token)
}

// Kubeconfig is the kubeconfig handed to the global controller.
func Kubeconfig(server string, ca []byte, token string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["site"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[ServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["site"] = &clientcmdapi.Context{Cluster: "site", AuthInfo: ServiceAccount}
	kc.CurrentContext = "site"
	return clientcmd.Write(*kc)
}

// pinnedClient trusts only the certificates of ca.
func pinnedClient(ca []byte, timeout time.Duration) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the pinned CA holds no PEM certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Proxy: http.ProxyFromEnvironment}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

// maxAnswer bounds the global controller's answer.
const maxAnswer = 64 << 10

// post makes one attempt. Refusals (4xx other than 408, 409, 429) and a peer that fails the
// pinned CA are permanent; anything else may pass on a later attempt.
func post(ctx context.Context, hc *http.Client, opts Options, body []byte) (restv1.Enrolled, error) {
	var out restv1.Enrolled
	if !strings.HasPrefix(opts.GlobalURL, "https://") {
		return out, &PermanentError{Message: fmt.Sprintf("the global URL %q is not https://: the token must not cross a network in clear", opts.GlobalURL)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(opts.GlobalURL, "/")+"/api/v1/enroll", bytes.NewReader(body))
	if err != nil {
		return out, &PermanentError{Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+opts.Token)
	resp, err := hc.Do(req)
	if err != nil {
		var unknown x509.UnknownAuthorityError
		var invalid x509.CertificateInvalidError
		var hostname x509.HostnameError
		if errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) {
			return out, &PermanentError{Reason: "UntrustedServer", Message: fmt.Sprintf("%s does not present a certificate of the pinned CA: %v", opts.GlobalURL, err)}
		}
		return out, fmt.Errorf("POST %s/api/v1/enroll: %w", opts.GlobalURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return out, fmt.Errorf("read the answer of %s: %w", opts.GlobalURL, err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &out); err != nil {
			return out, fmt.Errorf("answer of %s: %w", opts.GlobalURL, err)
		}
		return out, nil
	}
	var e restv1.Error
	if json.Unmarshal(data, &e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(data))
	}
	if Retryable(resp.StatusCode) {
		return out, fmt.Errorf("%s answered %s: %s", opts.GlobalURL, resp.Status, e.Message)
	}
	return out, &PermanentError{Reason: e.Reason, Message: e.Message}
}

// Retryable says whether an answer of this status may turn out otherwise later.
func Retryable(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
		return true
	case status == http.StatusNotFound:
		return true // the Site may not be created yet, or the controller is older
	case status >= 500:
		return true
	}
	return false
}
