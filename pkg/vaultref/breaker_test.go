package vaultref_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// fakeStore is a scriptable fake of a Store: each call returns err and is counted.
type fakeStore struct {
	err   error
	calls int
}

func (f *fakeStore) Read(context.Context, string, string) (vaultref.Entry, error) {
	f.calls++
	return vaultref.Entry{Data: map[string]string{"k": "v"}, Version: 1}, f.err
}

func (f *fakeStore) Write(context.Context, string, string, map[string]string) (vaultref.Entry, error) {
	f.calls++
	return vaultref.Entry{Version: 2}, f.err
}

func (f *fakeStore) Where(ns, p string) string { return "secret/edgefleet/global/" + ns + "/" + p }

func TestBreaker(t *testing.T) {
	timeout := fmt.Errorf("read Vault entry x: %w", &url.Error{Op: "Get", URL: "https://vault:8200", Err: context.DeadlineExceeded})
	sealed := fmt.Errorf("read Vault entry x: %w", &vaultapi.ResponseError{StatusCode: 503})
	refused := fmt.Errorf("read Vault entry x: %w", &vaultapi.ResponseError{StatusCode: 403})
	notFound := fmt.Errorf("x: %w", vaultref.ErrNotFound)

	for _, tc := range []struct {
		name  string
		err   error
		trips bool
	}{
		{"a deadline met", timeout, true},
		{"no connection", &url.Error{Op: "Get", URL: "https://vault:8200", Err: errors.New("connection refused")}, true},
		{"sealed (5xx)", sealed, true},
		{"refused (403)", refused, false},
		{"not found", notFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Now())
			inner := &fakeStore{err: tc.err}
			b := &vaultref.Breaker{Store: inner, Cooldown: 10 * time.Second, Clock: clk}
			if _, err := b.Read(t.Context(), "fleet", "bmc/h-0"); !errors.Is(err, tc.err) {
				t.Fatalf("first read: %v, want %v", err, tc.err)
			}
			_, err := b.Read(t.Context(), "fleet", "bmc/h-1")
			if !tc.trips {
				if inner.calls != 2 || !errors.Is(err, tc.err) {
					t.Errorf("after an answer of Vault the next read was not asked (%d calls): %v", inner.calls, err)
				}
				return
			}
			// Within the cooldown: refused at once, naming the entry and Vault's last failure.
			if inner.calls != 1 || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "secret/edgefleet/global/fleet/bmc/h-1 not asked: Vault did not answer") {
				t.Errorf("within the cooldown: %d calls, %v", inner.calls, err)
			}
			if _, err := b.Write(t.Context(), "fleet", "sites/s", map[string]string{"kubeconfig": "x"}); inner.calls != 1 || err == nil {
				t.Errorf("a write within the cooldown: %d calls, %v", inner.calls, err)
			}
			// After it: asked again; an answer closes the breaker.
			clk.SetTime(clk.Now().Add(11 * time.Second))
			inner.err = nil
			if e, err := b.Read(t.Context(), "fleet", "bmc/h-1"); err != nil || inner.calls != 2 || e.Data["k"] != "v" {
				t.Errorf("after the cooldown: %d calls, %v, %v", inner.calls, e, err)
			}
			if _, err := b.Read(t.Context(), "fleet", "bmc/h-2"); err != nil || inner.calls != 3 {
				t.Errorf("once Vault answered: %d calls, %v", inner.calls, err)
			}
		})
	}
}
