package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
)

// RandomContent returns n reproducible pseudo-random bytes for seed and their sha256 (hex).
func RandomContent(n int, seed uint64) ([]byte, string) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}
