package artifacts_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

// TestBudgetLeases: a lone download gets the largest batch, the next ones smaller batches as
// the budget fills, and one that finds nothing free waits, until its context ends, without
// going over the limit; what is released can be leased again.
func TestBudgetLeases(t *testing.T) {
	b := artifacts.NewBudget(64 << 20)
	var leases []*artifacts.Lease
	var batches []int
	for b.InUse() < b.Limit() {
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // only what is free at once
		l, err := b.LeaseDownload(ctx, "test")
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("LeaseDownload with nothing free: %v, want the context's error", err)
			}
			break
		}
		leases = append(leases, l)
		batches = append(batches, l.Batch)
		if b.InUse() > b.Limit() {
			t.Fatalf("%d bytes leased, over the limit of %d", b.InUse(), b.Limit())
		}
	}
	if len(batches) < 3 || batches[0] != artifacts.ReadBatch || batches[len(batches)-1] != 1 {
		t.Errorf("batches leased one after the other: %v, want %d first, smaller ones, 1 last", batches, artifacts.ReadBatch)
	}
	waited := make(chan error)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		l, err := b.LeaseDownload(ctx, "test")
		if err == nil {
			l.Release()
		}
		waited <- err
	}()
	for b.Waiting() == 0 {
		select {
		case err := <-waited:
			t.Fatalf("LeaseDownload on a full budget returned %v without waiting", err)
		default:
			runtime.Gosched()
		}
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("waiting LeaseDownload = %v, want the context's error", err)
	}
	for _, l := range leases {
		l.Release()
	}
	if b.InUse() != 0 || b.Waiting() != 0 {
		t.Errorf("after releasing everything: %d bytes in use, %d waiting", b.InUse(), b.Waiting())
	}
	if l, err := b.LeaseDownload(t.Context(), "test"); err != nil || l.Batch != artifacts.ReadBatch {
		t.Errorf("lone LeaseDownload after release = %+v, %v", l, err)
	}
}

// A lone download on the default budget, which cannot hold ReadBatch chunks with their copies,
// takes the next batch down, half of it: the steps halve (by quarters, it got a quarter and
// went 10 % slower on a 2 GiB download).
func TestLoneDownloadOnTheDefaultBudget(t *testing.T) {
	b := artifacts.NewBudget(artifacts.DefaultTransferMemory)
	l, err := b.LeaseDownload(t.Context(), "test")
	if err != nil || l.Batch != artifacts.ReadBatch/2 {
		t.Errorf("lone LeaseDownload on %d bytes = %+v, %v; want a batch of %d", b.Limit(), l, err, artifacts.ReadBatch/2)
	}
}
