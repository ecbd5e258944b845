package clusterkms_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/clusterkms"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// fakeVault is a fake of Vault's logical API holding transit keys by path; err, when set,
// fails every call.
type fakeVault struct {
	mu     sync.Mutex
	keys   map[string]map[string]any
	writes int
	err    error
}

func (v *fakeVault) ReadWithContext(_ context.Context, path string) (*vaultapi.Secret, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return nil, v.err
	}
	if k, ok := v.keys[path]; ok {
		return &vaultapi.Secret{Data: k}, nil
	}
	return nil, nil
}

func (v *fakeVault) WriteWithContext(_ context.Context, path string, data map[string]any) (*vaultapi.Secret, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return nil, v.err
	}
	v.writes++
	v.keys[path] = data
	return nil, nil
}

func options() clusterkms.Options {
	return clusterkms.Options{VaultAddr: "https://vault.site-a:8200", VaultCA: []byte("CA"), AuthMount: "kubernetes-site-a", Role: "edgefleet-kms",
		TransitMount: "transit", KeyPrefix: "site-a-", TokenTTL: time.Hour}
}

// TestSource runs the source against a real API server (ServiceAccounts, the TokenRequest API)
// and a fake Vault.
func TestSource(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "site"})
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	ctx := t.Context()
	vault := &fakeVault{keys: map[string]map[string]any{"transit/keys/site-a-old": {"latest_version": 3}}}
	now := time.Now()
	clock := func() time.Time { return now }
	src := clusterkms.New(options(), vault, kube, ns, clock)
	ac := &sitev1.ApplicationCluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "edgefleet-system"}}

	kms, renew, err := src.For(ctx, ac)
	if err != nil {
		t.Fatal(err)
	}
	if kms.TransitKey != "site-a-edge" || kms.VaultAddr != "https://vault.site-a:8200" || kms.AuthMount != "kubernetes-site-a" ||
		kms.Role != "edgefleet-kms" || kms.TransitMount != "transit" || string(kms.VaultCA) != "CA" {
		t.Errorf("KMS %+v", kms.KMSValues)
	}
	if got := vault.keys["transit/keys/site-a-edge"]["type"]; got != "aes256-gcm96" {
		t.Errorf("the cluster's transit key made with type %v, want aes256-gcm96", got)
	}
	// The token is the ServiceAccount's: the API server says whose it is.
	sa, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "edgefleet-kms-edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if key, ok := clusterkms.ClusterOf(sa); !ok || key != client.ObjectKeyFromObject(ac) {
		t.Errorf("the ServiceAccount's labels %v name cluster %v (%v), want %v", sa.Labels, key, ok, client.ObjectKeyFromObject(ac))
	}
	review, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(kms.Token)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if who := review.Status.User.Username; !review.Status.Authenticated || who != "system:serviceaccount:"+ns+":edgefleet-kms-edge" {
		t.Errorf("the token is %q's (authenticated %v)", who, review.Status.Authenticated)
	}
	if d := renew.Sub(now); d < 29*time.Minute || d > 31*time.Minute {
		t.Errorf("renew in %s, want half the hour-long token's life", d)
	}

	t.Run("the same token while less than half its life is gone, the key made once", func(t *testing.T) {
		now = now.Add(29 * time.Minute)
		again, _, err := src.For(ctx, ac)
		if err != nil {
			t.Fatal(err)
		}
		if string(again.Token) != string(kms.Token) || vault.writes != 1 {
			t.Errorf("token changed %v, Vault writes %d; want the same token and one write", string(again.Token) != string(kms.Token), vault.writes)
		}
	})
	t.Run("a new token once half its life is gone", func(t *testing.T) {
		now = now.Add(2 * time.Minute)
		again, renew, err := src.For(ctx, ac)
		if err != nil {
			t.Fatal(err)
		}
		if string(again.Token) == string(kms.Token) || !renew.After(now) {
			t.Errorf("token changed %v, renew at %s (now %s)", string(again.Token) != string(kms.Token), renew, now)
		}
	})
	t.Run("a new token once the cluster is forgotten", func(t *testing.T) {
		before, _, err := src.For(ctx, ac)
		if err != nil {
			t.Fatal(err)
		}
		src.Forget(client.ObjectKeyFromObject(ac))
		again, _, err := src.For(ctx, ac)
		if err != nil {
			t.Fatal(err)
		}
		if string(again.Token) == string(before.Token) {
			t.Error("the same token after Forget")
		}
	})
	t.Run("an existing key is kept", func(t *testing.T) {
		old := &sitev1.ApplicationCluster{ObjectMeta: metav1.ObjectMeta{Name: "old"}}
		if _, _, err := src.For(ctx, old); err != nil {
			t.Fatal(err)
		}
		if vault.keys["transit/keys/site-a-old"]["latest_version"] != 3 {
			t.Errorf("the existing key was written over: %v", vault.keys["transit/keys/site-a-old"])
		}
	})
	t.Run("Vault refusing says what the BPA's policy needs", func(t *testing.T) {
		vault.err = errors.New("permission denied")
		defer func() { vault.err = nil }()
		_, _, err := src.For(ctx, &sitev1.ApplicationCluster{ObjectMeta: metav1.ObjectMeta{Name: "new"}})
		if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "read and create on transit/keys/site-a-*") {
			t.Errorf("For with Vault refusing: %v", err)
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*clusterkms.Options)
		want string
	}{
		"valid":             {func(*clusterkms.Options) {}, ""},
		"plain HTTP":        {func(o *clusterkms.Options) { o.VaultAddr = "http://vault:8200" }, "want the https URL"},
		"no CA":             {func(o *clusterkms.Options) { o.VaultCA = nil }, "--cluster-kms-vault-ca-file: required"},
		"no role":           {func(o *clusterkms.Options) { o.Role = "" }, "--cluster-kms-role must not be empty"},
		"a token too short": {func(o *clusterkms.Options) { o.TokenTTL = time.Minute }, "at least 10m"},
	} {
		t.Run(name, func(t *testing.T) {
			o := options()
			tc.edit(&o)
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
