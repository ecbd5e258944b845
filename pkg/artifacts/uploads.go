package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// flushChunks is how many chunks an append buffers at most before it writes them and saves its
// progress; fewer when the transfer memory budget is short (see Budget).
const flushChunks = 32

// CreateUpload starts an upload session for an artifact. It fails early with *ConflictError when
// the artifact exists already, and with *TooLargeError or *SpaceError when the declared size is
// over the maximum artifact size or does not fit in the free space (see Options).
func (s *Store) CreateUpload(ctx context.Context, req restv1.CreateUpload, creator string) (restv1.Upload, error) {
	if err := ValidateSpec(req.ArtifactSpec); err != nil {
		return restv1.Upload{}, err
	}
	if req.SHA256 != "" {
		if err := ValidateSHA256("sha256", req.SHA256); err != nil {
			return restv1.Upload{}, err
		}
	}
	if req.Size != nil && *req.Size < 0 {
		return restv1.Upload{}, &ValidationError{"size", fmt.Sprintf("must not be negative, got %d", *req.Size)}
	}
	if err := s.checkNew(ctx, req.ArtifactSpec); err != nil {
		return restv1.Upload{}, err
	}
	if req.Size != nil {
		s.creating.Lock()
		defer s.creating.Unlock()
		if err := s.checkSpace(ctx, *req.Size); err != nil {
			return restv1.Upload{}, err
		}
	}
	state, err := sha256.New().(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return restv1.Upload{}, fmt.Errorf("sha256 state: %w", err)
	}
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	d := uploadDoc{
		ID: newID(), Spec: toSpecDoc(req.ArtifactSpec), SHA256: req.SHA256, Size: req.Size,
		HashState: state, Creator: creator, Created: now, Expires: now.Add(s.uploadTTL),
	}
	if _, err := s.uploads.InsertOne(ctx, d); err != nil {
		return restv1.Upload{}, fmt.Errorf("create upload session: %w", err)
	}
	return d.upload(), nil
}

func (s *Store) checkNew(ctx context.Context, spec restv1.ArtifactSpec) error {
	var existing artifactDoc
	err := s.artifacts.FindOne(ctx, identity(spec)).Decode(&existing)
	switch {
	case err == nil:
		return &ConflictError{ID: existing.ID}
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil
	default:
		return fmt.Errorf("look up artifact %s/%s@%s: %w", spec.Kind, spec.Name, spec.Version, err)
	}
}

// GetUpload returns an upload session.
func (s *Store) GetUpload(ctx context.Context, id string) (restv1.Upload, error) {
	d, err := s.getUpload(ctx, id)
	if err != nil {
		return restv1.Upload{}, err
	}
	return d.upload(), nil
}

// ListUploads returns up to limit upload sessions that have not expired, oldest first (the
// web UI shows their progress: Offset of Size).
func (s *Store) ListUploads(ctx context.Context, limit int64) ([]restv1.Upload, error) {
	opts := options.Find().SetSort(bson.D{{Key: "created", Value: 1}}).SetLimit(limit).
		SetProjection(bson.D{{Key: "hashState", Value: 0}, {Key: "tail", Value: 0}, {Key: "lockToken", Value: 0}})
	cur, err := s.uploads.Find(ctx, s.unexpired(), opts)
	if err != nil {
		return nil, fmt.Errorf("list upload sessions: %w", err)
	}
	var docs []uploadDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list upload sessions: %w", err)
	}
	out := make([]restv1.Upload, 0, len(docs))
	for i := range docs {
		out = append(out, docs[i].upload())
	}
	return out, nil
}

// unexpired selects the upload sessions that have not expired.
func (s *Store) unexpired() bson.D {
	return bson.D{{Key: "expires", Value: bson.D{{Key: "$gt", Value: s.clock.Now().UTC()}}}}
}

func (s *Store) getUpload(ctx context.Context, id string) (*uploadDoc, error) {
	var d uploadDoc
	if err := s.uploads.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, fmt.Errorf("upload %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("get upload %s: %w", id, err)
	}
	if s.clock.Now().After(d.Expires) {
		return nil, fmt.Errorf("upload %s expired at %s: %w", id, d.Expires.Format(time.RFC3339), ErrNotFound)
	}
	return &d, nil
}

// lock takes the session's write lock at this offset. It fails with *OffsetError when the
// session is elsewhere and ErrBusy when another request holds the lock.
func (s *Store) lock(ctx context.Context, id string, offset int64) (*uploadDoc, string, error) {
	d, err := s.getUpload(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if d.Offset != offset {
		return nil, "", &OffsetError{Expected: d.Offset, Got: offset}
	}
	now := s.clock.Now()
	token := newID()
	res, err := s.uploads.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "offset", Value: offset}, {Key: "lockUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "lockUntil", Value: now.Add(s.lockTTL)}, {Key: "lockToken", Value: token}}}})
	if err != nil {
		return nil, "", fmt.Errorf("lock upload %s: %w", id, err)
	}
	if res.MatchedCount == 0 {
		return nil, "", fmt.Errorf("upload %s: %w", id, ErrBusy)
	}
	if d.LockToken != "" {
		if err := s.dropUnsaved(ctx, d); err != nil {
			return nil, "", errors.Join(err, s.unlock(ctx, id, token, false))
		}
	}
	return d, token, nil
}

// dropUnsaved drops the chunks from the session's offset on, which a holder of the lock that
// did not release it cleanly (it crashed, or failed after writing chunks it could not record)
// may have left. It reads the session's chunk collection (FerretDB pushes no range down), so
// only then; a session whose chunks are a blob's already (Finish cut short) is left alone.
func (s *Store) dropUnsaved(ctx context.Context, d *uploadDoc) error {
	err := s.files.FindOne(ctx, bson.D{{Key: "_id", Value: d.ID}}).Err()
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("check blob of upload %s: %w", d.ID, err)
	}
	if _, err := s.chunksOf(d.ID).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: int32(d.Offset / ChunkSize)}}}}); err != nil {
		return fmt.Errorf("drop unsaved chunks of upload %s: %w", d.ID, err)
	}
	return nil
}

// unlock releases the session's lock. Unless clean (chunks past the offset may have been
// written), the token stays, which tells the next holder to drop them.
func (s *Store) unlock(ctx context.Context, id, token string, clean bool) error {
	set := bson.D{{Key: "lockUntil", Value: time.Time{}}}
	if clean {
		set = append(set, bson.E{Key: "lockToken", Value: ""})
	}
	_, err := s.uploads.UpdateOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: id}, {Key: "lockToken", Value: token}},
		bson.D{{Key: "$set", Value: set}})
	if err != nil {
		return fmt.Errorf("unlock upload %s: %w", id, err)
	}
	return nil
}

// Append writes the bytes of r at offset and returns the session's new offset. Progress is
// saved every few MiB, so when r fails half way (a client gone) the bytes received so far are
// kept, Append returns *ReadError and the upload resumes from the returned offset. It first
// waits for its lease of the transfer memory budget, as long as ctx lasts. A chunk at another offset than the
// session's fails with *OffsetError and changes nothing. Append does not stop when ctx is
// cancelled (an HTTP request's context is, as soon as the client goes): it runs until r ends or
// fails, so that what arrived is saved.
func (s *Store) Append(ctx context.Context, id string, offset int64, r io.Reader) (_ int64, reterr error) {
	lease, err := s.budget.leaseUpload(ctx, "upload "+id)
	if err != nil {
		return 0, err
	}
	defer lease.Release()
	ctx = context.WithoutCancel(ctx)
	d, token, err := s.lock(ctx, id, offset)
	if err != nil {
		return 0, err
	}
	var w *chunkWriter
	defer func() { reterr = errors.Join(reterr, s.unlock(ctx, id, token, w == nil || !w.unrecorded)) }()

	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(d.HashState); err != nil {
		return offset, fmt.Errorf("restore sha256 state of upload %s: %w", id, err)
	}
	w = &chunkWriter{s: s, id: id, token: token, hash: h, saved: offset, flush: lease.Batch, undeclared: d.Size == nil}
	if err := w.start(d); err != nil {
		return offset, err
	}
	buf := make([]byte, 32<<10)
	var read int64
	for {
		n, readErr := r.Read(buf)
		read += int64(n)
		if n > 0 {
			if d.Size != nil && w.received()+int64(n) > *d.Size {
				return w.saved, &ValidationError{"body", fmt.Sprintf("the upload declared a size of %d bytes and received more", *d.Size)}
			}
			if d.Size == nil && w.received()+int64(n) > s.maxArtifactSize {
				return w.saved, &TooLargeError{Size: w.received() + int64(n), Max: s.maxArtifactSize, Undeclared: true}
			}
			if err := w.write(ctx, buf[:n]); err != nil {
				return w.saved, err
			}
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			// Keep what arrived: the client resumes from there.
			if err := w.save(ctx, true); err != nil {
				return w.saved, errors.Join(fmt.Errorf("read the body of upload %s: %w", id, readErr), err)
			}
			return w.saved, &ReadError{Upload: id, Read: read, Offset: w.saved, Err: readErr}
		}
	}
	if err := w.save(ctx, true); err != nil {
		return w.saved, err
	}
	return w.saved, nil
}

// chunkWriter appends to a session's chunks, insert-only. saved is the offset recorded in the
// session, and hash covers exactly the bytes before it. Chunk number base starts with tail, the
// bytes of the last, partial chunk, which the session keeps (it is written as a chunk at
// Finish); pending holds complete chunks before it. Nothing of pending or tail past saved is
// written yet.
type chunkWriter struct {
	s       *Store
	id      string
	token   string
	hash    hash.Hash
	saved   int64
	base    int32
	tail    []byte
	pending []any
	// flush is how many chunks pending holds before they are written.
	flush int
	// undeclared: the session declared no size, so each save first checks the room for what
	// it adds (checkRoom); a declared size was checked when the session was created.
	undeclared bool
	chunks     *mongo.Collection
	// unrecorded: chunks past saved may be written.
	unrecorded bool
}

func (w *chunkWriter) received() int64 { return int64(w.base)*ChunkSize + int64(len(w.tail)) }

// start takes the saved part of the last, partial chunk from the session. (Chunks past the
// saved offset, left by a writer that failed, were dropped when the lock was taken.)
func (w *chunkWriter) start(d *uploadDoc) error {
	w.chunks = w.s.chunksOf(w.id)
	w.base = int32(w.saved / ChunkSize)
	keep := int(w.saved % ChunkSize)
	if len(d.Tail) != keep {
		return fmt.Errorf("upload %s is corrupt: its partial chunk has %d bytes, want %d", w.id, len(d.Tail), keep)
	}
	w.tail = make([]byte, 0, ChunkSize)
	w.tail = append(w.tail, d.Tail...)
	return nil
}

func (w *chunkWriter) write(ctx context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), ChunkSize-len(w.tail))
		w.tail = append(w.tail, p[:n]...)
		p = p[n:]
		if len(w.tail) == ChunkSize {
			w.pending = append(w.pending, chunkDoc{ID: w.base, FilesID: w.id, N: w.base, Data: w.tail})
			w.base++
			w.tail = make([]byte, 0, ChunkSize)
			if len(w.pending) == w.flush {
				if err := w.save(ctx, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// save inserts the pending chunks, hashes the bytes they add (and those of the partial tail
// when withTail) and records the new offset, hash state and tail. A crash before the record
// leaves chunks that the next append drops.
func (w *chunkWriter) save(ctx context.Context, withTail bool) error {
	if len(w.pending) == 0 && !withTail {
		return nil
	}
	if w.undeclared {
		if err := w.s.checkRoom(ctx, w.saved, w.received()-w.saved); err != nil {
			return err
		}
	}
	if len(w.pending) > 0 {
		w.unrecorded = true
		if _, err := w.chunks.InsertMany(ctx, w.pending); err != nil {
			return fmt.Errorf("write chunks of upload %s: %w", w.id, err)
		}
	}
	saved := w.saved
	add := func(n int32, data []byte) {
		start := int64(n) * ChunkSize
		if skip := saved - start; skip < int64(len(data)) {
			w.hash.Write(data[max(skip, 0):])
			saved = start + int64(len(data))
		}
	}
	for _, c := range w.pending {
		add(c.(chunkDoc).N, c.(chunkDoc).Data)
	}
	var tail []byte
	if withTail {
		add(w.base, w.tail)
		tail = w.tail
	}
	state, err := w.hash.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return fmt.Errorf("save sha256 state of upload %s: %w", w.id, err)
	}
	now := w.s.clock.Now()
	res, err := w.s.uploads.UpdateOne(ctx, bson.D{{Key: "_id", Value: w.id}, {Key: "lockToken", Value: w.token}},
		bson.D{{Key: "$set", Value: bson.D{
			{Key: "offset", Value: saved}, {Key: "hashState", Value: state}, {Key: "tail", Value: tail},
			{Key: "expires", Value: now.Add(w.s.uploadTTL)}, {Key: "lockUntil", Value: now.Add(w.s.lockTTL)},
		}}})
	if err != nil {
		return fmt.Errorf("save progress of upload %s: %w", w.id, err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("upload %s: lost the write lock (held longer than %s): %w", w.id, w.s.lockTTL, ErrBusy)
	}
	w.saved = saved
	w.pending = nil
	w.unrecorded = false
	return nil
}
