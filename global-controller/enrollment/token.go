package enrollment

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

const (
	idBytes     = 8  // 16 hex digits: a Secret name part, unique enough per namespace
	secretBytes = 32 // 256 bits: no salt or slow hash is needed against guessing
)

// NewToken makes a token "<id>.<secret>" from rnd (crypto/rand in production).
func NewToken(rnd io.Reader) (token, id string, err error) {
	b := make([]byte, idBytes+secretBytes)
	if _, err := io.ReadFull(rnd, b); err != nil {
		return "", "", fmt.Errorf("make enrollment token: %w", err)
	}
	id = hex.EncodeToString(b[:idBytes])
	return id + "." + base64.RawURLEncoding.EncodeToString(b[idBytes:]), id, nil
}

// ParseToken splits a token into its id and secret, refusing anything not shaped like one.
func ParseToken(token string) (id, secret string, err error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok {
		return "", "", fmt.Errorf("enrollment token is malformed: want <id>.<secret>")
	}
	if len(id) != 2*idBytes || strings.Trim(id, "0123456789abcdef") != "" {
		return "", "", fmt.Errorf("enrollment token is malformed: its id must be %d lower-case hex digits", 2*idBytes)
	}
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	if err != nil || len(raw) != secretBytes {
		return "", "", fmt.Errorf("enrollment token is malformed: its secret must be %d bytes in unpadded base64url", secretBytes)
	}
	return id, secret, nil
}

// HashSecret is what the global cluster keeps of a token's secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Record is what the global cluster keeps of a token.
type Record struct {
	ID        string
	Namespace string
	Site      string
	Hash      string // HashSecret of the secret part
	CreatedBy string
	Created   time.Time
	Expires   time.Time
	Revoked   bool
	// UsedBy is the fingerprint of the site cluster that enrolled with the token; empty while
	// unused. Machine is the name that machine gave, Used when.
	UsedBy  string
	Machine string
	Used    time.Time
	// Failures counts the attempts with the token that did not enroll, once it proved its
	// secret; Server.MaxFailures of them end it.
	Failures int
}

// State is where the token is in its life at now; a revoked token is Revoked even when expired
// or used, a used one Used even when expired.
func (r Record) State(now time.Time) restv1.EnrollmentTokenState {
	switch {
	case r.Revoked:
		return restv1.TokenRevoked
	case r.UsedBy != "":
		return restv1.TokenUsed
	case !now.Before(r.Expires):
		return restv1.TokenExpired
	}
	return restv1.TokenValid
}

// Refusal is why an enrollment is refused: Reason is a CamelCase word for programs, Message a
// sentence for people. Neither carries the token.
type Refusal struct {
	Reason  string
	Message string
	// Status is the HTTP status to answer with.
	Status int
}

func (r *Refusal) Error() string { return r.Message }

// Reasons of refusals.
const (
	ReasonMalformed     = "Malformed"
	ReasonUnknownToken  = "UnknownToken"
	ReasonRevoked       = "TokenRevoked"
	ReasonExpired       = "TokenExpired"
	ReasonOtherSite     = "TokenForAnotherSite"
	ReasonUsed          = "TokenUsed"
	ReasonUnsafe        = "KubeconfigUnsafe"
	ReasonTooPrivileged = "CredentialTooPrivileged"
	ReasonLacksAccess   = "CredentialLacksAccess"
	ReasonUnreachable   = "SiteUnreachable"
	ReasonSiteNotFound  = "SiteNotFound"
	ReasonNoVault       = "VaultNotConfigured"
	ReasonAddress       = "SiteAddressRefused"
	ReasonTooMany       = "TokenAttemptsExhausted"
)

// CheckToken decides whether a token whose record is rec (nil: none with its id) and whose
// secret part is secret may enroll site (namespace/name) at now, after at most maxFailures
// attempts that did not enroll. The fingerprint of the enrolling cluster is checked later, by
// CheckMachine, once its kubeconfig was read.
func CheckToken(rec *Record, secret, namespace, site string, now time.Time, maxFailures int) *Refusal {
	if rec == nil || subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(rec.Hash)) != 1 {
		// The same answer for an id that does not exist and a wrong secret: nothing to learn.
		return &Refusal{ReasonUnknownToken, fmt.Sprintf("the enrollment token is not one issued for namespace %q (or it was deleted)", namespace), 401}
	}
	switch {
	case rec.Revoked:
		return &Refusal{ReasonRevoked, fmt.Sprintf("enrollment token %s was revoked", rec.ID), 401}
	case !now.Before(rec.Expires):
		return &Refusal{ReasonExpired, fmt.Sprintf("enrollment token %s expired at %s", rec.ID, rec.Expires.UTC().Format(time.RFC3339)), 401}
	case rec.Failures >= maxFailures:
		return &Refusal{ReasonTooMany, fmt.Sprintf("enrollment token %s is used up: %d attempts with it did not enroll, the limit is %d; issue a new token (edgefleet site token create %s -n %s) and enroll with it",
			rec.ID, rec.Failures, maxFailures, rec.Site, rec.Namespace), 403}
	case rec.Namespace != namespace || rec.Site != site:
		return &Refusal{ReasonOtherSite, fmt.Sprintf("enrollment token %s was issued for site %s/%s, not %s/%s", rec.ID, rec.Namespace, rec.Site, namespace, site), 403}
	}
	return nil
}

// CheckMachine decides whether the cluster of fingerprint may use rec: an unused token, or one
// this very cluster used already (a retry after a reboot or a lost answer).
func CheckMachine(rec Record, fingerprint string) *Refusal {
	if rec.UsedBy != "" && rec.UsedBy != fingerprint {
		return &Refusal{ReasonUsed, fmt.Sprintf("enrollment token %s was already used by machine %q (cluster %s) at %s; issue a new token to enroll another machine",
			rec.ID, rec.Machine, short(rec.UsedBy), rec.Used.UTC().Format(time.RFC3339)), 403}
	}
	return nil
}

// TTL decides a new token's lifetime: requested (a Go duration, "" for def), between a minute
// and max.
func TTL(requested string, def, maxTTL time.Duration) (time.Duration, error) {
	if requested == "" {
		return min(def, maxTTL), nil
	}
	d, err := time.ParseDuration(requested)
	switch {
	case err != nil:
		return 0, fmt.Errorf("ttl %q is not a duration such as 4h or 90m", requested)
	case d < time.Minute:
		return 0, fmt.Errorf("ttl %s is shorter than a minute", d)
	case d > maxTTL:
		return 0, fmt.Errorf("ttl %s is longer than the controller's maximum %s (--enrollment-token-max-ttl)", d, maxTTL)
	}
	return d, nil
}

// short abbreviates a fingerprint for messages.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}
