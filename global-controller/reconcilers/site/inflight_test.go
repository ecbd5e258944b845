package site

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPollIntervalSpreadsThePollsOfTheSitesInFlight(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		inFlight int
		want     time.Duration
	}{
		{"none in flight", 200, 0, time.Second},
		{"within the rate", 200, 200, time.Second},
		{"above the rate", 200, 2000, 10 * time.Second},
		{"no bound", 0, 2000, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{OperationPollInterval: time.Second, OperationPollRate: tt.rate}
			for i := range tt.inFlight + 10 {
				r.inFlight.set(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}, true)
			}
			for i := range 10 { // finished operations leave the set
				r.inFlight.set(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}, false)
			}
			if got := r.pollInterval(); got != tt.want {
				t.Errorf("pollInterval with %d in flight at %g/s = %s, want %s", tt.inFlight, tt.rate, got, tt.want)
			}
		})
	}
}
