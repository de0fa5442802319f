"""Tokens of an identity provider: every forgery the verifier must refuse is refused.

Run from the repository root, against a built server binary:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/Hostile/test_issuers.py

Two identity providers run inside the test on loopback (http.server threads serving a JWKS
each, with RSA, EC P-256 and Ed25519 keys generated per run with the `cryptography`
package); `offline-sync serve --issuer FILE --log-level debug` accepts both. Tokens are
built by hand here (header, claims, signature), independently of the server's code, so a
test can make exactly one thing wrong.

  00  control: a valid RS256, PS256, ES256 and EdDSA token of either issuer reads its rows
      (native pull and tables API); exp 30 s in the past is inside the 60 s skew.
  01-25  each forgery answers 401 with exactly the body of a request without any token, on
      the native API and the tables API, changes nothing, and leaves the server answering
      /health: alg none, HS256 keyed with the RSA or EC public key (algorithm confusion), a
      key used for an algorithm other than its alg or type, a `use: enc` key, another
      issuer's kid, iss missing or unknown, aud missing or foreign, exp missing, expired
      beyond the skew, nbf beyond the skew, oversized token and header, crit, jku, x5u, jwk
      (a key of the attacker's, embedded), x5c, duplicate keys in header and claims,
      non-canonical base64url (padding, standard alphabet, spare bits), a bad signature.
  99  the server's log holds no token and no signature that was sent, and it gave the
      reasons only at debug level.
"""

import base64
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

HERE = os.path.dirname(os.path.abspath(__file__))
SENT = set()   # every token and signature segment sent, searched for in the log at the end


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def int_bytes(value, length=None):
    length = length or (value.bit_length() + 7) // 8
    return value.to_bytes(length, "big")


class Key:
    """A provider's signing key: its JWK (public) and a signer for its algorithm."""

    def __init__(self, kid, alg):
        self.kid, self.alg = kid, alg
        if alg in ("RS256", "PS256"):
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            numbers = self.private.public_key().public_numbers()
            self.jwk = {"kty": "RSA", "n": b64url(int_bytes(numbers.n)), "e": b64url(int_bytes(numbers.e))}
        elif alg == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            numbers = self.private.public_key().public_numbers()
            self.jwk = {"kty": "EC", "crv": "P-256", "x": b64url(int_bytes(numbers.x, 32)), "y": b64url(int_bytes(numbers.y, 32))}
        else:
            self.private = ed25519.Ed25519PrivateKey.generate()
            raw = self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            self.jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
        self.pem = self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, data):
        if self.alg == "RS256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        if self.alg == "PS256":
            return self.private.sign(data, padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32), hashes.SHA256())
        if self.alg == "ES256":
            r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
            return int_bytes(r, 32) + int_bytes(s, 32)
        return self.private.sign(data)

    def published(self, **extra):
        return dict(self.jwk, kid=self.kid, **extra)


class Provider:
    """A JWKS endpoint on a loopback port."""

    def __init__(self, keys):
        self.keys = keys
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"keys": provider.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


class S:
    pass


def token(header, claims, sign, raw_header=None, raw_claims=None):
    head = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":"))
    body = raw_claims if raw_claims is not None else json.dumps(claims, separators=(",", ":"))
    data = b64url(head.encode()) + "." + b64url(body.encode())
    return data + "." + b64url(sign(data.encode()))


def claims(issuer=None, **changes):
    now = int(time.time())
    result = {"iss": issuer or S.one.issuer, "sub": "alice", "aud": "app", "iat": now, "exp": now + 600}
    for name, value in changes.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    return result


def signed(key, header_changes=None, **claim_changes):
    header = {"alg": key.alg, "typ": "JWT", "kid": key.kid}
    header.update(header_changes or {})
    return token(header, claims(**claim_changes), key.sign)


def hmac_sign(secret):
    def sign(data):
        mac = hmac.HMAC(secret, hashes.SHA256())
        mac.update(data)
        return mac.finalize()
    return sign


def request(method, path, tok=None, body=None):
    connection = http.client.HTTPConnection(S.host, S.port, timeout=30)
    headers = {"ZUMO-API-VERSION": "3.0.0"}
    if tok is not None:
        headers["Authorization"] = "Bearer " + tok
        SENT.add(tok)
        if tok.count(".") == 2 and len(tok.rsplit(".", 1)[1]) >= 16:
            SENT.add(tok.rsplit(".", 1)[1])
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body)
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def pull(tok):
    return request("POST", "/v1/pull", tok, {"table": "todos", "limit": 10})


def tables(tok):
    return request("GET", "/tables/todos", tok)


def setUpModule():
    S.rs, S.ps, S.es, S.ed = Key("rs-1", "RS256"), Key("ps-1", "PS256"), Key("es-1", "ES256"), Key("ed-1", "EdDSA")
    S.enc = Key("enc-1", "RS256")
    S.pinned = Key("pinned-ps", "RS256")   # published with alg PS256: an RS256 token under it is refused
    S.two_key = Key("two-1", "ES256")
    S.one = Provider([S.rs.published(), S.ps.published(), S.es.published(), S.ed.published(),
                      S.enc.published(use="enc"), S.pinned.published(alg="PS256")])
    S.two = Provider([S.two_key.published()])
    S.tmp = tempfile.mkdtemp(prefix="offline-sync-issuers.")
    issuers = os.path.join(S.tmp, "issuers.yaml")
    with open(issuers, "w") as f:
        f.write("issuers:\n")
        for prefix, provider in (("one:", S.one), ("two:", S.two)):
            f.write("  - issuer: %s\n    audiences: [app]\n    jwks_url: %s/jwks.json\n    identity_prefix: \"%s\"\n"
                    % (provider.issuer, provider.issuer, prefix))
    S.log_path = os.path.join(S.tmp, "server.log")
    S.log_file = open(S.log_path, "wb")
    binary = os.path.abspath(os.environ["OFFLINE_SYNC_BIN"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFLINE_SYNC_")}
    S.proc = subprocess.Popen([binary, "serve", "--port", "0", "--data", S.tmp, "--log-level", "debug", "--issuer", issuers,
                               # A token naming a key the set lacks waits for the next fetch allowed.
                               "--key-refetch-seconds", "1"],
                              cwd=S.tmp, env=env, stdin=subprocess.DEVNULL, stdout=S.log_file, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        match = re.search(r"listening on http://([^:\s]+):(\d+)", log())
        if match:
            break
        if S.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the server did not start:\n" + log()[-3000:])
        time.sleep(0.05)
    S.host, S.port = match.group(1), int(match.group(2))
    S.denied = pull(None)
    S.denied_tables = tables(None)


def tearDownModule():
    code = None
    if S.proc.poll() is None:
        S.proc.send_signal(signal.SIGTERM)
    try:
        code = S.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        S.proc.kill()
    S.log_file.close()
    S.one.stop()
    S.two.stop()
    if not os.environ.get("OFFLINE_SYNC_KEEP_TMP"):
        shutil.rmtree(S.tmp, ignore_errors=True)
    if code != 0:
        raise AssertionError("the server exited with %s on SIGTERM, expected 0" % code)


def log():
    S.log_file.flush()
    with open(S.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


class IssuerTokens(unittest.TestCase):
    def refused(self, tok, why):
        for send, denied in ((pull, S.denied), (tables, S.denied_tables)):
            status, body = send(tok)
            self.assertEqual(status, 401, "%s: %s" % (why, body[:200]))
            self.assertEqual(body, denied[1], "%s: the body must be the uniform 'unauthorized'" % why)
        self.assertEqual(request("GET", "/health")[0], 200, "the server is up after: %s" % why)

    def test_00_valid_tokens(self):
        for key in (S.rs, S.ps, S.es, S.ed):
            tok = signed(key)
            self.assertEqual(pull(tok)[0], 200, key.alg)
            self.assertEqual(tables(tok)[0], 200, key.alg)
        self.assertEqual(pull(token({"alg": "ES256", "kid": "two-1"}, claims(issuer=S.two.issuer), S.two_key.sign))[0], 200)
        now = int(time.time())
        self.assertEqual(pull(signed(S.es, exp=now - 30))[0], 200, "30 s past exp is within the 60 s skew")

    def test_01_alg_none(self):
        for alg in ("none", "None", "NONE"):
            self.refused(token({"alg": alg, "kid": "rs-1"}, claims(), lambda data: b""), "alg " + alg)

    def test_02_algorithm_confusion(self):
        for key in (S.rs, S.es):
            for secret in (key.pem, key.pem.strip(), json.dumps(key.jwk).encode(), base64.urlsafe_b64decode((key.jwk["n"] if "n" in key.jwk else key.jwk["x"]) + "==")):
                self.refused(token({"alg": "HS256", "kid": key.kid}, claims(), hmac_sign(secret)), "HS256 keyed with %s's public key" % key.alg)

    def test_03_key_used_for_another_algorithm(self):
        # An RSA key asked to verify ES256, an EC key asked for RS256, a PS-pinned key for RS256.
        self.refused(token({"alg": "ES256", "kid": "rs-1"}, claims(), S.es.sign), "ES256 under an RSA kid")
        self.refused(token({"alg": "RS256", "kid": "es-1"}, claims(), S.rs.sign), "RS256 under an EC kid")
        self.refused(token({"alg": "EdDSA", "kid": "es-1"}, claims(), S.ed.sign), "EdDSA under an EC kid")
        self.refused(signed(S.pinned), "RS256 under a key published with alg PS256")
        self.refused(token({"alg": "PS256", "kid": "rs-1"}, claims(), S.rs.sign), "an RS256 signature presented as PS256")

    def test_04_encryption_key(self):
        self.refused(signed(S.enc), "a key published with use: enc")

    def test_05_kid_of_another_issuer(self):
        self.refused(token({"alg": "ES256", "kid": "two-1"}, claims(), S.two_key.sign), "issuer one's token under issuer two's key")
        self.refused(token({"alg": "RS256", "kid": "rs-1"}, claims(issuer=S.two.issuer), S.rs.sign), "issuer two's token under issuer one's key")

    def test_06_issuer(self):
        self.refused(signed(S.es, iss=None), "no iss")
        self.refused(signed(S.es, iss="http://127.0.0.1:1"), "an unknown iss")
        self.refused(signed(S.es, iss=S.one.issuer + "/"), "an iss that differs by a slash")

    def test_07_audience(self):
        self.refused(signed(S.es, aud=None), "no aud")
        self.refused(signed(S.es, aud="another-app"), "a foreign aud")
        self.refused(signed(S.es, aud=["another-app", "third"]), "a list of foreign auds")

    def test_08_times(self):
        now = int(time.time())
        self.refused(signed(S.es, exp=None), "no exp")
        self.refused(signed(S.es, exp=now - 120), "expired beyond the skew")
        self.refused(signed(S.es, exp=str(now + 600)), "exp as a string")
        self.refused(signed(S.es, nbf=now + 120), "nbf beyond the skew")
        self.refused(signed(S.es, iat=now + 3600), "issued an hour in the future")

    def test_09_sizes(self):
        self.refused(signed(S.es, padding="x" * 20000), "a token over the size limit")
        self.refused(signed(S.es, header_changes={"x-padding": "y" * 2000}), "a header over the size limit")

    def test_10_forbidden_header_parameters(self):
        attacker = Key("attacker", "ES256")
        self.refused(signed(S.es, header_changes={"crit": ["exp"]}), "crit")
        self.refused(signed(S.es, header_changes={"jku": S.one.issuer + "/jwks.json"}), "jku")
        self.refused(signed(S.es, header_changes={"x5u": S.one.issuer + "/cert.pem"}), "x5u")
        self.refused(token({"alg": "ES256", "kid": "attacker", "jwk": attacker.published()}, claims(), attacker.sign), "an embedded jwk")
        self.refused(signed(S.es, header_changes={"x5c": ["MIIB"]}), "x5c")

    def test_11_duplicate_keys(self):
        head = '{"alg":"ES256","kid":"es-1","alg":"none"}'
        self.refused(token(None, claims(), S.es.sign, raw_header=head), "alg twice in the header")
        body = json.dumps(claims(), separators=(",", ":"))[:-1] + ',"sub":"bob"}'
        self.refused(token({"alg": "ES256", "kid": "es-1"}, None, S.es.sign, raw_claims=body), "sub twice in the claims")

    def test_12_non_canonical_base64url(self):
        good = signed(S.ed)
        head, body, signature = good.split(".")
        self.refused(head + "=." + body + "." + signature, "padding")
        standard = base64.b64encode(base64.urlsafe_b64decode(signature + "==")).decode().rstrip("=")
        if standard != signature:
            self.refused(head + "." + body + "." + standard, "standard base64 alphabet")
        # Ed25519 signatures are 64 bytes: 86 characters with 2 spare bits in the last one.
        last = signature[-1]
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        spare = alphabet[alphabet.index(last) | 1] if alphabet.index(last) % 2 == 0 else alphabet[alphabet.index(last) & ~1]
        self.refused(head + "." + body + "." + signature[:-1] + spare, "spare bits set")
        self.refused(head + "." + body + "." + signature + "\u00e9", "a non-ASCII byte")

    def test_13_bad_signature(self):
        good = signed(S.rs)
        head, body, signature = good.split(".")
        raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
        raw[10] ^= 1
        self.refused(head + "." + body + "." + b64url(bytes(raw)), "a flipped signature bit")
        other = signed(S.rs, sub="mallory")
        self.refused(head + "." + other.split(".")[1] + "." + signature, "claims swapped under a valid signature")

    def test_99_log_holds_no_token(self):
        text = log()
        leaked = [secret for secret in SENT if secret in text]
        sys.stderr.write("\nissuers: the log was searched for %d tokens and signatures, %d found\n" % (len(SENT), len(leaked)))
        self.assertEqual(leaked, [])
        self.assertIn("token refused", text, "refusals are logged at debug level")
        for line in text.splitlines():
            if "token refused" in line:
                self.assertNotIn(" info ", line)


if __name__ == "__main__":
    unittest.main()
