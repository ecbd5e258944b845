package cmd

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func TestWaitForTimeout(t *testing.T) {
	p := &progress{w: io.Discard}
	refused := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")

	// A check that fails once the deadline has passed is the timeout, naming the last state;
	// the check here waits for the deadline itself, not for the context to say it is done.
	calls := 0
	err := waitFor(t.Context(), p, 200*time.Millisecond, 50*time.Millisecond, "release x to be Ready", func(ctx context.Context) (bool, string, error) {
		calls++
		if calls == 1 {
			return false, "Ready=False ArtifactsMissing", nil
		}
		d, _ := ctx.Deadline()
		time.Sleep(time.Until(d))
		return false, "", refused
	})
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms waiting for release x to be Ready; last seen: Ready=False ArtifactsMissing") {
		t.Errorf("a check failing at the deadline: %v", err)
	}

	// An error well before the deadline is the error.
	err = waitFor(t.Context(), p, time.Minute, 50*time.Millisecond, "x", func(context.Context) (bool, string, error) {
		return false, "", refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("an error before the deadline: %v", err)
	}
}

// TestReleaseReadiness: --wait of a release ends when it is Ready, waits while it is not, and
// fails at once when its packages conflict or are invalid at its generation (it never will be
// Ready).
func TestReleaseReadiness(t *testing.T) {
	rel := func(status metav1.ConditionStatus, reason string, observed int64) *fleetv1.Release {
		r := &fleetv1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "edge", Generation: 1}}
		if reason != "" {
			r.Status.Conditions = []metav1.Condition{{Type: fleetv1.ReleaseReadyCondition, Status: status, Reason: reason, ObservedGeneration: observed,
				Message: "spec.packages: kube-apiserver comes after etcd, which is not among the packages"}}
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		rel        *fleetv1.Release
		done       bool
		state, err string
	}{
		{"not checked yet", rel("", "", 0), false, "no Ready condition yet", ""},
		{"ready", rel(metav1.ConditionTrue, fleetv1.ReasonArtifactsFound, 1), true, "Ready=True ArtifactsFound", ""},
		{"artifacts missing", rel(metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing, 1), false, "Ready=False ArtifactsMissing", ""},
		{"packages conflict", rel(metav1.ConditionFalse, fleetv1.ReasonPackagesConflict, 1), false, "",
			"release fleet/edge will never be Ready: spec.packages: kube-apiserver comes after etcd, which is not among the packages"},
		{"a package invalid", rel(metav1.ConditionFalse, fleetv1.ReasonPackageInvalid, 1), false, "",
			"release fleet/edge will never be Ready: spec.packages: kube-apiserver comes after etcd, which is not among the packages"},
		{"packages conflicted at an older generation", rel(metav1.ConditionFalse, fleetv1.ReasonPackagesConflict, 0), false, "Ready=False PackagesConflict", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, state, err := releaseReadiness(tc.rel)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || done != tc.done || !strings.Contains(state, tc.state) {
				t.Errorf("releaseReadiness = %v, %q, %v; want %v and a state holding %q", done, state, err, tc.done, tc.state)
			}
		})
	}
}
