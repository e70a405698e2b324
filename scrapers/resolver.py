"""Scrapy's DNS resolver, pinned to the addresses the address guard checked.

`AddressGuardMiddleware` resolves and checks each request's host (`netguard.check_url`),
but Twisted would resolve the name again when it connects, so a rebinding name could
answer "public" to the check and "loopback" to the connect. `pin()` keeps the checked
addresses; `PinnedResolver` (Scrapy's `TWISTED_DNS_RESOLVER`) answers from those pins and,
for a name nobody pinned, resolves and checks it itself, so Twisted never connects to an
address that was not checked — the same rule as the httpx transports' pinning.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from twisted.internet import defer, threads
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

from lookbench_live.network import netguard

PIN_TTL_S = netguard.RESOLUTION_TTL_S
_pins: dict[str, tuple[float, str]] = {}
_lock = threading.Lock()


def pin(host: str, addresses: Sequence[netguard.IPAddress]) -> None:
    """Remember the checked address of `host` for the connect that follows (IPv4 first: Twisted's
    simple resolver interface connects over IPv4 or IPv6 by the address's form)."""
    if not addresses:
        return
    ordered = sorted(addresses, key=lambda a: a.version)
    with _lock:
        _pins[host.lower()] = (time.monotonic() + PIN_TTL_S, str(ordered[0]))


def pinned(host: str) -> str | None:
    with _lock:
        hit = _pins.get(host.lower())
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    return None


@implementer(IResolverSimple)
class PinnedResolver:
    """`getHostByName` returns a checked address only; a refused name fails the lookup."""

    def __init__(self, reactor: Any, allow_private: bool):
        self.reactor = reactor
        self.allow_private = allow_private

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> PinnedResolver:
        return cls(reactor, crawler.settings.getbool("LOOKBENCH_ALLOW_PRIVATE"))

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        address = pinned(name)
        if address is not None:
            return defer.succeed(address)
        return threads.deferToThread(self._check, name)

    def _check(self, name: str) -> str:
        try:
            addresses = netguard.check_url(f"http://{name}/", allow_private=self.allow_private)
        except netguard.BlockedURL as exc:
            raise DNSLookupError(f"{name}: {exc.reason}: {exc.detail}") from exc
        pin(name, addresses)
        return str(sorted(addresses, key=lambda a: a.version)[0])
