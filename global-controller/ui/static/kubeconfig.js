// edgefleet web UI: a kubeconfig of a site's application cluster for the signed-in user. The key
// is made here (WebCrypto, ECDSA P-256) and never leaves the browser: only a certificate signing
// request (PKCS#10, built below in DER) is posted; the answer's certificate, the cluster's CA and
// server and the key are saved as a kubeconfig file.
(() => {
  'use strict';
  const bytes = (...parts) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  };
  // tlv is one DER element: tag, length, value.
  const tlv = (tag, value) => {
    let len;
    if (value.length < 0x80) len = [value.length];
    else {
      len = [];
      for (let n = value.length; n > 0; n >>= 8) len.unshift(n & 0xff);
      len.unshift(0x80 | len.length);
    }
    return bytes(Uint8Array.of(tag, ...len), value);
  };
  const seq = (...parts) => tlv(0x30, bytes(...parts));
  // integer is a DER INTEGER of the unsigned big-endian v.
  const integer = (v) => {
    let i = 0;
    while (i < v.length - 1 && v[i] === 0) i++;
    v = v.subarray(i);
    return tlv(0x02, v[0] & 0x80 ? bytes(Uint8Array.of(0), v) : v);
  };
  const ecdsaWithSHA256 = Uint8Array.of(0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02);
  const base64 = (b) => {
    let s = '';
    for (const c of b) s += String.fromCharCode(c);
    return btoa(s);
  };
  const pem = (type, b) => `-----BEGIN ${type}-----\n${base64(b).match(/.{1,64}/g).join('\n')}\n-----END ${type}-----\n`;

  // csr returns the PEM request of keys with an empty subject: the identity is the server's.
  async function csr(subtle, keys) {
    const spki = new Uint8Array(await subtle.exportKey('spki', keys.publicKey));
    const info = seq(integer(Uint8Array.of(0)), seq(), spki, Uint8Array.of(0xa0, 0x00));
    const raw = new Uint8Array(await subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, keys.privateKey, info));
    const sig = seq(integer(raw.subarray(0, 32)), integer(raw.subarray(32)));
    return pem('CERTIFICATE REQUEST', seq(info, seq(ecdsaWithSHA256), tlv(0x03, bytes(Uint8Array.of(0), sig))));
  }

  // kubeconfig asks url for a credential and returns the kubeconfig file (JSON, which kubectl
  // reads as YAML) and the credential.
  async function kubeconfig(subtle, url, ttlSeconds) {
    const keys = await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
    const resp = await fetch(url, {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ csr: await csr(subtle, keys), ttlSeconds }),
    });
    const answer = await resp.json();
    if (!resp.ok) throw new Error(answer.message || resp.statusText);
    const key = pem('PRIVATE KEY', new Uint8Array(await subtle.exportKey('pkcs8', keys.privateKey)));
    const enc = (s) => base64(new TextEncoder().encode(s));
    const context = `${answer.user}@${answer.cluster}`;
    const file = {
      apiVersion: 'v1', kind: 'Config', 'current-context': context,
      clusters: [{ name: answer.cluster, cluster: { server: answer.server, 'certificate-authority-data': enc(answer.certificateAuthority) } }],
      users: [{ name: answer.user, user: { 'client-certificate-data': enc(answer.certificate), 'client-key-data': enc(key) } }],
      contexts: [{ name: context, context: { cluster: answer.cluster, user: answer.user } }],
    };
    return { file: JSON.stringify(file, null, 2) + '\n', answer };
  }

  if (typeof module !== 'undefined') {
    module.exports = { csr }; // the tests run it in Node
    return;
  }
  document.addEventListener('click', async (e) => {
    const button = e.target.closest('button[data-kubeconfig]');
    if (!button) return;
    const out = document.getElementById('kubeconfig-status');
    const ttl = document.getElementById('kubeconfig-ttl');
    button.disabled = true;
    out.textContent = 'Making a key and asking the site…';
    try {
      const { file, answer } = await kubeconfig(crypto.subtle, button.dataset.kubeconfig, Number(ttl.value) * 3600);
      const a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([file], { type: 'application/yaml' }));
      a.download = `${answer.cluster}.kubeconfig`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 60000); // after the download started
      out.textContent = `Saved ${a.download}: ${answer.user} in cluster ${answer.cluster}, valid until ${new Date(answer.expirationTime).toLocaleString()}.`;
    } catch (err) {
      out.textContent = 'No kubeconfig: ' + err.message;
    } finally {
      button.disabled = false;
    }
  });
})();
