package testutil

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchLog records a fake watch's events in order, gives copies, and reports a watch
// error among them; Stop returns once the recorder has ended.
func TestWatchLog(t *testing.T) {
	w := watch.NewFake()
	seen := RecordWatch(w)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	w.Add(pod)
	w.Modify(pod)
	w.Delete(pod)
	var events []watch.Event
	Eventually(t, 5*time.Second, func() error {
		var err error
		if events, err = seen.Events(); err != nil || len(events) < 3 {
			return fmt.Errorf("%d events recorded: %w", len(events), err)
		}
		return nil
	})
	for i, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		if events[i].Type != want {
			t.Errorf("event %d: %s, want %s", i, events[i].Type, want)
		}
	}
	events[0].Type = watch.Bookmark // a copy: the log keeps its own
	if again, err := seen.Events(); err != nil || again[0].Type != watch.Added {
		t.Errorf("the first event reads %s (error %v) after a change to the returned slice", again[0].Type, err)
	}
	w.Error(&metav1.Status{Message: "too old resource version"})
	Eventually(t, 5*time.Second, func() error {
		if _, err := seen.Events(); err == nil {
			return errors.New("no error reported for the watch error")
		}
		return nil
	})
	seen.Stop()
}
