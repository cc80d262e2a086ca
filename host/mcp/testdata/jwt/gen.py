"""Generates the JWT test fixtures once (they are committed; rerunning
replaces every key, and the tests read whatever is here).

    python3 gen.py   # needs the `cryptography` package

- rsa.pk8, ec.pk8, ed.pk8: PKCS#8 DER private keys (RS256, ES256, EdDSA)
  the tests sign with; their public halves are in jwks.json under the kids
  rsa-1, ec-1, ed-1.
- stranger.pk8: an RSA key that is in no key set (a forged signature).
- rsa_pub.pem: rsa.pk8's public key as PEM (the HS256 alg-confusion test
  uses these bytes as an HMAC secret).
- jwks.json also holds a symmetric key (kid hmac-1) and an encryption key
  (use "enc"): a verifier must never accept either.
"""
import base64, json
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa, ec, ed25519

def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

def uint(n):
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))

def der(key):
    return key.private_bytes(serialization.Encoding.DER,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())

r = rsa.generate_private_key(public_exponent=65537, key_size=2048)
stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
enc = rsa.generate_private_key(public_exponent=65537, key_size=2048)
e = ec.generate_private_key(ec.SECP256R1())
d = ed25519.Ed25519PrivateKey.generate()
open("rsa.pk8", "wb").write(der(r))
open("stranger.pk8", "wb").write(der(stranger))
open("ec.pk8", "wb").write(der(e))
open("ed.pk8", "wb").write(der(d))
open("rsa_pub.pem", "wb").write(r.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
rn = r.public_key().public_numbers()
en = e.public_key().public_numbers()
encn = enc.public_key().public_numbers()
raw = d.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
keys = [
    {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": uint(rn.n), "e": uint(rn.e)},
    {"kty": "EC", "kid": "ec-1", "use": "sig", "alg": "ES256", "crv": "P-256",
     "x": b64(en.x.to_bytes(32, "big")), "y": b64(en.y.to_bytes(32, "big"))},
    {"kty": "OKP", "kid": "ed-1", "use": "sig", "alg": "EdDSA", "crv": "Ed25519", "x": b64(raw)},
    {"kty": "oct", "kid": "hmac-1", "alg": "HS256", "k": b64(b"a shared secret the verifier must never accept")},
    {"kty": "RSA", "kid": "enc-1", "use": "enc", "n": uint(encn.n), "e": uint(encn.e)},
]
open("jwks.json", "w").write(json.dumps({"keys": keys}, indent=2) + "\n")
