package pki_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/pki"
)

// presented are the certificates hosts show each other, by what they are, and the trust
// bundle each is checked against (the file of the host on the other end).
type presented struct {
	leaf  string // a control-plane member's or node's file
	trust string // the file that trusts its CA
	usage x509.ExtKeyUsage
}

var presentedLeaves = []presented{
	{"pki/apiserver.crt", "pki/ca.crt", x509.ExtKeyUsageServerAuth},
	{"pki/apiserver-kubelet-client.crt", "pki/ca.crt", x509.ExtKeyUsageClientAuth},
	{"pki/apiserver-etcd-client.crt", "pki/etcd/ca.crt", x509.ExtKeyUsageClientAuth},
	{"pki/etcd/server.crt", "pki/etcd/ca.crt", x509.ExtKeyUsageServerAuth},
	{"pki/etcd/peer.crt", "pki/etcd/ca.crt", x509.ExtKeyUsageClientAuth},
	{"pki/front-proxy-client.crt", "pki/front-proxy-ca.crt", x509.ExtKeyUsageClientAuth},
}

// bundlePool parses every certificate of a PEM bundle.
func bundlePool(t *testing.T, what string, b []byte) (*x509.CertPool, []string) {
	t.Helper()
	p := x509.NewCertPool()
	var cns []string
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		p.AddCert(c)
		cns = append(cns, c.Subject.CommonName)
	}
	return p, cns
}

// phaseFiles are what cp-0 and worker-0 are given in one phase of a roll-over.
type phaseFiles struct {
	phase      pki.RotationPhase
	cp, worker map[string][]byte
}

func filesOf(t *testing.T, b *pki.Bundle) phaseFiles {
	t.Helper()
	cp, err := b.HostFiles("cp-0")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := b.HostFiles("worker-0")
	if err != nil {
		t.Fatal(err)
	}
	return phaseFiles{b.CARotation().Phase, cp, worker}
}

// verifies checks that every certificate a host of phase a presents is trusted by a host of
// phase b: during a roll-out the hosts of two consecutive phases meet.
func verifies(t *testing.T, a, b phaseFiles) {
	t.Helper()
	for _, p := range presentedLeaves {
		trust, _ := bundlePool(t, p.trust, b.cp[p.trust])
		leaf := parseCert(t, p.leaf, a.cp[p.leaf])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: trust, CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{p.usage}}); err != nil {
			t.Errorf("%s of a host in phase %q is not trusted by a host in phase %q (%s): %v", p.leaf, a.phase, b.phase, p.trust, err)
		}
	}
	// The kubelet's client certificate (checked by the API servers' ca.crt), and the API
	// server's serving certificate checked by the kubelet's kubeconfig.
	kubelet, err := clientcmd.Load(a.worker["kubelet.conf"])
	if err != nil {
		t.Fatal(err)
	}
	trust, _ := bundlePool(t, "pki/ca.crt", b.cp["pki/ca.crt"])
	node := parseCert(t, "kubelet.conf", kubelet.AuthInfos["system:node:worker-0"].ClientCertificateData)
	if _, err := node.Verify(x509.VerifyOptions{Roots: trust, CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the kubelet's certificate of phase %q is not trusted by an API server of phase %q: %v", a.phase, b.phase, err)
	}
	kubelet, err = clientcmd.Load(b.worker["kubelet.conf"])
	if err != nil {
		t.Fatal(err)
	}
	trust, _ = bundlePool(t, "kubelet.conf", kubelet.Clusters["app"].CertificateAuthorityData)
	serving := parseCert(t, "pki/apiserver.crt", a.cp["pki/apiserver.crt"])
	if _, err := serving.Verify(x509.VerifyOptions{Roots: trust, CurrentTime: t0, DNSName: "api.site-a.example"}); err != nil {
		t.Errorf("the API server of phase %q is not trusted by a kubelet of phase %q: %v", a.phase, b.phase, err)
	}
}

// TestCARotation walks a CA roll-over through its phases as the BPA does: Ensure gives each
// phase's files, which are rolled out one host at a time, then AdvanceCARotation moves on. At
// every step a host of the phase before and one of the phase after trust each other's
// certificates; the leaves are issued by the new CAs in UseNew only; the old CAs go at the end
// without another change to any host's files.
func TestCARotation(t *testing.T) {
	ctx := context.Background()
	spy := newSpy()
	spec := testSpec()
	// Each phase begins a minute after the one before (the roll-over starts at t0).
	advanced := t0
	advance := func(t *testing.T) pki.CARotation {
		t.Helper()
		advanced = advanced.Add(time.Minute)
		st, err := pki.AdvanceCARotation(ctx, spy, secretName, advanced)
		if err != nil {
			t.Fatalf("AdvanceCARotation: %v", err)
		}
		return st
	}
	cns := func(t *testing.T, f phaseFiles) string {
		t.Helper()
		var all []string
		for _, file := range []string{"pki/ca.crt", "pki/etcd/ca.crt", "pki/front-proxy-ca.crt"} {
			_, c := bundlePool(t, file, f.cp[file])
			all = append(all, strings.Join(c, "+"))
		}
		return strings.Join(all, " ")
	}

	before := filesOf(t, ensure(t, spy, spec, t0))
	if st := advance(t); st != (pki.CARotation{}) {
		t.Fatalf("AdvanceCARotation with none asked: %+v, want nothing under way", st)
	}
	advanced = t0
	if got := cns(t, before); got != "kubernetes etcd-ca front-proxy-ca" {
		t.Fatalf("trusted before a roll-over: %s", got)
	}

	spec.CARotations = 1
	phases := []phaseFiles{before}
	for _, want := range []struct {
		phase   pki.RotationPhase
		trusted string
	}{
		{pki.RotationAddNew, "kubernetes+kubernetes-2 etcd-ca+etcd-ca-2 front-proxy-ca+front-proxy-ca-2"},
		{pki.RotationUseNew, "kubernetes-2+kubernetes etcd-ca-2+etcd-ca front-proxy-ca-2+front-proxy-ca"},
		{pki.RotationDropOld, "kubernetes-2 etcd-ca-2 front-proxy-ca-2"},
	} {
		b := ensure(t, spy, spec, t0)
		f := filesOf(t, b)
		if f.phase != want.phase || cns(t, f) != want.trusted {
			t.Fatalf("phase %q trusting %s, want %q trusting %s", f.phase, cns(t, f), want.phase, want.trusted)
		}
		// A phase may take several passes (one failed, the BPA restarted): each gives the same,
		// and the phase keeps the time it began.
		again := ensure(t, spy, spec, t0.Add(time.Hour))
		if !maps.EqualFunc(filesOf(t, again).cp, f.cp, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("a second pass in phase %q gives other files", want.phase)
		}
		if since := again.CARotation().Since; !since.Equal(advanced) {
			t.Errorf("phase %q began at %s, want %s", want.phase, since, advanced)
		}
		prev := phases[len(phases)-1]
		verifies(t, prev, f)
		verifies(t, f, prev)
		phases = append(phases, f)
		if st := advance(t); st.Phase != want.phase.Next() {
			t.Fatalf("after %s: %+v", want.phase, st)
		}
	}
	for _, leaf := range presentedLeaves {
		if string(phases[1].cp[leaf.leaf]) != string(before.cp[leaf.leaf]) {
			t.Errorf("%s changed in AddNew: leaves are signed by the new CA only once every host trusts it", leaf.leaf)
		}
		if string(phases[2].cp[leaf.leaf]) == string(before.cp[leaf.leaf]) {
			t.Errorf("%s kept in UseNew: still signed by the old CA", leaf.leaf)
		}
	}

	after := ensure(t, spy, spec, t0)
	if st := after.CARotation(); st != (pki.CARotation{Generation: 1}) {
		t.Fatalf("after the roll-over: %+v, want generation 1 and nothing under way", st)
	}
	if f := filesOf(t, after); !maps.EqualFunc(f.cp, phases[3].cp, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Error("dropping the old CAs from the store changed a host's files: every host would restart again for nothing")
	}
	puts := spy.puts
	ensure(t, spy, spec, t0)
	if spy.puts != puts {
		t.Error("Ensure after the roll-over wrote the PKI again")
	}
	if d := spy.stored(t, secretName); d["ca.next.crt"] != nil || d["ca.rotation"] != nil || string(d["ca.generation"]) != "1" {
		t.Errorf("stored after the roll-over: ca.next.crt %t, ca.rotation %q, ca.generation %q", d["ca.next.crt"] != nil, d["ca.rotation"], d["ca.generation"])
	}

	// A second roll-over names its CAs for generation 2.
	spec.CARotations = 2
	if got := cns(t, filesOf(t, ensure(t, spy, spec, t0))); got != "kubernetes-2+kubernetes-3 etcd-ca-2+etcd-ca-3 front-proxy-ca-2+front-proxy-ca-3" {
		t.Errorf("second roll-over trusts %s", got)
	}
}

// TestSignClientDuringCARotation: a user's certificate is signed by the CA that signs in the
// phase, and the CAs it is handed to trust the API server with are the phase's bundle.
func TestSignClientDuringCARotation(t *testing.T) {
	ctx := context.Background()
	spy := newSpy()
	spec := testSpec()
	spec.CARotations = 1
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		phase          pki.RotationPhase
		issuer, bundle string
	}{
		{pki.RotationAddNew, "kubernetes", "kubernetes+kubernetes-2"},
		{pki.RotationUseNew, "kubernetes-2", "kubernetes-2+kubernetes"},
		{pki.RotationDropOld, "kubernetes-2", "kubernetes-2"},
		{"", "kubernetes-2", "kubernetes-2"},
	} {
		ensure(t, spy, spec, t0)
		cert, ca, err := pki.SignClient(ctx, spy, secretName, pki.ClientRequest{PublicKey: key.Public(), User: "alice", Now: t0, NotAfter: t0.AddDate(0, 0, 1)})
		if err != nil {
			t.Fatalf("phase %q: SignClient: %v", want.phase, err)
		}
		pool, cns := bundlePool(t, "CA", ca)
		c := parseCert(t, "certificate", cert)
		if c.Issuer.CommonName != want.issuer || strings.Join(cns, "+") != want.bundle {
			t.Errorf("phase %q: issued by %s with CAs %v, want by %s with %s", want.phase, c.Issuer.CommonName, cns, want.issuer, want.bundle)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("phase %q: %v", want.phase, err)
		}
		if _, err := pki.AdvanceCARotation(ctx, spy, secretName, t0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCARotationRefusesDamage: a successor CA lost or garbled while a roll-over runs, or one
// left behind without a phase, stops Ensure with an error naming what to restore, and nothing
// is written.
func TestCARotationRefusesDamage(t *testing.T) {
	ctx := context.Background()
	spec := testSpec()
	spec.CARotations = 1
	for _, c := range []struct {
		name   string
		damage func(map[string][]byte)
		want   string
	}{
		{"successor lost", func(d map[string][]byte) { delete(d, "etcd-ca.next.crt"); delete(d, "etcd-ca.next.key") },
			"CA etcd-ca.next: gone from the secret store: refusing to replace a CA: a CA roll-over is under way"},
		{"successor's key replaced", func(d map[string][]byte) { d["ca.next.key"] = d["ca.key"] },
			"ca.next.key does not belong to ca.next.crt"},
		{"phase garbled", func(d map[string][]byte) { d["ca.rotation"] = []byte("Sideways") },
			`ca.rotation is "Sideways", not a rotation phase`},
		{"count garbled", func(d map[string][]byte) { d["ca.generation"] = []byte("-1") },
			`ca.generation is "-1", not a count`},
		{"phase's start garbled", func(d map[string][]byte) { d["ca.rotation.since"] = []byte("yesterday") },
			`ca.rotation.since is "yesterday", not a time`},
		{"successor without a phase", func(d map[string][]byte) { delete(d, "ca.rotation") },
			"ca.next.crt is stored, but no CA roll-over is under way (ca.rotation is not set)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spy := newSpy()
			ensure(t, spy, spec, t0)
			d := spy.stored(t, secretName)
			c.damage(d)
			if err := spy.Store.Put(ctx, secretName, d); err != nil {
				t.Fatal(err)
			}
			puts := spy.puts
			s := spec
			if c.name == "successor without a phase" {
				s.CARotations = 0
			}
			_, err := pki.Ensure(ctx, spy, secretName, s, clock(t0))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Ensure: %v, want an error saying %q", err, c.want)
			}
			if spy.puts != puts {
				t.Error("Ensure wrote the damaged PKI")
			}
		})
	}
}
