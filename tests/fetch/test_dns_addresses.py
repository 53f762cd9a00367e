"""The addresses kept of a name's answer: no more than a few."""

from __future__ import annotations

import socket

import pytest

from ubipy.fetch import dns
from ubipy.fetch.dns import DnsFailure, Resolver


class Table:
    """A system resolver answering from a table the test changes."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    async def __call__(self, name: str) -> list[str]:
        if name not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[name]


async def test_an_answer_of_thousands_of_addresses_keeps_a_few(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile zone may answer each name with thousands of addresses (about 4,000
    fit a DNS answer over TCP): every one was kept, and judged at every resolve.
    2,000 such names held 511 MiB (a review); the bound of names, 50 GiB."""
    judged: list[str] = []
    real = dns.is_public

    def counting(address: str) -> bool:
        judged.append(address)
        return real(address)

    monkeypatch.setattr(dns, "is_public", counting)
    many = [f"11.0.{k >> 8}.{k & 255}" for k in range(4000)]
    private_first = [f"10.0.{k >> 8}.{k & 255}" for k in range(20)] + many
    names = Table({"many.test": many, "mixed.test": private_first})
    resolver = Resolver(lookup=names)
    for _ in range(3):
        answer = await resolver.resolve("many.test")
        assert answer.address == "11.0.0.0"
    assert 1 < len(answer.addresses) <= 8 and answer.addresses == tuple(
        many[: len(answer.addresses)]
    )
    mixed = await resolver.resolve("mixed.test")
    assert mixed.address == "11.0.0.0" and 1 < len(mixed.addresses) <= 8
    assert all(len(answer.addresses) <= 8 for answer, _ in resolver._cache.values())
    assert len(judged) <= 100  # not 4,000 a lookup, nor any at each resolve
    # None public: the first few are kept, for a seed on them (refused otherwise).
    resolver = Resolver(lookup=Table({"inside.test": [f"10.1.0.{k}" for k in range(200)]}))
    assert (await resolver.resolve("inside.test")).error is DnsFailure.REFUSED
    answer = await resolver.resolve("inside.test")
    assert resolver.exempt("inside.test", answer)
    allowed = await resolver.resolve("inside.test")
    assert allowed.address == "10.1.0.0" and 1 < len(allowed.addresses) <= 8
