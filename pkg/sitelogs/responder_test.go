package sitelogs_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"go.uber.org/zap"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/sitelogs"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var (
	site *controlplane.ControlPlane
	// bpaLog and controllerLog are the loggers teed into the two responders' rings.
	bpaLog, controllerLog *zap.Logger
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunWithManager(m, controlplane.Options{Name: "site", InstallSiteCRDs: true},
		func(_ context.Context, cp *controlplane.ControlPlane, mgr manager.Manager) error {
			site = cp
			for component, log := range map[string]**zap.Logger{sitev1.LogComponentBPA: &bpaLog, sitev1.LogComponentLocalController: &controllerLog} {
				ring := sitelogs.NewRing(1000, 1<<20)
				*log = zap.NewNop().WithOptions(ring.Tee())
				r := &sitelogs.Responder{Client: mgr.GetClient(), Component: component, Ring: ring, Instance: component + "@test", Clock: clock.RealClock{}}
				if err := r.SetupWithManager(mgr); err != nil {
					return err
				}
			}
			return nil
		}))
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "logs-"}}
	if err := site.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// ask creates a request and waits for its answer.
func ask(t *testing.T, ns string, spec sitev1.LogRequestSpec) sitev1.LogRequestStatus {
	t.Helper()
	ctx := t.Context()
	lr := &sitev1.LogRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "log-"}, Spec: spec}
	if err := site.Client.Create(ctx, lr); err != nil {
		t.Fatalf("create request: %v", err)
	}
	testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("the LogRequest for %s answered", spec.Component), func() (bool, string) {
		if err := site.Client.Get(ctx, client.ObjectKeyFromObject(lr), lr); err != nil {
			t.Fatal(err)
		}
		return lr.Status.Answered, fmt.Sprintf("status %+v", lr.Status)
	})
	return lr.Status
}

func TestEachComponentAnswersWithItsOwnLines(t *testing.T) {
	ns := namespace(t)
	bpaLog.Info("bpa line one")
	controllerLog.Info("controller line")
	bpaLog.Info("bpa line two", zap.String("host", "cp-0"))

	st := ask(t, ns, sitev1.LogRequestSpec{Component: sitev1.LogComponentBPA, TailLines: 10})
	got := strings.Join(st.Lines, "\n")
	if len(st.Lines) != 2 || !strings.Contains(st.Lines[0], "bpa line one") || !strings.Contains(st.Lines[1], `"host":"cp-0"`) {
		t.Errorf("bpa's answer:\n%s\nwant its two lines, oldest first", got)
	}
	if strings.Contains(got, "controller line") || st.Instance != "bpa@test" || st.Truncated || st.Since == nil {
		t.Errorf("bpa's answer holds another's line, or instance %q, truncated %v, since %v", st.Instance, st.Truncated, st.Since)
	}
	st = ask(t, ns, sitev1.LogRequestSpec{Component: sitev1.LogComponentLocalController, TailLines: 10})
	if len(st.Lines) != 1 || !strings.Contains(st.Lines[0], "controller line") || st.Instance != "local-controller@test" {
		t.Errorf("local controller's answer: %q from %q", st.Lines, st.Instance)
	}

	// Tail and since bound the answer.
	st = ask(t, ns, sitev1.LogRequestSpec{Component: sitev1.LogComponentBPA, TailLines: 1})
	if len(st.Lines) != 1 || !strings.Contains(st.Lines[0], "bpa line two") || !st.Truncated {
		t.Errorf("tail 1: %q truncated=%v; want the newest line, truncated", st.Lines, st.Truncated)
	}
	mark := metav1.NowMicro()
	time.Sleep(time.Millisecond)
	bpaLog.Info("bpa line three")
	st = ask(t, ns, sitev1.LogRequestSpec{Component: sitev1.LogComponentBPA, TailLines: 10, SinceTime: &mark})
	if len(st.Lines) != 1 || !strings.Contains(st.Lines[0], "bpa line three") || st.Truncated {
		t.Errorf("since a moment ago: %q truncated=%v; want only the line logged after it", st.Lines, st.Truncated)
	}
}

func TestAdmissionRefusesBadRequests(t *testing.T) {
	ns := namespace(t)
	for _, tc := range []struct {
		spec sitev1.LogRequestSpec
		want string
	}{
		{sitev1.LogRequestSpec{Component: "kubelet", TailLines: 10}, "spec.component"},
		{sitev1.LogRequestSpec{Component: sitev1.LogComponentBPA, TailLines: 0}, "spec.tailLines"},
		{sitev1.LogRequestSpec{Component: sitev1.LogComponentBPA, TailLines: sitev1.MaxLogLines + 1}, "spec.tailLines"},
	} {
		lr := &sitev1.LogRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "log-"}, Spec: tc.spec}
		err := site.Client.Create(t.Context(), lr)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want Invalid naming %s", tc.spec, err, tc.want)
		}
	}
}

// TestLeftOverRequestsAreDeleted drives Reconcile over controller-runtime's fake client: an
// answered request the global controller never deleted goes after Leftover.
func TestLeftOverRequestsAreDeleted(t *testing.T) {
	created := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	lr := &sitev1.LogRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "edgefleet-system", Name: "log-1", CreationTimestamp: metav1.NewTime(created)},
		Spec: sitev1.LogRequestSpec{Component: sitev1.LogComponentBPA, TailLines: 5}}
	c := fake.NewClientBuilder().WithScheme(controlplane.Scheme()).WithObjects(lr).WithStatusSubresource(lr).Build()
	clk := clocktesting.NewFakePassiveClock(created.Add(time.Second))
	r := &sitelogs.Responder{Client: c, Component: sitev1.LogComponentBPA, Ring: sitelogs.NewRing(10, 1000), Instance: "bpa@test", Clock: clk}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(lr)}
	res, err := r.Reconcile(t.Context(), req)
	if err != nil || res.RequeueAfter != sitelogs.Leftover {
		t.Fatalf("answer: %+v %v", res, err)
	}
	if err := c.Get(t.Context(), req.NamespacedName, lr); err != nil || !lr.Status.Answered {
		t.Fatalf("not answered: %v %+v", err, lr.Status)
	}
	if res, err = r.Reconcile(t.Context(), req); err != nil || res.RequeueAfter != sitelogs.Leftover-time.Second {
		t.Errorf("answered, young: %+v %v; want to look again when left over", res, err)
	}
	clk.SetTime(created.Add(sitelogs.Leftover))
	if _, err = r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), req.NamespacedName, lr); !apierrors.IsNotFound(err) {
		t.Errorf("left-over request still there: %v", err)
	}
}
