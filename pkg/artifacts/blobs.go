package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ReadBatch is how many chunks a reader asks the database for at a time at most: 8 MiB, far
// below mongo-driver's 48 MB message limit; fewer when the transfer memory budget is short
// (see Budget.LeaseDownload).
const ReadBatch = 64

// Blob is stored content.
type Blob struct {
	SHA256 string
	Size   int64
	s      *Store
	fileID string
}

// OpenBlob finds the content with this sha256.
func (s *Store) OpenBlob(ctx context.Context, digest string) (*Blob, error) {
	var f fileDoc
	if err := s.files.FindOne(ctx, bson.D{{Key: "filename", Value: digest}}).Decode(&f); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, fmt.Errorf("blob sha256:%s: %w", digest, ErrNotFound)
		}
		return nil, fmt.Errorf("find blob sha256:%s: %w", digest, err)
	}
	return &Blob{SHA256: digest, Size: f.Length, s: s, fileID: f.ID}, nil
}

// WriteRange writes length bytes from offset start to w, reading only the blob's own chunks
// in batches of batch chunks (at most ReadBatch; see Budget.LeaseDownload), so memory stays
// flat whatever the size. w must not keep the slices it is given.
func (b *Blob) WriteRange(ctx context.Context, w io.Writer, start, length int64, batch int) error {
	batch = min(max(batch, 1), ReadBatch)
	if start < 0 || length < 0 || start+length > b.Size {
		return fmt.Errorf("range %d+%d is outside blob sha256:%s of %d bytes", start, length, b.SHA256, b.Size)
	}
	if length == 0 {
		return nil
	}
	first, last := start/ChunkSize, (start+length-1)/ChunkSize
	want := first
	send := func(n int64, data []byte) error {
		if size := min(ChunkSize, b.Size-n*ChunkSize); int64(len(data)) != size {
			return fmt.Errorf("blob sha256:%s is corrupt: chunk %d has %d bytes, want %d", b.SHA256, n, len(data), size)
		}
		chunkStart := n * ChunkSize
		if lo := start - chunkStart; lo > 0 {
			data = data[lo:]
			chunkStart = start
		}
		if hi := start + length - chunkStart; hi < int64(len(data)) {
			data = data[:hi]
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("send blob sha256:%s: %w", b.SHA256, err)
		}
		want++
		return nil
	}
	// In insertion order, which is chunk order: sorted, FerretDB would load every chunk into
	// memory first. The chunks before the range are read and skipped (FerretDB cannot skip
	// them without decoding them either).
	inOrder := true
	err := b.scan(ctx, batch, func(n int64, data []byte) (bool, error) {
		switch {
		case n < want:
			return true, nil
		case n > want:
			inOrder = false
			return false, nil
		}
		if err := send(n, data); err != nil {
			return false, err
		}
		return want <= last, nil
	})
	if err != nil {
		return err
	}
	// Out of order (never written so by this store): a window of chunks per pass.
	for !inOrder && want <= last {
		window := map[int64][]byte{}
		end := min(want+int64(batch), last+1)
		if err := b.scan(ctx, batch, func(n int64, data []byte) (bool, error) {
			if n >= want && n < end && window[n] == nil {
				window[n] = bytes.Clone(data)
			}
			return int64(len(window)) < end-want, nil
		}); err != nil {
			return err
		}
		for data := window[want]; data != nil && want < end; data = window[want] {
			if err := send(want, data); err != nil {
				return err
			}
		}
		if want < end {
			break
		}
	}
	if want <= last {
		return fmt.Errorf("blob sha256:%s is corrupt: chunk %d missing", b.SHA256, want)
	}
	return nil
}

// scan reads the blob's chunks in stored order, batch at a time, and calls fn with each chunk's number and
// data (valid only during the call) until fn returns false or an error.
func (b *Blob) scan(ctx context.Context, batch int, fn func(n int64, data []byte) (bool, error)) error {
	cur, err := b.s.chunksOf(b.fileID).Find(ctx, bson.D{}, options.Find().SetBatchSize(int32(batch)))
	if err != nil {
		return fmt.Errorf("read blob sha256:%s: %w", b.SHA256, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		n, ok := cur.Current.Lookup("n").AsInt64OK()
		_, data, ok2 := cur.Current.Lookup("data").BinaryOK()
		if !ok || !ok2 {
			return fmt.Errorf("blob sha256:%s is corrupt: chunk %s", b.SHA256, cur.Current)
		}
		more, err := fn(n, data)
		if err != nil || !more {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read blob sha256:%s: %w", b.SHA256, err)
	}
	return nil
}
