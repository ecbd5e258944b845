package artifacts

import (
	"context"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// LiveBytes is the sum of the stored blobs' lengths: what the store holds for its artifacts.
func (s *Store) LiveBytes(ctx context.Context) (int64, error) {
	return sumOf(ctx, s.files, "length")
}

// UploadingBytes is the sum of the upload sessions' offsets: what the store holds for uploads
// not finished yet.
func (s *Store) UploadingBytes(ctx context.Context) (int64, error) {
	return sumOf(ctx, s.uploads, "offset")
}

// checkSpace refuses an upload that declares size bytes: with *TooLargeError over the maximum
// artifact size and, when the store sees its volume, with *SpaceError when the upload and what
// the open sessions have yet to write of their declared sizes do not fit in the volume's free
// space less the reserve. (Sessions of no declared size are not counted: they could be any;
// checkRoom checks their bytes as they come.)
func (s *Store) checkSpace(ctx context.Context, size int64) error {
	if size > s.maxArtifactSize {
		return &TooLargeError{Size: size, Max: s.maxArtifactSize}
	}
	return s.fits(ctx, size, &SpaceError{Size: size})
}

// checkRoom refuses, with *SpaceError, n more bytes of a session that declared no size and has
// saved bytes so far, when they do not fit as checkSpace counts. (Two such sessions appending at
// once may each see the same room: they overshoot by a flush at most.)
func (s *Store) checkRoom(ctx context.Context, saved, n int64) error {
	if n == 0 {
		return nil
	}
	return s.fits(ctx, n, &SpaceError{Size: n, Undeclared: true, Received: saved})
}

// fits returns refusal, its volume's figures filled in, when n more bytes of content and what
// the open sessions have yet to write of their declared sizes do not fit in the volume's free
// space less the reserve; nil when they do, or when the store does not see its volume.
func (s *Store) fits(ctx context.Context, n int64, refusal *SpaceError) error {
	if s.freeSpace == nil {
		return nil
	}
	open, err := s.openBytes(ctx)
	if err != nil {
		return err
	}
	free, err := s.freeSpace()
	if err != nil {
		return fmt.Errorf("check the space for %d bytes of an upload: %w", n, err)
	}
	need, held := onDisk(n), onDisk(open)
	if addCapped(need, held) > free-s.spaceReserve {
		refusal.OnDisk, refusal.Free, refusal.Reserve, refusal.Open = need, free, s.spaceReserve, held
		return refusal
	}
	return nil
}

// openBytes is what the upload sessions that have not expired have yet to write of their
// declared sizes.
func (s *Store) openBytes(ctx context.Context) (int64, error) {
	cur, err := s.uploads.Find(ctx, s.unexpired(), options.Find().SetProjection(bson.D{{Key: "size", Value: 1}, {Key: "offset", Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("sum the sizes of open uploads: %w", err)
	}
	var docs []uploadDoc
	if err := cur.All(ctx, &docs); err != nil {
		return 0, fmt.Errorf("sum the sizes of open uploads: %w", err)
	}
	var n int64
	for _, d := range docs {
		if d.Size != nil && *d.Size > d.Offset {
			n = addCapped(n, *d.Size-d.Offset)
		}
	}
	return n, nil
}

// onDisk is about what n bytes of content take in the embedded FerretDB, which stores binary
// data as base64 in JSON: 4/3 of them.
func onDisk(n int64) int64 { return addCapped(n, n/3) }

// addCapped adds two non-negative numbers, up to math.MaxInt64 (sessions created before there
// was a maximum size may declare anything).
func addCapped(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// sumOf sums an integer field over a collection's documents.
func sumOf(ctx context.Context, c *mongo.Collection, field string) (int64, error) {
	cur, err := c.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: field, Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("sum %s over %s: %w", field, c.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var n int64
	for cur.Next(ctx) {
		v, ok := cur.Current.Lookup(field).AsInt64OK()
		if !ok {
			return 0, fmt.Errorf("sum %s over %s: document %s has no integer %s", field, c.Name(), cur.Current.Lookup("_id"), field)
		}
		n += v
	}
	if err := cur.Err(); err != nil {
		return 0, fmt.Errorf("sum %s over %s: %w", field, c.Name(), err)
	}
	return n, nil
}

// Compact gives the space of deleted blobs and upload sessions back to the file system. It is
// meant for the embedded FerretDB on SQLite, which keeps the pages of dropped collections in
// its database file (it runs with auto_vacuum off): its compact command with force runs VACUUM,
// which rewrites the database's file with only the live pages. VACUUM takes as much free disk
// space as the live data while it runs and holds writes meanwhile. (MongoDB gives a dropped
// collection's files back by itself; its compact works on one collection.)
func (s *Store) Compact(ctx context.Context) error {
	cmd := bson.D{{Key: "compact", Value: s.artifacts.Name()}, {Key: "force", Value: true}}
	if err := s.db.RunCommand(ctx, cmd).Err(); err != nil {
		return fmt.Errorf("compact database %s: %w", s.db.Name(), err)
	}
	// Recorded with a write of its own: once the VACUUM is checkpointed, SQLite starts its
	// write-ahead log (which the VACUUM filled with the whole database) over at the next write,
	// and cuts it to its journal_size_limit.
	_, err := s.meta.UpdateOne(ctx, bson.D{{Key: "_id", Value: "compaction"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "at", Value: s.clock.Now()}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("record compaction of database %s: %w", s.db.Name(), err)
	}
	return nil
}
