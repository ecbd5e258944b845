package pki

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// The roll-over of the cluster's CAs, as stored in the PKI's secret. The three CAs (cluster,
// etcd, front proxy) roll over together: one request, one phase. While one runs, each CA's
// successor is stored under "<base>.next.crt" and "<base>.next.key".
const (
	// caGeneration is how many roll-overs the CAs have had (decimal; none stored: 0).
	caGeneration = "ca.generation"
	// caRotationPhase is the RotationPhase of the roll-over under way.
	caRotationPhase = "ca.rotation"
	// caRotationSince is when that phase began (RFC 3339, with the fraction of a second).
	caRotationSince = "ca.rotation.since"
	nextCASuffix    = ".next"
)

// The CAs of a cluster, in the order Ensure loads them, with the common name of the first of
// each (a successor's gets "-<generation+1>").
var clusterCAs = []struct{ base, cn string }{
	{clusterCA, "kubernetes"},
	{etcdCA, "etcd-ca"},
	{frontProxyCA, "front-proxy-ca"},
}

// CARotation is where the roll-over of a cluster's CAs stands. In each phase every host is given
// the trust bundles and the leaves of that phase (one host at a time) before AdvanceCARotation
// moves on, so a certificate is only ever presented to a party that trusts its CA:
//
//	phase    trusted        leaves signed by
//	AddNew   old, new       old
//	UseNew   new, old       new
//	DropOld  new            new
type CARotation struct {
	// Generation is how many roll-overs the CAs in use have had.
	Generation int64
	// Phase of the roll-over under way; "" when none is.
	Phase RotationPhase
	// Since is when Phase began; zero when none runs.
	Since time.Time
}

// caRotationOf reads the roll-over's state from a stored PKI.
func caRotationOf(data map[string][]byte) (CARotation, error) {
	var st CARotation
	g, err := generationOf(data, caGeneration, "the CAs' common names")
	if err != nil {
		return st, err
	}
	st.Generation = g
	if st.Phase, err = phaseOf(data, caRotationPhase); err != nil {
		return st, err
	}
	if v, ok := data[caRotationSince]; ok && st.Phase != "" {
		if st.Since, err = time.Parse(time.RFC3339Nano, string(v)); err != nil {
			return st, fmt.Errorf("%s is %q, not a time: restore it, or remove it (the roll-over then counts its phase from now)", caRotationSince, v)
		}
	}
	return st, nil
}

// generationOf reads the rotation count stored under key (none: 0); what names what depends
// on it, for the error.
func generationOf(data map[string][]byte, key, what string) (int64, error) {
	g, ok := data[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(g), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is %q, not a count: restore it (%s depend on it)", key, g, what)
	}
	return n, nil
}

// phaseOf reads the RotationPhase stored under key ("" when none).
func phaseOf(data map[string][]byte, key string) (RotationPhase, error) {
	switch p := RotationPhase(data[key]); p {
	case "", RotationAddNew, RotationUseNew, RotationDropOld:
		return p, nil
	default:
		return "", fmt.Errorf("%s is %q, not a rotation phase (%s, %s or %s)", key, p, RotationAddNew, RotationUseNew, RotationDropOld)
	}
}

// Next is the phase after p; "" after DropOld, when the rotation is over.
func (p RotationPhase) Next() RotationPhase {
	switch p {
	case RotationAddNew:
		return RotationUseNew
	case RotationUseNew:
		return RotationDropOld
	}
	return ""
}

// usesNew reports whether the new CA signs (the new key encrypts) in phase p.
func (p RotationPhase) usesNew() bool { return p == RotationUseNew || p == RotationDropOld }

// caRotation keeps a roll-over under way, or starts one when rotations asks for more than the
// CAs have had: each CA's successor is made and the phase is AddNew. A successor gone or
// damaged while a roll-over runs is an error naming what to restore: hosts may trust it already.
// It runs after the current CAs are loaded and before any leaf is issued, and sets e.signers.
func (e *ensurer) caRotation(rotations int64) error {
	for _, k := range []string{caGeneration, caRotationPhase, caRotationSince} {
		if v, ok := e.old[k]; ok {
			e.data[k] = v
		}
	}
	st, err := caRotationOf(e.data)
	if err != nil {
		return err
	}
	starting := st.Phase == "" && rotations > st.Generation
	if starting {
		st.Phase = RotationAddNew
	}
	if st.Phase == "" {
		delete(e.data, caRotationSince)
		for _, ca := range clusterCAs {
			if _, ok := e.old[ca.base+nextCASuffix+".crt"]; ok {
				return fmt.Errorf("%s is stored, but no CA roll-over is under way (%s is not set): restore %s, or remove %s and %s if no host was ever given it", ca.base+nextCASuffix+".crt", caRotationPhase, caRotationPhase, ca.base+nextCASuffix+".crt", ca.base+nextCASuffix+".key")
			}
		}
		maps.Copy(e.signers, e.cas)
		return nil
	}
	for _, ca := range clusterCAs {
		base := ca.base + nextCASuffix
		cn := ca.cn + "-" + strconv.FormatInt(st.Generation+2, 10)
		if err := e.keepCA(base, cn, starting, "a CA roll-over is under way ("+caRotationPhase+" is set) and hosts may trust it already"); err != nil {
			return err
		}
		e.signers[ca.base] = e.cas[ca.base]
		if st.Phase.usesNew() {
			e.signers[ca.base] = e.cas[base]
		}
	}
	if starting {
		e.data[caRotationPhase] = []byte(RotationAddNew)
	}
	if starting || st.Since.IsZero() {
		e.data[caRotationSince] = []byte(e.now.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// CARotation is where the roll-over of the bundle's CAs stands.
func (b *Bundle) CARotation() CARotation {
	st, _ := caRotationOf(b.data) // Ensure checked it
	return st
}

// NewClusterCA is the cluster CA a roll-over under way moves to (PEM); nil when none runs.
func (b *Bundle) NewClusterCA() []byte {
	if b.CARotation().Phase == "" {
		return nil
	}
	return b.get(clusterCA + nextCASuffix + ".crt")
}

// trust returns the PEM bundle hosts trust for the CA base in the bundle's phase: the signing
// CA first.
func (b *Bundle) trust(base string) []byte {
	return trustBundle(b.data, base)
}

func trustBundle(data map[string][]byte, base string) []byte {
	current, next := data[base+".crt"], data[base+nextCASuffix+".crt"]
	phase, _ := phaseOf(data, caRotationPhase)
	switch phase {
	case RotationAddNew:
		return bytes.Join([][]byte{current, next}, nil)
	case RotationUseNew:
		return bytes.Join([][]byte{next, current}, nil)
	case RotationDropOld:
		return bytes.Clone(next)
	}
	return bytes.Clone(current)
}

// AdvanceCARotation moves the roll-over of the CAs of the PKI stored under name one phase on,
// once every host of the cluster runs with the trust bundles and leaves of the current phase
// (the caller has rolled them out, and made sure what else trusts the cluster CA has the new
// one). After DropOld the successors become the CAs and the old ones are deleted. The step is
// written before it returns, with now as the time the next phase began; with no roll-over
// under way it does nothing.
func AdvanceCARotation(ctx context.Context, store Store, name string, now time.Time) (CARotation, error) {
	data, err := store.Get(ctx, name)
	if errors.Is(err, secrets.ErrNotFound) {
		return CARotation{}, fmt.Errorf("pki %s: %w", name, ErrNoPKI)
	}
	if err != nil {
		return CARotation{}, fmt.Errorf("pki %s: load from the secret store: %w", name, err)
	}
	st, err := caRotationOf(data)
	if err != nil || st.Phase == "" {
		return st, err
	}
	if st.Phase == RotationDropOld {
		for _, ca := range clusterCAs {
			for _, ext := range []string{".crt", ".key"} {
				data[ca.base+ext] = data[ca.base+nextCASuffix+ext]
				delete(data, ca.base+nextCASuffix+ext)
			}
		}
		st.Generation++
		data[caGeneration] = []byte(strconv.FormatInt(st.Generation, 10))
	}
	if st.Phase = st.Phase.Next(); st.Phase == "" {
		delete(data, caRotationPhase)
		delete(data, caRotationSince)
		st.Since = time.Time{}
	} else {
		st.Since = now.UTC()
		data[caRotationPhase] = []byte(st.Phase)
		data[caRotationSince] = []byte(st.Since.Format(time.RFC3339Nano))
	}
	if err := store.Put(ctx, name, data); err != nil {
		return st, fmt.Errorf("pki %s: save to the secret store: %w", name, err)
	}
	return st, nil
}

// loadCA reads and checks the CA stored under base at now.
func loadCA(data map[string][]byte, base string, now time.Time) (certs.KeyPair, error) {
	crtName, keyName := base+".crt", base+".key"
	cert, err := certs.DecodeCert(data[crtName])
	if err != nil {
		return certs.KeyPair{}, fmt.Errorf("%s: %w", crtName, err)
	}
	key, err := certs.DecodeKey(data[keyName])
	if err != nil {
		return certs.KeyPair{}, fmt.Errorf("%s: %w", keyName, err)
	}
	switch {
	case !cert.IsCA:
		return certs.KeyPair{}, fmt.Errorf("%s is not a CA certificate", crtName)
	case !certs.SamePublicKey(key, cert.PublicKey):
		return certs.KeyPair{}, fmt.Errorf("%s does not belong to %s", keyName, crtName)
	case now.After(cert.NotAfter):
		return certs.KeyPair{}, fmt.Errorf("%s expired on %s", crtName, cert.NotAfter.Format(time.RFC3339))
	}
	return certs.KeyPair{Cert: cert, Key: key}, nil
}
