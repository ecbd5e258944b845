package artifacts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/clock"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// ChunkSize of the blob bucket. FerretDB answers getMore with batches of up to 250 documents,
// which must stay under mongo-driver's 48 MB message limit: 128 KiB chunks keep them at 32 MB.
const ChunkSize = 128 << 10

// References tells which objects (releases) use a blob; the release kind implements it.
type References interface {
	// ReferencesTo lists, as "kind/namespace/name", what references the sha256.
	ReferencesTo(ctx context.Context, sha256 string) ([]string, error)
}

// Options configure a Store.
type Options struct {
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
	// UploadTTL is how long an upload session lives without a chunk; 24h when zero.
	UploadTTL time.Duration
	// LockTTL bounds how long a crashed writer can block its session; 1 minute when zero.
	LockTTL time.Duration
	// References is asked before an artifact is deleted; nothing references anything when nil.
	References References
	// Budget bounds the memory of transfers; DefaultTransferMemory when nil.
	Budget *Budget
	// MaxArtifactSize is the largest size an upload may declare; DefaultMaxArtifactSize when
	// zero.
	MaxArtifactSize int64
	// FreeSpace tells the free bytes of the volume of the embedded FerretDB's files, where an
	// upload takes about 4/3 of its size (binary data is stored as base64); nil when the store
	// cannot see its disk (an external MongoDB): then only MaxArtifactSize bounds a new upload.
	FreeSpace func() (int64, error)
	// SpaceReserve is the free space that new uploads leave on that volume;
	// DefaultSpaceReserve when zero.
	SpaceReserve int64
}

// DefaultMaxArtifactSize is Options.MaxArtifactSize when zero.
const DefaultMaxArtifactSize = 64 << 30

// DefaultSpaceReserve is Options.SpaceReserve when zero.
const DefaultSpaceReserve = 2 << 30

// Store is the artifact store.
type Store struct {
	artifacts, uploads, files, meta *mongo.Collection
	db                              *mongo.Database

	clock     clock.PassiveClock
	uploadTTL time.Duration
	lockTTL   time.Duration
	refs      References
	budget    *Budget

	maxArtifactSize int64
	freeSpace       func() (int64, error)
	spaceReserve    int64
	// creating serializes the space check and the insert of new upload sessions, so that two
	// sessions created at once do not both count on the same free space.
	creating sync.Mutex
}

// Open opens the store in db, creating indexes and migrating the schema.
func Open(ctx context.Context, db *mongo.Database, opts Options) (*Store, error) {
	s := &Store{
		artifacts: db.Collection("artifacts"),
		uploads:   db.Collection("uploads"),
		files:     db.Collection("blobs.files"),
		meta:      db.Collection("meta"),
		db:        db,
		clock:     opts.Clock,
		uploadTTL: opts.UploadTTL,
		lockTTL:   opts.LockTTL,
		refs:      opts.References,
		budget:    opts.Budget,

		maxArtifactSize: opts.MaxArtifactSize,
		freeSpace:       opts.FreeSpace,
		spaceReserve:    opts.SpaceReserve,
	}
	if s.maxArtifactSize == 0 {
		s.maxArtifactSize = DefaultMaxArtifactSize
	}
	if s.spaceReserve == 0 {
		s.spaceReserve = DefaultSpaceReserve
	}
	if s.budget == nil {
		s.budget = NewBudget(DefaultTransferMemory)
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.uploadTTL == 0 {
		s.uploadTTL = 24 * time.Hour
	}
	if s.lockTTL == 0 {
		s.lockTTL = time.Minute
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Documents as stored. Label keys may hold dots, which MongoDB field names may not, so labels
// are kept as a list of pairs, with "key=value" and "key" lists for label selectors.
type labelDoc struct {
	K string `bson:"k"`
	V string `bson:"v"`
}

type specDoc struct {
	Kind         string     `bson:"kind"`
	Name         string     `bson:"name"`
	Version      string     `bson:"version"`
	Architecture string     `bson:"architecture"`
	Labels       []labelDoc `bson:"labels"`
	LabelPairs   []string   `bson:"labelPairs"`
	LabelKeys    []string   `bson:"labelKeys"`
	Description  string     `bson:"description"`
}

type artifactDoc struct {
	ID       string    `bson:"_id"`
	Spec     specDoc   `bson:",inline"`
	SHA256   string    `bson:"sha256"`
	Size     int64     `bson:"size"`
	Created  time.Time `bson:"created"`
	Creator  string    `bson:"creator"`
	UploadID string    `bson:"uploadID"`
}

type uploadDoc struct {
	ID        string    `bson:"_id"`
	Spec      specDoc   `bson:"spec"`
	SHA256    string    `bson:"sha256"`
	Size      *int64    `bson:"size"`
	Offset    int64     `bson:"offset"`
	HashState []byte    `bson:"hashState"`
	Creator   string    `bson:"creator"`
	Created   time.Time `bson:"created"`
	Expires   time.Time `bson:"expires"`
	LockUntil time.Time `bson:"lockUntil"`
	LockToken string    `bson:"lockToken"`
	// Tail holds the bytes of the last, partial chunk, which is written at Finish.
	Tail []byte `bson:"tail"`
}

type fileDoc struct {
	ID         string    `bson:"_id"`
	Length     int64     `bson:"length"`
	ChunkSize  int32     `bson:"chunkSize"`
	UploadDate time.Time `bson:"uploadDate"`
	Filename   string    `bson:"filename"`
}

type chunkDoc struct {
	ID      int32  `bson:"_id"`
	FilesID string `bson:"files_id"`
	N       int32  `bson:"n"`
	Data    []byte `bson:"data"`
}

// Each blob is a GridFS bucket of its own, "blobs.ID" (the first upload's id): its chunks in
// "blobs.ID.chunks" (files_id = ID, n, and _id = n), and once complete its files document in
// "blobs.ID.files", so that mongo-driver's GridFS bucket of that name reads it. "blobs.files"
// is the catalogue of all blobs, by sha256 (filename). FerretDB v1 on SQLite answers any query
// whose filter is not exactly {_id: string} by reading and decoding the whole collection, and a
// sorted query by loading every match into memory: with one chunk collection per blob, written
// insert-only and read in insertion order, each upload and download costs its own size and
// memory stays flat. One shared blobs.chunks would make every download read every blob.
const bucketPrefix = "blobs."

// chunksOf is the collection of one blob's (or upload session's) chunks.
func (s *Store) chunksOf(id string) *mongo.Collection {
	return s.db.Collection(bucketPrefix + id + ".chunks")
}

// bucketFilesOf is the files collection of a blob's own GridFS bucket.
func (s *Store) bucketFilesOf(id string) *mongo.Collection {
	return s.db.Collection(bucketPrefix + id + ".files")
}

// dropBucket drops a blob's (or upload session's) chunks and bucket files collections.
func (s *Store) dropBucket(ctx context.Context, id string) error {
	if err := s.chunksOf(id).Drop(ctx); err != nil {
		return fmt.Errorf("drop chunks of %s: %w", id, err)
	}
	if err := s.bucketFilesOf(id).Drop(ctx); err != nil {
		return fmt.Errorf("drop bucket files of %s: %w", id, err)
	}
	return nil
}

func toSpecDoc(s restv1.ArtifactSpec) specDoc {
	d := specDoc{Kind: string(s.Kind), Name: s.Name, Version: s.Version, Architecture: s.Architecture, Description: s.Description,
		Labels: []labelDoc{}, LabelPairs: []string{}, LabelKeys: []string{}}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.Labels = append(d.Labels, labelDoc{K: k, V: s.Labels[k]})
		d.LabelPairs = append(d.LabelPairs, k+"="+s.Labels[k])
		d.LabelKeys = append(d.LabelKeys, k)
	}
	return d
}

func (d specDoc) spec() restv1.ArtifactSpec {
	s := restv1.ArtifactSpec{Kind: restv1.ArtifactKind(d.Kind), Name: d.Name, Version: d.Version, Architecture: d.Architecture, Description: d.Description}
	if len(d.Labels) > 0 {
		s.Labels = map[string]string{}
		for _, l := range d.Labels {
			s.Labels[l.K] = l.V
		}
	}
	return s
}

func (d *artifactDoc) artifact() restv1.Artifact {
	return restv1.Artifact{ArtifactSpec: d.Spec.spec(), ID: d.ID, SHA256: d.SHA256, Size: d.Size, Created: d.Created, Creator: d.Creator}
}

func (d *uploadDoc) upload() restv1.Upload {
	u := restv1.Upload{ID: d.ID, Artifact: d.Spec.spec(), SHA256: d.SHA256, Offset: d.Offset, Creator: d.Creator, Created: d.Created, Expires: d.Expires}
	if d.Size != nil {
		size := *d.Size
		u.Size = &size
	}
	return u
}

func newID() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b)
}

func identity(s restv1.ArtifactSpec) bson.D {
	return bson.D{{Key: "kind", Value: string(s.Kind)}, {Key: "name", Value: s.Name}, {Key: "version", Value: s.Version}, {Key: "architecture", Value: s.Architecture}}
}

// Budget is the transfer memory budget: uploads take their leases in Append, downloads take
// theirs with Budget.LeaseDownload for WriteRange's batch and their own read-ahead.
func (s *Store) Budget() *Budget { return s.budget }

// Get returns the artifact with this id.
func (s *Store) Get(ctx context.Context, id string) (restv1.Artifact, error) {
	var d artifactDoc
	if err := s.artifacts.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return restv1.Artifact{}, fmt.Errorf("artifact %s: %w", id, ErrNotFound)
		}
		return restv1.Artifact{}, fmt.Errorf("get artifact %s: %w", id, err)
	}
	return d.artifact(), nil
}

// Delete deletes an artifact, and its bytes when no other artifact has the same content. It
// refuses with *ReferencedError while something references the content and no other artifact
// provides it.
func (s *Store) Delete(ctx context.Context, id string) error {
	a, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	others, err := s.artifacts.CountDocuments(ctx, bson.D{{Key: "sha256", Value: a.SHA256}, {Key: "_id", Value: bson.D{{Key: "$ne", Value: id}}}})
	if err != nil {
		return fmt.Errorf("count artifacts with sha256 %s: %w", a.SHA256, err)
	}
	if others == 0 && s.refs != nil {
		by, err := s.refs.ReferencesTo(ctx, a.SHA256)
		if err != nil {
			return fmt.Errorf("check references to artifact %s: %w", id, err)
		}
		if len(by) > 0 {
			return &ReferencedError{By: by}
		}
	}
	if _, err := s.artifacts.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("delete artifact %s: %w", id, err)
	}
	return s.collectBlob(ctx, a.SHA256)
}

// collectBlob deletes the blob with this digest when no artifact uses it.
func (s *Store) collectBlob(ctx context.Context, digest string) error {
	n, err := s.artifacts.CountDocuments(ctx, bson.D{{Key: "sha256", Value: digest}})
	if err != nil {
		return fmt.Errorf("count artifacts with sha256 %s: %w", digest, err)
	}
	if n > 0 {
		return nil
	}
	var f fileDoc
	if err := s.files.FindOne(ctx, bson.D{{Key: "filename", Value: digest}}).Decode(&f); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		return fmt.Errorf("find blob %s: %w", digest, err)
	}
	// Catalogue entry first: a crash after it leaves an orphan bucket, which the janitor drops.
	if _, err := s.files.DeleteOne(ctx, bson.D{{Key: "_id", Value: f.ID}}); err != nil {
		return fmt.Errorf("delete blob %s: %w", digest, err)
	}
	if err := s.dropBucket(ctx, f.ID); err != nil {
		return fmt.Errorf("delete blob %s: %w", digest, err)
	}
	return nil
}

// Filter selects artifacts in List.
type Filter struct {
	Kind restv1.ArtifactKind
	Name string
	// Labels is a parsed label selector; nil selects everything.
	Labels labels.Selector
}

// List returns up to limit artifacts after the continue token, ordered by id.
func (s *Store) List(ctx context.Context, f Filter, limit int64, cont string) (restv1.ArtifactList, error) {
	q := bson.D{}
	if f.Kind != "" {
		q = append(q, bson.E{Key: "kind", Value: string(f.Kind)})
	}
	if f.Name != "" {
		q = append(q, bson.E{Key: "name", Value: f.Name})
	}
	if cont != "" {
		q = append(q, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: cont}}})
	}
	if f.Labels != nil {
		sel, err := selectorQuery(f.Labels)
		if err != nil {
			return restv1.ArtifactList{}, err
		}
		q = append(q, sel...)
	}
	cur, err := s.artifacts.Find(ctx, q, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(limit+1))
	if err != nil {
		return restv1.ArtifactList{}, fmt.Errorf("list artifacts: %w", err)
	}
	var docs []artifactDoc
	if err := cur.All(ctx, &docs); err != nil {
		return restv1.ArtifactList{}, fmt.Errorf("list artifacts: %w", err)
	}
	out := restv1.ArtifactList{Items: []restv1.Artifact{}}
	for i := range docs {
		if int64(i) == limit {
			out.Continue = docs[i-1].ID
			break
		}
		out.Items = append(out.Items, docs[i].artifact())
	}
	return out, nil
}

// selectorQuery turns a label selector into a query on labelPairs and labelKeys.
func selectorQuery(sel labels.Selector) (bson.D, error) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, &ValidationError{"labelSelector", "selects nothing"}
	}
	q := bson.D{}
	pairs := func(key string, values []string) bson.A {
		a := bson.A{}
		for _, v := range values {
			a = append(a, key+"="+v)
		}
		return a
	}
	for _, r := range reqs {
		key, values := r.Key(), r.ValuesUnsorted()
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			q = append(q, bson.E{Key: "labelPairs", Value: bson.D{{Key: "$in", Value: pairs(key, values)}}})
		case selection.NotEquals, selection.NotIn:
			q = append(q, bson.E{Key: "labelPairs", Value: bson.D{{Key: "$nin", Value: pairs(key, values)}}})
		case selection.Exists:
			q = append(q, bson.E{Key: "labelKeys", Value: key})
		case selection.DoesNotExist:
			q = append(q, bson.E{Key: "labelKeys", Value: bson.D{{Key: "$ne", Value: key}}})
		default:
			return nil, &ValidationError{"labelSelector", fmt.Sprintf("operator %q is not supported", r.Operator())}
		}
	}
	if len(q) <= 1 {
		return q, nil
	}
	and := bson.A{}
	for _, e := range q {
		and = append(and, bson.D{e})
	}
	return bson.D{{Key: "$and", Value: and}}, nil
}
