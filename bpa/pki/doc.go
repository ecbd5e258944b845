// Package pki generates and keeps the public-key infrastructure of an application cluster that
// the BPA brings up: etcd, kube-apiserver, kube-controller-manager and kube-scheduler on the
// control-plane hosts, kubelet and kube-proxy on every host.
//
// The PKI lives only in the secret store (a secrets.Store: Vault or Kubernetes Secrets), as one
// secret per cluster. Ensure loads it, issues what the Spec needs and the secret lacks, writes
// it back when something changed and returns a Bundle; the BPA then copies the Bundle's files to
// each host over SSH (ControlPlaneFiles, NodeFiles) and hands out kubeconfigs (AdminKubeconfig,
// NodeKubeconfig). Ensure is safe to repeat and to interrupt at any point: with the same Spec it
// writes nothing and returns the same bytes, and it never replaces a CA or the service-account
// key once stored, since hosts trust them; it only issues leaf certificates with the stored CAs
// (for a host added later, or for a changed control plane) and renews leaves 30 days before
// they expire. Ensure assumes one writer per cluster: the store has no compare-and-swap.
//
// Keys are ECDSA P-256, certificates are made with crypto/x509: CAs valid 10 years, leaves 1
// year (never beyond their CA), every NotBefore 5 minutes in the past for clock skew.
//
// # Stored layout
//
// One secret, each value PEM ("CERTIFICATE", PKCS#8 "PRIVATE KEY", PKIX "PUBLIC KEY"), each
// certificate under "<base>.crt" with its key under "<base>.key":
//
//	base                          signed by        subject / use
//	ca                            itself           CN=kubernetes, the cluster CA
//	etcd-ca                       itself           CN=etcd-ca
//	front-proxy-ca                itself           CN=front-proxy-ca
//	apiserver                     ca               CN=kube-apiserver, serving; SANs: APIEndpoint, every
//	                                               control-plane IP, the first IP of ServiceCIDR,
//	                                               127.0.0.1, localhost, kubernetes, kubernetes.default,
//	                                               kubernetes.default.svc, kubernetes.default.svc.cluster.local
//	apiserver-etcd-client         etcd-ca          CN=kube-apiserver-etcd-client, client
//	apiserver-kubelet-client      ca               CN=kube-apiserver-kubelet-client O=system:masters, client
//	front-proxy-client            front-proxy-ca   CN=front-proxy-client, client
//	admin                         ca               CN=kubernetes-admin O=system:masters, client
//	etcd-server.<member>          etcd-ca          CN=<member>, serving and client; SANs: member IP,
//	                                               127.0.0.1, localhost, <member>
//	etcd-peer.<member>            etcd-ca          CN=<member>, serving and client; SANs: member IP, <member>
//	node.<host>                   ca               CN=system:node:<host> O=system:nodes, client
//
// plus "sa.key" and "sa.pub", the service-account token signing key pair, and "secretbox.key",
// the base64 of the 32-byte key the API servers encrypt Secrets with in etcd (made once, never
// replaced: ControlPlaneFiles' encryption-config.yaml names it "bpa-1"), with "secretbox.sha256",
// its digest, by which a lost or replaced key is refused rather than made again. A CA roll-over
// (Spec.CARotations, AdvanceCARotation) keeps each CA's successor under "<base>.next.crt" and
// ".key", its phase under "ca.rotation" and the roll-overs done under "ca.generation"; the
// trust files (every *ca.crt, the kubeconfigs' CA) are then bundles of both. <member> is each
// control-plane member, <host> each member and node; host names are DNS-1123 subdomains, so
// every key is a valid Secret key. A few kilobytes per host: a Kubernetes Secret (1 MiB) holds
// the PKI of clusters of several hundred hosts.
package pki
