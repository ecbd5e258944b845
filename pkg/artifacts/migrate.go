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
				{s.chunks, bson.D{{Key: "files_id", Value: 1}, {Key: "n", Value: 1}}, true},
				{s.uploads, bson.D{{Key: "expires", Value: 1}}, false},
			}
			for _, i := range idx {
				if _, err := i.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: i.keys, Options: options.Index().SetUnique(i.unique)}); err != nil {
					return fmt.Errorf("create index %v on %s: %w", i.keys, i.coll.Name(), err)
				}
			}
			return nil
		},
	}
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
