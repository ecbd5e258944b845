package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

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

// WriteRange writes length bytes from offset start to w, reading only the chunks it needs, a
// few at a time, so memory stays flat whatever the size.
func (b *Blob) WriteRange(ctx context.Context, w io.Writer, start, length int64) error {
	if start < 0 || length < 0 || start+length > b.Size {
		return fmt.Errorf("range %d+%d is outside blob sha256:%s of %d bytes", start, length, b.SHA256, b.Size)
	}
	if length == 0 {
		return nil
	}
	first, last := start/ChunkSize, (start+length-1)/ChunkSize
	cur, err := b.s.chunks.Find(ctx,
		bson.D{{Key: "files_id", Value: b.fileID}, {Key: "n", Value: bson.D{{Key: "$gte", Value: first}, {Key: "$lte", Value: last}}}},
		options.Find().SetSort(bson.D{{Key: "n", Value: 1}}).SetBatchSize(16))
	if err != nil {
		return fmt.Errorf("read blob sha256:%s: %w", b.SHA256, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	want := first
	for cur.Next(ctx) {
		var c chunkDoc
		if err := cur.Decode(&c); err != nil {
			return fmt.Errorf("read blob sha256:%s: %w", b.SHA256, err)
		}
		if int64(c.N) != want {
			return fmt.Errorf("blob sha256:%s is corrupt: chunk %d missing", b.SHA256, want)
		}
		data := c.Data
		chunkStart := int64(c.N) * ChunkSize
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
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read blob sha256:%s: %w", b.SHA256, err)
	}
	if want != last+1 {
		return fmt.Errorf("blob sha256:%s is corrupt: chunk %d missing", b.SHA256, want)
	}
	return nil
}
