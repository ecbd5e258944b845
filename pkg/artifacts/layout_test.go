package artifacts_test

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// upload stores data as an artifact and returns its id.
func upload(t *testing.T, s *artifacts.Store, name string, data []byte) string {
	t.Helper()
	return builders.PutArtifact(t, s, spec(name, "1"), data).ID
}

// insert writes documents as they are.
func insert(t *testing.T, db *mongo.Database, coll string, docs ...any) {
	t.Helper()
	if _, err := db.Collection(coll).InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromSharedChunks writes schema 1 as it was — every chunk in blobs.chunks, the
// partial chunk of an upload session among them — opens the store, and finds the content and
// the session intact in the per-blob layout; then it runs the migration again, as after a
// crash before the version was recorded.
func TestMigrateFromSharedChunks(t *testing.T) {
	db := newDB(t)
	ctx := t.Context()
	const cs = artifacts.ChunkSize
	blobA, digestA := testutil.RandomContent(3*cs+100, 21)
	blobB, digestB := testutil.RandomContent(2*cs, 22)
	pending, digestP := testutil.RandomContent(4*cs+50, 23)
	const idA, idB, idP = "aaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccc"
	now := time.Now().UTC().Truncate(time.Millisecond)

	chunk := func(id string, data []byte, n int, extra int) bson.D {
		end := min((n+1)*cs, len(data))
		return bson.D{{Key: "files_id", Value: id}, {Key: "n", Value: int32(n)}, {Key: "data", Value: data[n*cs : min(end+extra, len(data))]}}
	}
	// Schema 1: chunks of two blobs and of an upload interleaved, the upload saved at 2 chunks
	// + 1000 bytes, its chunk 2 holding 500 bytes more and a chunk 3 left by a crash.
	saved := 2*cs + 1000
	legacy := []bson.D{
		chunk(idA, blobA, 0, 0), chunk(idB, blobB, 0, 0), chunk(idP, pending, 0, 0), chunk(idA, blobA, 1, 0),
		chunk(idP, pending, 1, 0), chunk(idB, blobB, 1, 0), chunk(idA, blobA, 2, 0),
		{{Key: "files_id", Value: idP}, {Key: "n", Value: int32(2)}, {Key: "data", Value: pending[2*cs : saved+500]}},
		chunk(idA, blobA, 3, 0), chunk(idP, pending, 3, 0),
	}
	writeLegacy := func() {
		docs := make([]any, len(legacy))
		for i, d := range legacy {
			docs[i] = d
		}
		insert(t, db, "blobs.chunks", docs...)
	}
	writeLegacy()
	file := func(id, digest string, size int) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "length", Value: int64(size)}, {Key: "chunkSize", Value: int32(cs)},
			{Key: "uploadDate", Value: now}, {Key: "filename", Value: digest}}
	}
	insert(t, db, "blobs.files", file(idA, digestA, len(blobA)), file(idB, digestB, len(blobB)))
	artifact := func(id, name, digest string, size int) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "kind", Value: string(restv1.KindOSImage)}, {Key: "name", Value: name},
			{Key: "version", Value: "1"}, {Key: "architecture", Value: "amd64"}, {Key: "labels", Value: bson.A{}},
			{Key: "labelPairs", Value: bson.A{}}, {Key: "labelKeys", Value: bson.A{}}, {Key: "description", Value: ""},
			{Key: "sha256", Value: digest}, {Key: "size", Value: int64(size)}, {Key: "created", Value: now},
			{Key: "creator", Value: "x"}, {Key: "uploadID", Value: id}}
	}
	insert(t, db, "artifacts", artifact(idA, "a", digestA, len(blobA)), artifact(idB, "b", digestB, len(blobB)))
	h := sha256.New()
	h.Write(pending[:saved])
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	insert(t, db, "uploads", bson.D{{Key: "_id", Value: idP},
		{Key: "spec", Value: bson.D{{Key: "kind", Value: string(restv1.KindOSImage)}, {Key: "name", Value: "p"}, {Key: "version", Value: "1"},
			{Key: "architecture", Value: "amd64"}, {Key: "labels", Value: bson.A{}}, {Key: "labelPairs", Value: bson.A{}},
			{Key: "labelKeys", Value: bson.A{}}, {Key: "description", Value: ""}}},
		{Key: "sha256", Value: ""}, {Key: "size", Value: nil}, {Key: "offset", Value: int64(saved)}, {Key: "hashState", Value: state},
		{Key: "creator", Value: "x"}, {Key: "created", Value: now}, {Key: "expires", Value: now.Add(time.Hour)},
		{Key: "lockUntil", Value: time.Time{}}, {Key: "lockToken", Value: ""}})
	insert(t, db, "meta", bson.D{{Key: "_id", Value: "schema"}, {Key: "version", Value: 1}})

	check := func() *artifacts.Store {
		t.Helper()
		s := open(t, db, artifacts.Options{})
		var v struct {
			Version int `bson:"version"`
		}
		if err := db.Collection("meta").FindOne(ctx, bson.D{{Key: "_id", Value: "schema"}}).Decode(&v); err != nil || v.Version != s.SchemaVersion() || v.Version != 2 {
			t.Fatalf("schema version %d (%v), want 2", v.Version, err)
		}
		names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: "blobs.chunks"}})
		if err != nil || len(names) != 0 {
			t.Fatalf("blobs.chunks still there (%v, %v)", names, err)
		}
		for _, b := range []struct {
			data   []byte
			digest string
		}{{blobA, digestA}, {blobB, digestB}} {
			if !bytes.Equal(read(t, s, b.digest, 0, int64(len(b.data))), b.data) {
				t.Fatalf("blob %s differs after the migration", b.digest)
			}
			if got := read(t, s, b.digest, cs-3, cs+2); !bytes.Equal(got, b.data[cs-3:2*cs-1]) {
				t.Fatalf("range of blob %s differs after the migration", b.digest)
			}
		}
		if n := count(t, db, "blobs.chunks"); n != 4+2+2 {
			t.Errorf("%d chunks after the migration, want 4 + 2 + the upload's 2 complete ones", n)
		}
		up, err := s.GetUpload(ctx, idP)
		if err != nil || up.Offset != int64(saved) {
			t.Fatalf("upload after the migration: %+v, %v", up, err)
		}
		return s
	}
	check()
	// Killed before the version was recorded: blobs.chunks is back and version 1.
	writeLegacy()
	if _, err := db.Collection("meta").UpdateOne(ctx, bson.D{{Key: "_id", Value: "schema"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	s := check()

	// The upload resumes where it was, and finishes as the blob it should be.
	if _, err := s.Append(ctx, idP, int64(saved), bytes.NewReader(pending[saved:])); err != nil {
		t.Fatal(err)
	}
	a, err := s.Finish(ctx, idP, digestP)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != int64(len(pending)) || !bytes.Equal(read(t, s, digestP, 0, int64(len(pending))), pending) {
		t.Fatal("the resumed upload's content differs")
	}

	// Each blob is a GridFS bucket of its own that mongo-driver reads.
	bucket := db.GridFSBucket(options.GridFSBucket().SetName("blobs." + idA))
	var out bytes.Buffer
	if _, err := bucket.DownloadToStream(ctx, idA, &out); err != nil || !bytes.Equal(out.Bytes(), blobA) {
		t.Fatalf("GridFS bucket blobs.%s: %d bytes, %v", idA, out.Len(), err)
	}
}

// TestChunksOutOfOrder reads a blob whose chunks are stored out of order (never written so by
// the store) and one with a chunk missing.
func TestChunksOutOfOrder(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	const cs = artifacts.ChunkSize
	data, digest := testutil.RandomContent(70*cs+5, 31) // more chunks than one read window
	id := upload(t, s, "ooo", data)
	coll := db.Collection("blobs." + id + ".chunks")
	cur, err := coll.Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	if err := coll.Drop(t.Context()); err != nil {
		t.Fatal(err)
	}
	reversed := make([]any, 0, len(docs))
	for i := len(docs) - 1; i >= 0; i-- {
		reversed = append(reversed, docs[i])
	}
	insert(t, db, coll.Name(), reversed...)
	if !bytes.Equal(read(t, s, digest, 0, int64(len(data))), data) {
		t.Fatal("content read out of order differs")
	}
	if got := read(t, s, digest, 65*cs+7, 3*cs); !bytes.Equal(got, data[65*cs+7:68*cs+7]) {
		t.Fatal("range read out of order differs")
	}
	if _, err := coll.DeleteOne(t.Context(), bson.D{{Key: "n", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	b, err := s.OpenBlob(t.Context(), digest)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := b.WriteRange(t.Context(), &out, 0, b.Size, artifacts.ReadBatch); err == nil || !strings.Contains(err.Error(), "chunk 3 missing") {
		t.Fatalf("read with a chunk missing: %v", err)
	}
}

// TestOrphanBucketsDropped: the janitor drops the chunks of a blob whose deletion stopped after
// its catalogue entry, and keeps blobs' and live uploads' chunks.
func TestOrphanBucketsDropped(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	keep, _ := testutil.RandomContent(cs3, 41)
	gone, goneDigest := testutil.RandomContent(cs3, 42)
	upload(t, s, "keep", keep)
	upload(t, s, "gone", gone)
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("live", "1")}, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(keep)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("blobs.files").DeleteOne(t.Context(), bson.D{{Key: "filename", Value: goneDigest}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExpireUploads(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "blobs.chunks"); n != 3+3 {
		t.Errorf("%d chunks after the janitor, want 3 of the blob kept + 3 of the live upload", n)
	}
}

const cs3 = 3 * artifacts.ChunkSize

// TestCrashedWriterLeftovers: a writer that died after inserting chunks it could not record
// leaves them and its lock token; the next Append, or a Finish right away, drops them.
func TestCrashedWriterLeftovers(t *testing.T) {
	const cs = artifacts.ChunkSize
	for _, finishNow := range []bool{false, true} {
		db := newDB(t)
		s := open(t, db, artifacts.Options{LockTTL: time.Millisecond})
		data, digest := testutil.RandomContent(3*cs+10, 61)
		saved := 2*cs + 5
		if finishNow {
			data, digest = testutil.RandomContent(saved, 62)
		}
		up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("crash", "1")}, "x")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data[:saved])); err != nil {
			t.Fatal(err)
		}
		// What the dead writer left: chunk 2 complete with other bytes, a chunk 3, its token.
		junk := bytes.Repeat([]byte{0xee}, cs)
		insert(t, db, "blobs."+up.ID+".chunks",
			bson.D{{Key: "_id", Value: int32(2)}, {Key: "files_id", Value: up.ID}, {Key: "n", Value: int32(2)}, {Key: "data", Value: junk}},
			bson.D{{Key: "_id", Value: int32(3)}, {Key: "files_id", Value: up.ID}, {Key: "n", Value: int32(3)}, {Key: "data", Value: junk[:10]}})
		if _, err := db.Collection("uploads").UpdateOne(t.Context(), bson.D{{Key: "_id", Value: up.ID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "lockToken", Value: "dead"}, {Key: "lockUntil", Value: time.Now().Add(-time.Second)}}}}); err != nil {
			t.Fatal(err)
		}
		if !finishNow {
			if _, err := s.Append(t.Context(), up.ID, int64(saved), bytes.NewReader(data[saved:])); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Finish(t.Context(), up.ID, digest); err != nil {
			t.Fatal(err)
		}
		if got := read(t, s, digest, 0, int64(len(data))); !bytes.Equal(got, data) {
			t.Fatalf("finishNow=%v: content differs after a crashed writer", finishNow)
		}
		if n, want := count(t, db, "blobs.chunks"), int64((len(data)+cs-1)/cs); n != want {
			t.Errorf("finishNow=%v: %d chunks, want %d", finishNow, n, want)
		}
	}
}
