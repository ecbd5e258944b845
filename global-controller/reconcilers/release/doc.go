// Package release reconciles Release objects: it checks that every artifact a release names
// (OS image, packages, charts, images, by sha256) is in the artifact store as an artifact of
// the kind its field names, and that the packages' manifests go together (Check, a decision
// without I/O), and says so in the Ready condition, rechecking a release whose artifacts are
// missing or of the wrong kind until they are not. Once Ready a release stays
// Ready: the artifact store refuses to delete an artifact a Release references (References,
// wired into the store by the setup package, answers it with the names of the releases).
package release
