"""Writes a test CA and a server certificate it signed, for the TLS runs of the official clients.

    python test_ca.py DIR

writes DIR/ca.pem (the CA a client trusts), DIR/cert.pem and DIR/key.pem (the listener's
A2A_TLS_CERT and A2A_TLS_KEY), the server's valid for `localhost` and `127.0.0.1`, for a day.
With `cryptography`, which the a2a-sdk venv (tools/python-client.sh) holds.
"""

import datetime
import ipaddress
import sys

from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def certificate(subject: str, key, issuer: str, issuer_key, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        names = [x509.DNSName('localhost'), x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def main() -> None:
    out = Path(sys.argv[1])
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate('a2a-task-plane test CA', ca_key, 'a2a-task-plane test CA', ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = certificate('localhost', key, 'a2a-task-plane test CA', ca_key, ca=False)
    (out / 'ca.pem').write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (out / 'cert.pem').write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / 'key.pem').write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


if __name__ == '__main__':
    main()
