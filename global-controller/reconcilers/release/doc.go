// Package release reconciles Release objects: it checks that every artifact a release names
// (OS image, packages, charts, by sha256) is in the artifact store and says so in the Ready
// condition, rechecking a release that is not Ready until it is. Once Ready a release stays
// Ready: the artifact store refuses to delete an artifact a Release references (References,
// wired into the store by the setup package, answers it with the names of the releases).
package release
