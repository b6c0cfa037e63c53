"""Signs an SNS message as Amazon SNS does, for the SES bounce tests: reads the message (JSON)
on stdin, makes an RSA key and a self-signed certificate, writes the certificate to
DIR/<the file name its SigningCertURL ends with>, and prints the message with its Signature
(PKCS#1 v1.5 over the string to sign AWS documents: SHA1 for SignatureVersion 1, SHA256 for 2).

    python3 sns_sign.py DIR < message.json
"""

import base64
import datetime
import json
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

NOTIFICATION = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
CONFIRMATION = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]


def string_to_sign(m):
    keys = NOTIFICATION if m["Type"] == "Notification" else CONFIRMATION
    return "".join(f"{k}\n{m[k]}\n" for k in keys if k in m).encode()


def main():
    out = sys.argv[1]
    m = json.load(sys.stdin)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    file = m["SigningCertURL"].rsplit("/", 1)[-1]
    with open(os.path.join(out, file), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    digest = hashes.SHA1() if m["SignatureVersion"] == "1" else hashes.SHA256()
    signature = key.sign(string_to_sign(m), padding.PKCS1v15(), digest)
    m["Signature"] = base64.b64encode(signature).decode()
    json.dump(m, sys.stdout)


if __name__ == "__main__":
    main()
