package sitelogs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// The ring a component keeps: a few hours of a quiet controller, the last minutes of a busy one.
const (
	DefaultRingLines = 5000
	DefaultRingBytes = 4 << 20
)

// Instance names the running process for Responder.Instance: host name, pid and start time.
func Instance(started time.Time) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s pid %d since %s", host, os.Getpid(), started.UTC().Format(time.RFC3339))
}

// Leftover is how long an answered request may stay before its component deletes it: the
// global controller deletes each once it read the answer, unless it stopped in between.
const Leftover = 10 * time.Minute

// Responder answers the LogRequests addressed to one component from that component's ring.
type Responder struct {
	// Client reads requests and writes their status.
	Client client.Client
	// Component is the component answered for (spec.component), e.g. sitev1.LogComponentBPA.
	Component string
	// Ring holds the component's recent lines.
	Ring *Ring
	// Instance names this process in every answer (host name and start time).
	Instance string
	// Clock tells when an answered request is left over.
	Clock clock.PassiveClock
}

// SetupWithManager registers the responder; it sees only requests for its component. The
// component needs get, list, watch and delete on logrequests and update on logrequests/status
// (its setup package carries the RBAC markers).
func (r *Responder) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Ring == nil || r.Clock == nil || r.Component == "" || r.Instance == "" {
		return errors.New("sitelogs: Client, Component, Ring, Instance and Clock are required")
	}
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		lr, ok := o.(*sitev1.LogRequest)
		return ok && lr.Spec.Component == r.Component
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("logrequest-"+r.Component).
		For(&sitev1.LogRequest{}, builder.WithPredicates(mine)).
		Complete(r)
}

// Reconcile answers a request once; an answered one is deleted when left over.
func (r *Responder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lr := &sitev1.LogRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, lr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lr.Spec.Component != r.Component || !lr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if lr.Status.Answered {
		if left := lr.CreationTimestamp.Add(Leftover).Sub(r.Clock.Now()); left > 0 {
			return ctrl.Result{RequeueAfter: left}, nil
		}
		if err := r.Client.Delete(ctx, lr); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete left-over LogRequest %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}
	before := lr.DeepCopy()
	lr.Status = r.answer(lr.Spec)
	if err := r.Client.Status().Patch(ctx, lr, client.MergeFrom(before)); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // the global controller gave up waiting and deleted it
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("answer LogRequest %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{RequeueAfter: Leftover}, nil
}

// answer is the ring's tail as the spec asks, bounded by the API's limits.
func (r *Responder) answer(spec sitev1.LogRequestSpec) sitev1.LogRequestStatus {
	n := min(max(int(spec.TailLines), 1), sitev1.MaxLogLines)
	var since time.Time
	if spec.SinceTime != nil {
		since = spec.SinceTime.Time
	}
	lines, truncated, oldest := r.Ring.Tail(n, since, sitev1.MaxLogBytes)
	st := sitev1.LogRequestStatus{Answered: true, Lines: lines, Truncated: truncated, Instance: r.Instance}
	if !oldest.IsZero() {
		st.Since = &metav1.MicroTime{Time: oldest}
	}
	return st
}
