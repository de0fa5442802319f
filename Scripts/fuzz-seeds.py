#!/usr/bin/env python3
"""Writes the fuzz seeds that come from other people's code rather than ours, under
Tests/Fuzz/Corpus: SigV4-signed Cognito Sync requests from botocore's own signer (sigv4),
JSON Web Key Sets of every key type identity providers publish (jwks), and compact tokens
signed with those keys (compact-token). `offline-sync-fuzz seeds DIR` writes the rest.

Needs botocore and cryptography (from PyPI). The output is deterministic except for the key
material and signatures, which the targets do not depend on."""
import base64, datetime, json, os, sys
from unittest import mock

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "Tests", "Fuzz", "Corpus")


def write(target, name, data):
    folder = os.path.join(corpus, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data)


# SigV4: the access key, secret and clock the sigv4 target's verifier uses
# (Sources/OfflineSyncFuzzing/FuzzTargets+Server.swift), in the target's input form.
credentials = Credentials("AKIDOFFLINESYNCFUZZ", "offline-sync-fuzz-secret")
signed_at = datetime.datetime(2026, 11, 28, 0, 0, 0)
requests = [
    ("GET", "/identitypools/us-east-1%3Apool/identities/us-east-1%3Aid/datasets", "maxResults=10&nextToken=a%2Fb", b""),
    ("POST", "/identitypools/us-east-1%3Apool/identities/us-east-1%3Aid/datasets/todos", "",
     b'{"SyncSessionToken":"t","RecordPatches":[{"Op":"replace","Key":"k","Value":"v","SyncCount":0}]}'),
    ("GET", "/identitypools/us-east-1%3Apool/identities/us-east-1%3Aid/datasets/todos/records", "lastSyncCount=0&maxResults=5", b""),
]
for index, (method, path, query, body) in enumerate(requests):
    url = "http://127.0.0.1:8080" + path + ("?" + query if query else "")
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"} if body else {})
    with mock.patch("botocore.auth.get_current_datetime", return_value=signed_at):
        SigV4Auth(credentials, "cognito-sync", "us-east-1").add_auth(request)
    lines = [method, path, query] + [f"{k}: {v}" for k, v in request.headers.items()] + ["Host: 127.0.0.1:8080", ""]
    write("sigv4", f"boto-{index}", "\n".join(lines).encode() + b"\n" + body)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def number(value, length=None):
    length = length or (value.bit_length() + 7) // 8
    return b64(value.to_bytes(length, "big"))


rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
p256 = ec.generate_private_key(ec.SECP256R1())
p384 = ec.generate_private_key(ec.SECP384R1())
edkey = ed25519.Ed25519PrivateKey.generate()
rsa_public = rsa_key.public_key().public_numbers()
jwks = {"keys": [
    {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": number(rsa_public.n), "e": number(rsa_public.e)},
    {"kty": "EC", "kid": "ec-1", "crv": "P-256", "alg": "ES256",
     "x": number(p256.public_key().public_numbers().x, 32), "y": number(p256.public_key().public_numbers().y, 32)},
    {"kty": "EC", "kid": "ec-2", "crv": "P-384",
     "x": number(p384.public_key().public_numbers().x, 48), "y": number(p384.public_key().public_numbers().y, 48)},
    {"kty": "OKP", "kid": "ed-1", "crv": "Ed25519",
     "x": b64(edkey.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))},
    {"kty": "RSA", "kid": "enc-1", "use": "enc", "n": number(rsa_public.n), "e": number(rsa_public.e)},
    {"kty": "oct", "kid": "hmac", "k": b64(b"not a verification key")},
]}
write("jwks", "providers", json.dumps(jwks, indent=1).encode())
write("jwks", "one-rsa", json.dumps({"keys": jwks["keys"][:1]}).encode())


def token(header, claims, sign):
    signing_input = (b64(json.dumps(header, separators=(",", ":")).encode()) + "." +
                     b64(json.dumps(claims, separators=(",", ":")).encode())).encode()
    return signing_input + b"." + b64(sign(signing_input)).encode()


def es256(data):
    r, s = decode_dss_signature(p256.sign(data, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


claims = {"iss": "https://issuer.example/", "sub": "josé", "aud": ["api"], "exp": 1795910400, "iat": 1795824000,
          "token_use": "access", "roles": ["editor"], "email": "jose@example.com"}
write("compact-token", "rs256", token({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-1"}, claims,
                                      lambda d: rsa_key.sign(d, padding.PKCS1v15(), hashes.SHA256())))
write("compact-token", "es256", token({"alg": "ES256", "kid": "ec-1"}, claims, es256))
write("compact-token", "eddsa", token({"alg": "EdDSA", "kid": "ed-1", "typ": "JWT"}, claims, edkey.sign))
write("compact-token", "hs256-dev", token({"alg": "HS256", "typ": "JWT"}, {"sub": "alice", "exp": 1795910400}, lambda d: b"\0" * 32))
