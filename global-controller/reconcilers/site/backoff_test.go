package site

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRetryIntervalDoublesUpToHeartbeat(t *testing.T) {
	r := &Reconciler{HeartbeatInterval: time.Minute, MinRetryInterval: 2 * time.Second}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	unreachableFor := func(d time.Duration) *metav1.Condition {
		return &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-d))}
	}
	tests := []struct {
		name      string
		reachable *metav1.Condition
		want      time.Duration
	}{
		{"never probed", nil, 2 * time.Second},
		{"not checked yet", &metav1.Condition{Status: metav1.ConditionUnknown, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}, 2 * time.Second},
		{"just became unreachable", unreachableFor(0), 2 * time.Second},
		{"unreachable for 1s", unreachableFor(time.Second), 2 * time.Second},
		{"unreachable for 5s", unreachableFor(5 * time.Second), 5 * time.Second},
		{"unreachable for 20s", unreachableFor(20 * time.Second), 20 * time.Second},
		{"unreachable for an hour", unreachableFor(time.Hour), time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.retryInterval(tt.reachable, now); got != tt.want {
				t.Errorf("retryInterval = %s, want %s", got, tt.want)
			}
		})
	}
}
