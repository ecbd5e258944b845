package enrollment

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// Where and how token records are kept: a Secret per token in the Site's namespace (Secrets,
// because they are encrypted at rest like every other credential edgefleet keeps, and readable
// only by who may read Secrets there; the secret part is not in them, only its hash).
const (
	// SecretType is the type of a token record's Secret.
	SecretType corev1.SecretType = "edgefleet.io/enrollment-token"
	// SiteLabel names the site a token record belongs to, for listing.
	SiteLabel = "edgefleet.io/enrollment-site"
	// secretPrefix + id is the name of a token record's Secret.
	secretPrefix = "enrollment-token-"

	keySite      = "site"
	keyHash      = "sha256"
	keyCreatedBy = "createdBy"
	keyCreated   = "created"
	keyExpires   = "expires"
	keyRevoked   = "revoked"
	keyUsedBy    = "usedBy"
	keyMachine   = "machine"
	keyUsed      = "used"
)

// SecretName is the name of the Secret that records token id.
func SecretName(id string) string { return secretPrefix + id }

// toSecret writes r into s (a new Secret or the one read), keeping s's metadata.
func (r Record) toSecret(s *corev1.Secret) {
	s.Namespace, s.Name, s.Type = r.Namespace, SecretName(r.ID), SecretType
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[SiteLabel] = r.Site
	s.Data = map[string][]byte{
		keySite:      []byte(r.Site),
		keyHash:      []byte(r.Hash),
		keyCreatedBy: []byte(r.CreatedBy),
		keyCreated:   []byte(r.Created.UTC().Format(time.RFC3339)),
		keyExpires:   []byte(r.Expires.UTC().Format(time.RFC3339)),
		keyRevoked:   []byte(strconv.FormatBool(r.Revoked)),
	}
	if r.UsedBy != "" {
		s.Data[keyUsedBy] = []byte(r.UsedBy)
		s.Data[keyMachine] = []byte(r.Machine)
		s.Data[keyUsed] = []byte(r.Used.UTC().Format(time.RFC3339))
	}
}

// recordOf reads a token record's Secret.
func recordOf(s *corev1.Secret) (Record, error) {
	if s.Type != SecretType || len(s.Name) <= len(secretPrefix) || s.Name[:len(secretPrefix)] != secretPrefix {
		return Record{}, fmt.Errorf("secret %s/%s is not an enrollment token record", s.Namespace, s.Name)
	}
	r := Record{
		ID: s.Name[len(secretPrefix):], Namespace: s.Namespace,
		Site: string(s.Data[keySite]), Hash: string(s.Data[keyHash]), CreatedBy: string(s.Data[keyCreatedBy]),
		Revoked: string(s.Data[keyRevoked]) == "true",
		UsedBy:  string(s.Data[keyUsedBy]), Machine: string(s.Data[keyMachine]),
	}
	for key, t := range map[string]*time.Time{keyCreated: &r.Created, keyExpires: &r.Expires, keyUsed: &r.Used} {
		if len(s.Data[key]) == 0 && key != keyExpires {
			continue
		}
		v, err := time.Parse(time.RFC3339, string(s.Data[key]))
		if err != nil {
			return Record{}, fmt.Errorf("enrollment token record %s/%s: %s: %w", s.Namespace, s.Name, key, err)
		}
		*t = v
	}
	if r.Site == "" || r.Hash == "" {
		return Record{}, fmt.Errorf("enrollment token record %s/%s lacks its site or hash", s.Namespace, s.Name)
	}
	return r, nil
}

// newSecret is the Secret of a new record.
func (r Record) newSecret() *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{}}
	r.toSecret(s)
	return s
}

// wire is what the REST API says of r at now (never the token).
func (r Record) wire(now time.Time) restv1.EnrollmentToken {
	t := restv1.EnrollmentToken{
		ID: r.ID, Namespace: r.Namespace, Site: r.Site, CreatedBy: r.CreatedBy,
		Created: r.Created, Expires: r.Expires, State: r.State(now), UsedBy: r.UsedBy, Machine: r.Machine,
	}
	if r.UsedBy != "" {
		used := r.Used
		t.Used = &used
	}
	return t
}
