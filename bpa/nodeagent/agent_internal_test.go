package nodeagent

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestSetConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Hour))
	ready := func(status corev1.ConditionStatus, transition metav1.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: t0, LastTransitionTime: transition}
	}
	network := corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", LastTransitionTime: t0}
	tests := []struct {
		name           string
		conds          []corev1.NodeCondition
		wantTransition metav1.Time // Ready's
		wantOthers     int         // conditions besides the agent's four
	}{
		{"new", nil, now, 0},
		{"same status keeps the transition", []corev1.NodeCondition{ready(corev1.ConditionTrue, t0)}, t0, 0},
		{"changed status moves the transition", []corev1.NodeCondition{ready(corev1.ConditionFalse, t0)}, now, 0},
		{"missing transition is set", []corev1.NodeCondition{ready(corev1.ConditionTrue, metav1.Time{})}, now, 0},
		{"others' conditions stay", []corev1.NodeCondition{network, ready(corev1.ConditionTrue, t0)}, t0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.conds)
			got := setConditions(tt.conds, kubeletConditions(), now)
			if !reflect.DeepEqual(tt.conds, before) {
				t.Errorf("the input changed from %v to %v", before, tt.conds)
			}
			if len(got) != 4+tt.wantOthers {
				t.Fatalf("got %d conditions, want %d: %v", len(got), 4+tt.wantOthers, got)
			}
			for _, c := range got {
				switch c.Type {
				case corev1.NodeNetworkUnavailable:
					if c != network {
						t.Errorf("others' condition changed: %v", c)
					}
				case corev1.NodeReady:
					if c.Status != corev1.ConditionTrue || c.Reason != ReasonKubeletReady || !c.LastHeartbeatTime.Equal(&now) {
						t.Errorf("Ready = %+v, want True, %s, heartbeat now", c, ReasonKubeletReady)
					}
					if !c.LastTransitionTime.Equal(&tt.wantTransition) {
						t.Errorf("Ready's transition = %v, want %v", c.LastTransitionTime, tt.wantTransition)
					}
				default:
					if c.Status != corev1.ConditionFalse || !c.LastHeartbeatTime.Equal(&now) {
						t.Errorf("%s = %+v, want False, heartbeat now", c.Type, c)
					}
				}
			}
		})
	}
}

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr string
	}{
		{"meminfo", "MemTotal:       16318220 kB\nMemFree:         1234 kB\n", 16318220 * 1024, ""},
		{"not first", "Foo: 1 kB\nMemTotal: 2 kB\n", 2048, ""},
		{"missing", "MemFree: 1 kB\n", 0, "no MemTotal"},
		{"garbage", "MemTotal: lots kB\n", 0, "bad MemTotal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMemTotal(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %d, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	node := schema.GroupResource{Resource: "nodes"}
	tests := []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), true},
		{apierrors.NewConflict(node, "n", errors.New("changed")), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewNotFound(schema.GroupResource{Group: "", Resource: "namespaces"}, "kube-node-lease"), true},
		{fmt.Errorf("create node n: %w", apierrors.NewForbidden(node, "n", errors.New("no"))), false},
		{apierrors.NewUnauthorized("who"), false},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "n", nil), false},
		{apierrors.NewBadRequest("bad"), false},
	}
	for _, tt := range tests {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("transient(%v) = %t, want %t", tt.err, got, tt.want)
		}
	}
}
