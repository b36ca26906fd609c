"""Certificates for the test control plane: a CA per purpose, serving and client certificates.

RSA keys in PKCS#1 PEM, because cert-controller (Kueue's internal certificate manager) reads the
CA key it finds in its Secret with x509.ParsePKCS1PrivateKey (open-policy-agent/cert-controller
v0.16.0 pkg/rotator/rotator.go:530) and regenerates everything otherwise.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = datetime.timedelta(days=3650)
"""Ten years: cert-controller replaces a CA or serving certificate that expires within 90 days."""


@dataclass(frozen=True)
class KeyPair:
    cert: x509.Certificate
    key: rsa.RSAPrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption())

    def write(self, folder: Path, stem: str) -> tuple[Path, Path]:
        """`<stem>.crt` and `<stem>.key` in `folder`; their paths."""
        crt, key = folder / f"{stem}.crt", folder / f"{stem}.key"
        crt.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return crt, key


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)]
                     + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs])


def _sans(dns: tuple[str, ...], ips: tuple[str, ...]) -> x509.SubjectAlternativeName:
    return x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]
                                       + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips])


def ca(common: str) -> KeyPair:
    """A self-signed CA whose DNS name is its common name (cert-controller verifies the CA that way)."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(common)).issuer_name(_name(common))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=True, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(_sans((common,), ()), critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert, key)


def issue(authority: KeyPair, common: str, *, orgs: tuple[str, ...] = (), dns: tuple[str, ...] = (),
          ips: tuple[str, ...] = (), server: bool = False) -> KeyPair:
    """A certificate signed by `authority`: a server's (with names) or a client's (user and groups)."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (x509.CertificateBuilder().subject_name(_name(common, orgs)).issuer_name(authority.cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALID_FOR)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if dns or ips:
        builder = builder.add_extension(_sans(dns, ips), critical=False)
    return KeyPair(builder.sign(authority.key, hashes.SHA256()), key)


def signing_key(folder: Path) -> tuple[Path, Path]:
    """The service-account token signing key pair (private, public) as PEM files."""
    key = _key()
    private, public = folder / "sa.key", folder / "sa.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    private.chmod(0o600)
    return private, public
