package artifacts

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DefaultTransferMemory is the memory budget of transfers when Options.Budget is nil. The Go
// heap takes up to about twice what is leased (the garbage collector's headroom): 32 MiB kept
// the controller at 215 MiB at 50 concurrent uploads, 64 MiB at 321 MiB, over DESIGN.md's 300
// (docs/benchmarks.md).
const DefaultTransferMemory = 32 << 20

// MinTransferMemory is the smallest budget: one transfer of the smallest batch fits.
const MinTransferMemory = 8 << 20

// dbCopies is how many copies of a chunk the database path holds while a batch of chunks is
// in flight: mongo-driver's wire message and, with the embedded FerretDB (in this process),
// the SQLite row (JSON, binary as base64), the decoded document and the encoded message.
const dbCopies = 4

// Budget bounds the memory that transfers hold in buffers: every download's read-ahead queue
// and database read batch, every upload's chunk buffer. A transfer takes a lease before it
// holds memory and gives it back after; with little budget free it takes a smaller one (smaller
// batches), and with none it waits. Leases are weighed in bytes of buffers and of the copies
// the database path makes of them (an estimate: a FerretDB embedded in the process decodes each
// batch it sends or receives).
type Budget struct {
	sem     *semaphore.Weighted
	limit   int64
	inUse   atomic.Int64
	waiting atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(limit), limit: limit}
}

// Limit is the budget in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// InUse is the bytes leased now.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

// Waiting is the number of transfers waiting for a lease.
func (b *Budget) Waiting() int64 { return b.waiting.Load() }

// Lease is a transfer's share of the budget.
type Lease struct {
	// Batch is how many chunks the transfer may hold per database round trip.
	Batch  int
	budget *Budget
	bytes  int64
}

// Release gives the lease back.
func (l *Lease) Release() {
	l.budget.inUse.Add(-l.bytes)
	l.budget.sem.Release(l.bytes)
}

// LeaseDownload waits, until ctx ends, for a download's lease: its database read batch of
// Batch chunks and its read-ahead queue of 2*Batch chunks (the next batch is read while one is
// sent), plus the chunk being written to the queue and the one being read from it.
func (b *Budget) LeaseDownload(ctx context.Context, what string) (*Lease, error) {
	return b.lease(ctx, what, ReadBatch, 1, func(batch int) int64 { return int64(batch*dbCopies+2*batch+2) * ChunkSize })
}

// leaseUpload waits, until ctx ends, for an upload's lease: Batch chunks buffered before they
// are written, their copies on the database path, and the partial chunk being filled. Its
// smallest batch is 1 MiB, so that the budget bounds how many uploads write at once: the
// embedded FerretDB's SQLite has one writer at a time, and 50 uploads writing at once keep some
// waiting past SQLite's busy timeout (SQLITE_BUSY, a 500; see docs/benchmarks.md).
func (b *Budget) leaseUpload(ctx context.Context, what string) (*Lease, error) {
	return b.lease(ctx, what, flushChunks, flushChunks/4, func(batch int) int64 { return int64(batch*(1+dbCopies)+1) * ChunkSize })
}

// lease leases the largest batch of maxBatch, maxBatch/2, maxBatch/4... above minBatch that is
// free right away and costs at most half of what is free (so that the transfers that come next
// get some too), or any when nothing is leased (a lone transfer goes at full speed), or else
// waits for a batch of minBatch chunks until ctx ends.
func (b *Budget) lease(ctx context.Context, what string, maxBatch, minBatch int, cost func(batch int) int64) (*Lease, error) {
	for batch := maxBatch; batch > minBatch; batch /= 2 {
		inUse := b.inUse.Load()
		if n := cost(batch); (inUse == 0 || n <= (b.limit-inUse)/2) && b.sem.TryAcquire(n) {
			b.inUse.Add(n)
			return &Lease{Batch: batch, budget: b, bytes: n}, nil
		}
	}
	n := cost(minBatch)
	if !b.sem.TryAcquire(n) {
		b.waiting.Add(1)
		err := b.sem.Acquire(ctx, n)
		b.waiting.Add(-1)
		if err != nil {
			return nil, fmt.Errorf("%s: wait for transfer memory (%d of %d bytes leased): %w", what, b.inUse.Load(), b.limit, err)
		}
	}
	b.inUse.Add(n)
	return &Lease{Batch: minBatch, budget: b, bytes: n}, nil
}
