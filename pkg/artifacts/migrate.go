package artifacts

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// migrations bring the schema from version i to i+1. Each is idempotent: a crash between a
// migration and the version update runs it again.
func (s *Store) migrations() []func(context.Context) error {
	return []func(context.Context) error{
		// 1: indexes.
		func(ctx context.Context) error {
			idx := []struct {
				coll   *mongo.Collection
				keys   bson.D
				unique bool
			}{
				{s.artifacts, bson.D{{Key: "kind", Value: 1}, {Key: "name", Value: 1}, {Key: "version", Value: 1}, {Key: "architecture", Value: 1}}, true},
				{s.artifacts, bson.D{{Key: "sha256", Value: 1}}, false},
				{s.files, bson.D{{Key: "filename", Value: 1}}, true},
				// (and blobs.chunks {files_id, n}, unique: dropped by 2.)
				{s.uploads, bson.D{{Key: "expires", Value: 1}}, false},
			}
			for _, i := range idx {
				if _, err := i.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: i.keys, Options: options.Index().SetUnique(i.unique)}); err != nil {
					return fmt.Errorf("create index %v on %s: %w", i.keys, i.coll.Name(), err)
				}
			}
			return nil
		},
		// 2: one GridFS bucket per blob instead of the shared blobs.chunks.
		s.migrateToBuckets,
	}
}

// legacyChunks is the chunk collection of schema 1, shared by all blobs and uploads.
const legacyChunks = "blobs.chunks"

// migrateToBuckets moves schema 1's chunks, all in blobs.chunks, to one bucket per blob or
// upload session ("blobs.ID.chunks" with _id = n, and for blobs "blobs.ID.files"), and the
// saved part of an upload's last, partial chunk into its session. Killed half way, it runs
// again from the start: every step is idempotent, and blobs.chunks is dropped last.
func (s *Store) migrateToBuckets(ctx context.Context) error {
	legacy := s.db.Collection(legacyChunks)
	// Every chunk, in one pass in stored order: a query filtered on files_id would read the
	// whole collection once per blob. Within a blob, stored order is chunk order (schema 1
	// wrote chunks in order and replaced the partial one in place); were it not, WriteRange
	// still reads the blob, only slower. A chunk copied before a crash is not copied again
	// (_id = n is unique), so the copies stay in order.
	cur, err := legacy.Find(ctx, bson.D{}, options.Find().SetBatchSize(ReadBatch))
	if err != nil {
		return fmt.Errorf("read %s: %w", legacyChunks, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var batch []any
	var batchID string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := s.chunksOf(batchID).InsertMany(ctx, batch, options.InsertMany().SetOrdered(false)); err != nil && !onlyDuplicates(err) {
			return fmt.Errorf("copy chunks of %s: %w", batchID, err)
		}
		batch = nil
		return nil
	}
	for cur.Next(ctx) {
		var c struct {
			FilesID string `bson:"files_id"`
			N       int32  `bson:"n"`
			Data    []byte `bson:"data"`
		}
		if err := cur.Decode(&c); err != nil {
			return fmt.Errorf("read %s: %w", legacyChunks, err)
		}
		if c.FilesID != batchID || len(batch) == ReadBatch {
			if err := flush(); err != nil {
				return err
			}
			batchID = c.FilesID
		}
		batch = append(batch, chunkDoc{ID: c.N, FilesID: c.FilesID, N: c.N, Data: c.Data})
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read %s: %w", legacyChunks, err)
	}
	if err := flush(); err != nil {
		return err
	}

	// Each blob's bucket files document.
	var files []fileDoc
	if cur, err := s.files.Find(ctx, bson.D{}); err != nil {
		return fmt.Errorf("list blobs: %w", err)
	} else if err := cur.All(ctx, &files); err != nil {
		return fmt.Errorf("list blobs: %w", err)
	}
	blobs := map[string]bool{}
	for _, f := range files {
		blobs[f.ID] = true
		if _, err := s.bucketFilesOf(f.ID).ReplaceOne(ctx, bson.D{{Key: "_id", Value: f.ID}}, f, options.Replace().SetUpsert(true)); err != nil {
			return fmt.Errorf("write files document of blob %s: %w", f.ID, err)
		}
	}

	// Upload sessions: the saved part of the partial chunk moves into the session, and the
	// bucket keeps only the complete chunks before it.
	var uploads []uploadDoc
	if cur, err := s.uploads.Find(ctx, bson.D{}); err != nil {
		return fmt.Errorf("list uploads: %w", err)
	} else if err := cur.All(ctx, &uploads); err != nil {
		return fmt.Errorf("list uploads: %w", err)
	}
	for _, u := range uploads {
		if blobs[u.ID] {
			continue // its chunks are a blob's already: Finish only has to complete
		}
		base, keep := int32(u.Offset/ChunkSize), int(u.Offset%ChunkSize)
		chunks := s.chunksOf(u.ID)
		if len(u.Tail) != keep {
			var c chunkDoc
			err := chunks.FindOne(ctx, bson.D{{Key: "_id", Value: base}}).Decode(&c)
			if errors.Is(err, mongo.ErrNoDocuments) || err == nil && len(c.Data) < keep {
				// Nothing to resume from: the client starts again.
				if err := s.dropUpload(ctx, u.ID); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("read last chunk of upload %s: %w", u.ID, err)
			}
			if _, err := s.uploads.UpdateOne(ctx, bson.D{{Key: "_id", Value: u.ID}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "tail", Value: c.Data[:keep]}}}}); err != nil {
				return fmt.Errorf("move last chunk of upload %s: %w", u.ID, err)
			}
		}
		if _, err := chunks.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: base}}}}); err != nil {
			return fmt.Errorf("drop partial chunk of upload %s: %w", u.ID, err)
		}
	}

	if err := legacy.Drop(ctx); err != nil {
		return fmt.Errorf("drop %s: %w", legacyChunks, err)
	}
	return nil
}

// onlyDuplicates tells whether err reports duplicate keys and nothing else.
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		if bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
			return false
		}
		for _, we := range bwe.WriteErrors {
			if we.Code != 11000 {
				return false
			}
		}
		return true
	}
	return mongo.IsDuplicateKeyError(err)
}

// SchemaVersion is the schema version this code writes.
func (s *Store) SchemaVersion() int { return len(s.migrations()) }

func (s *Store) migrate(ctx context.Context) error {
	var doc struct {
		Version int `bson:"version"`
	}
	err := s.meta.FindOne(ctx, bson.D{{Key: "_id", Value: "schema"}}).Decode(&doc)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("read schema version: %w", err)
	}
	migrations := s.migrations()
	if doc.Version > len(migrations) {
		return fmt.Errorf("the artifact store has schema version %d, newer than this controller's %d: upgrade the controller", doc.Version, len(migrations))
	}
	for v := doc.Version; v < len(migrations); v++ {
		if err := migrations[v](ctx); err != nil {
			return fmt.Errorf("migrate artifact store schema to version %d: %w", v+1, err)
		}
		if _, err := s.meta.UpdateOne(ctx, bson.D{{Key: "_id", Value: "schema"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: v + 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
			return fmt.Errorf("record schema version %d: %w", v+1, err)
		}
	}
	return nil
}
