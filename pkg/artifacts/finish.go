package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// Finish completes an upload: it checks the size and the sha256 (stated now or when the session
// was created), stores the bytes as a blob unless one with the same digest exists, and creates
// the artifact. On a digest mismatch it deletes the session and returns *DigestError, and on
// content that is not what its kind says (checkContent) a *ValidationError: nothing is stored. Calling it again after a crash completes the same artifact.
func (s *Store) Finish(ctx context.Context, id, digest string) (_ restv1.Artifact, reterr error) {
	d, err := s.getUpload(ctx, id)
	if err != nil {
		return restv1.Artifact{}, err
	}
	d, token, err := s.lock(ctx, id, d.Offset)
	if err != nil {
		return restv1.Artifact{}, err
	}
	unlock, wrote := true, false
	defer func() {
		if unlock {
			reterr = errors.Join(reterr, s.unlock(ctx, id, token, !wrote))
		}
	}()

	switch {
	case digest == "" && d.SHA256 == "":
		return restv1.Artifact{}, &ValidationError{"sha256", "the content's sha256 was given neither when the upload was created nor now"}
	case digest != "" && d.SHA256 != "" && digest != d.SHA256:
		return restv1.Artifact{}, &ValidationError{"sha256", fmt.Sprintf("%s differs from the %s stated when the upload was created", digest, d.SHA256)}
	case digest == "":
		digest = d.SHA256
	}
	if err := ValidateSHA256("sha256", digest); err != nil {
		return restv1.Artifact{}, err
	}
	if d.Size != nil && d.Offset != *d.Size {
		return restv1.Artifact{}, &ValidationError{"size", fmt.Sprintf("the upload declared %d bytes and has received %d; send the rest from offset %d", *d.Size, d.Offset, d.Offset)}
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(d.HashState); err != nil {
		return restv1.Artifact{}, fmt.Errorf("restore sha256 state of upload %s: %w", id, err)
	}
	actual := hex.EncodeToString(h.Sum(nil))
	if actual != digest {
		unlock = false
		return restv1.Artifact{}, errors.Join(&DigestError{Expected: digest, Actual: actual}, s.dropUpload(ctx, id))
	}

	// The blob: this session's chunks become it, unless the same bytes are stored already.
	// Each step is idempotent, so a crash between two is completed by calling Finish again.
	// First the last, partial chunk, which the session kept until now.
	if len(d.Tail) > 0 {
		wrote = true
		n := int32(d.Offset / ChunkSize)
		if _, err := s.chunksOf(id).InsertOne(ctx, chunkDoc{ID: n, FilesID: id, N: n, Data: d.Tail}); err != nil && !mongo.IsDuplicateKeyError(err) {
			return restv1.Artifact{}, fmt.Errorf("write last chunk of upload %s: %w", id, err)
		}
	}
	// Then the files document of the blob's own GridFS bucket, then the catalogue entry.
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	f := fileDoc{ID: id, Length: d.Offset, ChunkSize: ChunkSize, UploadDate: now, Filename: actual}
	if _, err := s.bucketFilesOf(id).ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, f, options.Replace().SetUpsert(true)); err != nil {
		return restv1.Artifact{}, fmt.Errorf("store blob %s: %w", actual, err)
	}
	_, err = s.files.InsertOne(ctx, f)
	switch {
	case err == nil:
	case mongo.IsDuplicateKeyError(err):
		var existing fileDoc
		if err := s.files.FindOne(ctx, bson.D{{Key: "filename", Value: actual}}).Decode(&existing); err != nil {
			return restv1.Artifact{}, fmt.Errorf("find blob %s: %w", actual, err)
		}
		if existing.ID != id {
			if err := s.dropBucket(ctx, id); err != nil {
				return restv1.Artifact{}, fmt.Errorf("drop duplicate chunks of upload %s: %w", id, err)
			}
		}
	default:
		return restv1.Artifact{}, fmt.Errorf("store blob %s: %w", actual, err)
	}

	// The content is what its kind says, or nothing is kept.
	if err := s.checkContent(ctx, d.Spec.spec(), actual); err != nil {
		var invalid *ValidationError
		if !errors.As(err, &invalid) {
			return restv1.Artifact{}, err
		}
		unlock = false
		return restv1.Artifact{}, errors.Join(err, s.dropUpload(ctx, id), s.collectBlob(ctx, actual))
	}

	a := artifactDoc{ID: id, Spec: d.Spec, SHA256: actual, Size: d.Offset, Created: now, Creator: d.Creator, UploadID: id}
	if _, err := s.artifacts.InsertOne(ctx, a); err != nil {
		if !mongo.IsDuplicateKeyError(err) {
			return restv1.Artifact{}, fmt.Errorf("create artifact: %w", err)
		}
		var existing artifactDoc
		if err := s.artifacts.FindOne(ctx, identity(d.Spec.spec())).Decode(&existing); err != nil {
			return restv1.Artifact{}, fmt.Errorf("find conflicting artifact: %w", err)
		}
		if existing.UploadID != id {
			// Someone else created the artifact while this upload ran.
			unlock = false
			return restv1.Artifact{}, errors.Join(&ConflictError{ID: existing.ID}, s.dropUpload(ctx, id), s.collectBlob(ctx, actual))
		}
		a = existing // this upload's own artifact, from an earlier Finish that crashed
	}
	unlock = false
	if _, err := s.uploads.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return restv1.Artifact{}, fmt.Errorf("delete finished upload %s: %w", id, err)
	}
	return a.artifact(), nil
}

// Abort deletes an upload session and what it received.
func (s *Store) Abort(ctx context.Context, id string) error {
	d, err := s.getUpload(ctx, id)
	if err != nil {
		return err
	}
	if _, _, err := s.lock(ctx, id, d.Offset); err != nil {
		return err
	}
	return s.dropUpload(ctx, id)
}

// dropUpload deletes a session document and its chunks — unless the chunks are a blob's.
func (s *Store) dropUpload(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := s.uploads.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("delete upload %s: %w", id, err)
	}
	n, err := s.files.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return fmt.Errorf("check blob of upload %s: %w", id, err)
	}
	if n > 0 {
		return nil
	}
	if err := s.dropBucket(ctx, id); err != nil {
		return fmt.Errorf("delete chunks of upload %s: %w", id, err)
	}
	return nil
}

// ExpireUploads deletes the sessions that received nothing for the upload TTL, with their
// chunks, and returns how many it deleted; it also drops the chunks of blobs whose deletion
// was cut short. The controller runs it periodically (FerretDB has no TTL indexes).
func (s *Store) ExpireUploads(ctx context.Context) (int, error) {
	now := s.clock.Now()
	cur, err := s.uploads.Find(ctx, bson.D{{Key: "expires", Value: bson.D{{Key: "$lt", Value: now}}}, {Key: "lockUntil", Value: bson.D{{Key: "$lt", Value: now}}}})
	if err != nil {
		return 0, fmt.Errorf("find expired uploads: %w", err)
	}
	var docs []uploadDoc
	if err := cur.All(ctx, &docs); err != nil {
		return 0, fmt.Errorf("find expired uploads: %w", err)
	}
	for _, d := range docs {
		if err := s.dropUpload(ctx, d.ID); err != nil {
			return 0, err
		}
	}
	if err := s.dropOrphanBuckets(ctx); err != nil {
		return len(docs), err
	}
	return len(docs), nil
}

// dropOrphanBuckets drops the buckets ("blobs.ID.chunks", "blobs.ID.files") of neither a blob
// nor an upload session: left by a Delete or an expiry that stopped half way.
func (s *Store) dropOrphanBuckets(ctx context.Context) error {
	names, err := s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("list collections: %w", err)
	}
	seen := map[string]bool{}
	for _, name := range names {
		id, ok := bucketID(name)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		used := false
		for _, c := range []*mongo.Collection{s.files, s.uploads} {
			err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Err()
			switch {
			case err == nil:
				used = true
			case !errors.Is(err, mongo.ErrNoDocuments):
				return fmt.Errorf("check bucket %s: %w", id, err)
			}
		}
		if !used {
			if err := s.dropBucket(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// bucketID returns ID for the collections of a blob's bucket, "blobs.ID.chunks" and "blobs.ID.files".
func bucketID(collection string) (string, bool) {
	rest, ok := strings.CutPrefix(collection, bucketPrefix)
	if !ok {
		return "", false
	}
	for _, suffix := range []string{".chunks", ".files"} {
		if id, ok := strings.CutSuffix(rest, suffix); ok && id != "" && !strings.Contains(id, ".") {
			return id, true
		}
	}
	return "", false
}
