// Package mongodb connects edgefleet to its MongoDB: a real server given by URI, or — the
// zero-config default — FerretDB v1 embedded in-process on SQLite, reached through mongo-driver
// over a Unix socket in its data directory (mode 0700, so no other local user can connect).
// FerretDB has no transactions, change streams or TTL indexes; nothing in edgefleet needs them.
package mongodb
