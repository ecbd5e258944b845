package sitecache

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/test/controlplane"
)

// TestEnsureURLKey runs against a real API server: the key is made once and kept (a restart
// signs as before), and a damaged one is an error naming the Secret, changing nothing.
func TestEnsureURLKey(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "site"})
	ctx := t.Context()
	ns := cp.Namespace(t)
	first, err := EnsureURLKey(ctx, cp.Client, ns)
	if err != nil {
		t.Fatal(err)
	}
	again, err := EnsureURLKey(ctx, cp.Client, ns)
	if err != nil || !bytes.Equal(first, again) || len(first) != urlKeySize {
		t.Fatalf("the key again: %d bytes, same %v, %v", len(again), bytes.Equal(first, again), err)
	}
	s := &corev1.Secret{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: URLKeySecret}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[URLKeyField] = []byte("short")
	if err := cp.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureURLKey(ctx, cp.Client, ns); err == nil || !strings.Contains(err.Error(), "delete the Secret to make a new key") || !strings.Contains(err.Error(), URLKeySecret) {
		t.Errorf("a damaged key: %v", err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: URLKeySecret}, s); err != nil || string(s.Data[URLKeyField]) != "short" {
		t.Errorf("the damaged Secret was changed (%v)", err)
	}
	if _, err := NewURLs("https://cache", []byte("short")); err == nil {
		t.Error("NewURLs took a 5-byte key")
	}
}
