"""The system's CAs: read from its hashed CA directory, one by one as chains need
them, when that directory holds every CA of its CA file; the file loaded whole
otherwise. Either way a server whose CA the system trusts verifies with no
``--ca-bundle``.

The "system" is a directory of the test's own, named by ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` (OpenSSL's own variables, which :func:`ssl.get_default_verify_paths`
reads), laid out as Debian's update-ca-certificates lays out /etc/ssl/certs: the
bundle file among links named by each certificate's subject hash.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.fetch.test_tls import https_server
from ubipy.config import FetchConfig
from ubipy.fetch import FetchOutcome, fetch, make_client
from ubipy.fetch.tls import system_ca_directory, tls_context

BUNDLE = "ca-certificates.crt"


@pytest.fixture(autouse=True)
def fresh_context() -> Iterator[None]:
    tls_context.cache_clear()
    yield
    tls_context.cache_clear()


def subject_hash(pem: Path) -> str:
    """The name OpenSSL looks a CA up by in a hashed directory."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command names the hashed links")
    return subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", str(pem)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def system_store(
    root: Path, monkeypatch: pytest.MonkeyPatch, in_file: list[trustme.CA], hashed: list[trustme.CA]
) -> Path:
    """A CA directory holding a bundle of ``in_file`` and hashed links to ``hashed``,
    made the system's."""
    certs = root / "certs"
    certs.mkdir()
    (certs / BUNDLE).write_bytes(b"".join(ca.cert_pem.bytes() for ca in in_file))
    for i, ca in enumerate(hashed):
        pem = certs / f"ca{i}.pem"
        ca.cert_pem.write_to_path(str(pem))
        (certs / f"{subject_hash(pem)}.0").symlink_to(pem.name)
    monkeypatch.setenv("SSL_CERT_FILE", str(certs / BUNDLE))
    monkeypatch.setenv("SSL_CERT_DIR", str(certs))
    return certs


async def fetch_from_server_of(ca: trustme.CA) -> FetchOutcome:
    async with https_server(ca) as server, make_client(FetchConfig(), "ubipy/test") as client:
        result = await fetch(client, server.url("/x"), max_bytes=10_000)
    return result.outcome


async def test_the_systems_cas_are_read_from_their_directory_when_a_chain_needs_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, other = trustme.CA(), trustme.CA()
    certs = system_store(tmp_path, monkeypatch, in_file=[ca, other], hashed=[ca, other])
    assert system_ca_directory() == str(certs)
    assert tls_context(None).cert_store_stats()["x509_ca"] == 0  # nothing parsed up front
    assert await fetch_from_server_of(ca) is FetchOutcome.OK
    assert tls_context(None).cert_store_stats()["x509_ca"] == 1  # the one the chain needed


@pytest.mark.parametrize("where", ["added to the file by hand", "a file elsewhere"])
async def test_a_ca_the_directory_may_lack_keeps_the_whole_file(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CA added to the system's bundle with no link made for it; or SSL_CERT_FILE
    # naming a bundle of the user's own, beside a directory that lacks its CA.
    ca, other = trustme.CA(), trustme.CA()
    by_hand = where == "added to the file by hand"
    system_store(tmp_path, monkeypatch, in_file=[other, ca] if by_hand else [other], hashed=[other])
    if not by_hand:
        mine = tmp_path / "mine.pem"
        ca.cert_pem.write_to_path(str(mine))
        monkeypatch.setenv("SSL_CERT_FILE", str(mine))
    assert system_ca_directory() is None
    assert tls_context(None).cert_store_stats()["x509_ca"] == (2 if by_hand else 1)
    assert await fetch_from_server_of(ca) is FetchOutcome.OK


async def test_a_ca_the_system_does_not_hold_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trusted, stranger = trustme.CA(), trustme.CA()
    system_store(tmp_path, monkeypatch, in_file=[trusted], hashed=[trusted])
    assert system_ca_directory() is not None
    assert await fetch_from_server_of(stranger) is FetchOutcome.CERTIFICATE_ERROR
