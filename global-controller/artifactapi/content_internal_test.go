package artifactapi

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

// TestQueueReusesNoBufferInUse sends more chunks than the queue holds through it, each of other
// bytes than the one before (the way the store's chunks come), and reads back exactly what was
// written: a buffer handed back to Write while its bytes were still queued or being read would
// show as bytes of a later chunk.
func TestQueueReusesNoBufferInUse(t *testing.T) {
	const depth = 2 * artifacts.ReadBatch
	q := newQueue(depth)
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	var want bytes.Buffer
	chunks := make([][]byte, 3*depth)
	for i := range chunks {
		chunks[i] = make([]byte, 1+rng.IntN(4096))
		for j := range chunks[i] {
			chunks[i][j] = byte(rng.Uint32())
		}
		want.Write(chunks[i])
	}
	go func() {
		scratch := make([]byte, 4096)
		for _, c := range chunks {
			// The writer reuses its own buffer too (the database driver's batch is only valid
			// until the next one): the queue must copy.
			n := copy(scratch, c)
			if _, err := q.Write(scratch[:n]); err != nil {
				q.err = err
				break
			}
		}
		close(q.ch)
	}()
	// A byte a Read, so the writer runs while a chunk is being read.
	got, err := io.ReadAll(iotest.OneByteReader(q))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read %d bytes that differ from the %d written", len(got), want.Len())
	}
	if len(q.free) == 0 {
		t.Error("no buffer came back for reuse")
	}
}
