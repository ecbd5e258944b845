package testutil

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// WatchLog records the events of a watch from its start: the objects there when it began
// (Added), then every change, in the order the API server sent them.
type WatchLog struct {
	w      watch.Interface
	done   chan struct{}
	mu     sync.Mutex
	events []watch.Event
}

// RecordWatch records w's events until Stop.
func RecordWatch(w watch.Interface) *WatchLog {
	l := &WatchLog{w: w, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ev := range w.ResultChan() {
			l.mu.Lock()
			l.events = append(l.events, ev)
			l.mu.Unlock()
		}
	}()
	return l
}

// Events returns the events recorded so far, or an error for the first watch.Error among them.
func (l *WatchLog) Events() ([]watch.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.events {
		if ev.Type == watch.Error {
			return nil, fmt.Errorf("watch error: %v", ev.Object)
		}
	}
	return slices.Clone(l.events), nil
}

// Stop ends the watch and waits until its events are recorded.
func (l *WatchLog) Stop() {
	l.w.Stop()
	<-l.done
}
