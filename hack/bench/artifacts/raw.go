package main

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/mongodb"
)

// rawDatabase is the database of the controller's artifact store (--mongo-database default);
// rawBucket keeps the benchmark's files apart from the store's "blobs" bucket.
const (
	rawDatabase = "edgefleet"
	rawBucket   = "benchraw"
)

// rawStore is mongo-driver's GridFS bucket on the controller's embedded FerretDB, reached
// over the same Unix socket the controller's own client uses, with the store's chunk size.
type rawStore struct {
	client *mongo.Client
	bucket *mongo.GridFSBucket
}

func newRawStore(ctx context.Context, socket string) (*rawStore, error) {
	c, err := mongodb.Connect(ctx, "mongodb://"+url.PathEscape(socket)+"/")
	if err != nil {
		return nil, fmt.Errorf("embedded FerretDB at %s: %w", socket, err)
	}
	b := c.Database(rawDatabase).GridFSBucket(options.GridFSBucket().SetName(rawBucket).SetChunkSizeBytes(artifacts.ChunkSize))
	return &rawStore{client: c, bucket: b}, nil
}

func (s *rawStore) upload(ctx context.Context, name string, r io.Reader, _ int64, _ string) (string, error) {
	id, err := s.bucket.UploadFromStream(ctx, name, r)
	if err != nil {
		return "", err
	}
	return id.Hex(), nil
}

func (s *rawStore) download(ctx context.Context, ref string, w io.Writer) error {
	id, err := bson.ObjectIDFromHex(ref)
	if err != nil {
		return err
	}
	_, err = s.bucket.DownloadToStream(ctx, id, w)
	return err
}

func (s *rawStore) remove(ctx context.Context, ref string) error {
	id, err := bson.ObjectIDFromHex(ref)
	if err != nil {
		return err
	}
	return s.bucket.Delete(ctx, id)
}

func (s *rawStore) close() error { return s.client.Disconnect(context.Background()) }
