"""The address guard refuses every C17 target before connecting, and pins what it checked."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import ssl
import subprocess

import httpx
import pytest
from ingest_server import Route, serve

from lookbench_live.network import netguard
from lookbench_live.network.netguard import (
    BlockedURL,
    GuardedAsyncTransport,
    GuardedTransport,
    check_url,
    redirect_target,
)

PRIVATE_URLS = [
    "http://127.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://0177.0.0.1/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://127.1/",
    "http://100.64.0.1/",
    "http://10.0.0.5/",
    "http://192.168.1.1/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://0.0.0.0/",
    "http://[2002:7f00:1::]/",  # 6to4 wrapping 127.0.0.1
]


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_private_targets_are_refused(url: str) -> None:
    with pytest.raises(BlockedURL) as info:
        check_url(url)
    assert info.value.reason == "blocked_address"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "data:,hello", "gopher://x/"])
def test_other_schemes_are_refused_even_when_private_is_allowed(url: str) -> None:
    for allow in (False, True):
        with pytest.raises(BlockedURL) as info:
            check_url(url, allow_private=allow)
        assert info.value.reason == "blocked_scheme"


def test_public_literal_passes_and_loopback_passes_only_when_allowed() -> None:
    assert check_url("https://8.8.8.8/x") == [ipaddress.ip_address("8.8.8.8")]
    assert check_url("http://127.0.0.1:8080/", allow_private=True) == [ipaddress.ip_address("127.0.0.1")]


def test_hostname_is_judged_by_its_resolved_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "shop.example": ["93.184.216.34"],
        "evil.example": ["10.0.0.5"],
        "mixed.example": ["8.8.8.8", "127.0.0.1"],
    }
    monkeypatch.setattr(netguard, "resolve", lambda host, port: answers[host])
    assert check_url("https://shop.example/a.jpg") == [ipaddress.ip_address("93.184.216.34")]
    for host in ("evil.example", "mixed.example"):
        with pytest.raises(BlockedURL) as info:
            check_url(f"http://{host}/a.jpg")
        assert info.value.reason == "blocked_address"


def test_unresolvable_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    monkeypatch.setattr(netguard, "resolve", fail)
    with pytest.raises(BlockedURL) as info:
        check_url("http://nowhere.invalid/")
    assert info.value.reason == "unresolvable"


def test_transport_refuses_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    # evil.example resolves to the loopback test server: a guard that connected anyway would get 200.
    with serve({"/": Route(body=b"secret")}) as server:
        port = server.server_address[1]
        monkeypatch.setattr(netguard, "resolve", lambda host, p: ["127.0.0.1"])
        with httpx.Client(transport=GuardedTransport()) as client, pytest.raises(BlockedURL):
            client.get(f"http://evil.example:{port}/")
        assert server.hits["/"] == 0


def test_dns_rebinding_cannot_swap_the_checked_address(monkeypatch: pytest.MonkeyPatch) -> None:
    # First answer: the test server (allowed here); any later answer: another private address.
    # The request must reach the first address, with the name in Host, after one lookup only.
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.255.255.1"]

    monkeypatch.setattr(netguard, "resolve", rebinding)
    with serve({"/img": Route(body=b"ok")}) as server:
        port = server.server_address[1]

        async def go() -> httpx.Response:
            async with httpx.AsyncClient(transport=GuardedAsyncTransport(allow_private=True)) as client:
                return await client.get(f"http://rebind.example:{port}/img")

        response = asyncio.run(go())
        assert response.status_code == 200 and response.content == b"ok"
        assert calls == ["rebind.example"]
        assert server.host_headers == [f"rebind.example:{port}"]
        assert str(response.request.url) == f"http://rebind.example:{port}/img"


def test_redirect_to_loopback_is_refused_at_the_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real check (no patched `is_public`): a public page's 302 to 127.0.0.1 is refused before
    any connection, and the first hop went to the address the guard checked, Host kept."""
    monkeypatch.setattr(netguard, "resolve", lambda host, p: ["93.184.215.14"])  # a public address
    sent: list[httpx.Request] = []

    def origin(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(302, headers={"Location": "http://127.0.0.1:9/admin"})

    transport = GuardedTransport()
    monkeypatch.setattr(transport, "_inner", lambda request: httpx.MockTransport(origin))
    with httpx.Client(transport=transport) as client:
        first = client.get("http://public.example/r")
        target = redirect_target(first)
        assert target == "http://127.0.0.1:9/admin"
        with pytest.raises(BlockedURL) as info:
            client.get(target)
    assert info.value.reason == "blocked_address"
    assert [str(r.url) for r in sent] == ["http://93.184.215.14/r"]  # pinned; the hop never sent
    assert sent[0].headers["host"] == "public.example"


def test_redirect_target_resolves_relative_locations() -> None:
    request = httpx.Request("GET", "https://shop.example/a/b.jpg")
    response = httpx.Response(301, headers={"Location": "../c.jpg"}, request=request)
    assert redirect_target(response) == "https://shop.example/c.jpg"
    assert redirect_target(httpx.Response(200, request=request)) is None


@pytest.mark.skipif(
    shutil.which("openssl") is None, reason="needs the openssl command to make a test certificate"
)
def test_https_pins_the_address_and_still_verifies_the_name(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A certificate for shop.test only; the request goes to 127.0.0.1 (the checked address)
    # while TLS still sends and verifies the name, and a name the certificate lacks fails.
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=shop.test", "-addext", "subjectAltName=DNS:shop.test"],
        check=True, capture_output=True,
    )  # fmt: skip
    monkeypatch.setattr(netguard, "resolve", lambda host, port: ["127.0.0.1"])
    with serve({"/a.jpg": Route(body=b"pixels")}) as server:
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert, key)
        server.socket = server_context.wrap_socket(server.socket, server_side=True)
        port = server.server_address[1]
        client_context = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(transport=GuardedTransport(allow_private=True, verify=client_context)) as client:
            response = client.get(f"https://shop.test:{port}/a.jpg")
            assert response.status_code == 200 and response.content == b"pixels"
            with pytest.raises(httpx.ConnectError, match=r"certificate|hostname"):
                client.get(f"https://other.test:{port}/a.jpg")


def test_scrapy_connects_to_the_address_the_guard_checked(monkeypatch):
    """Twisted resolves again when it connects; the pinned resolver answers with the checked address."""
    import ipaddress

    from twisted.internet.error import DNSLookupError

    from lookbench_live.scrapers import resolver

    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["93.184.215.14"] if len(lookups) == 1 else ["127.0.0.1"]

    monkeypatch.setattr(netguard, "resolve", rebinding)
    checked = netguard.check_url("http://rebind.example/p")  # the middleware's check
    resolver.pin("rebind.example", checked)
    answers: list[str] = []
    resolver.PinnedResolver(reactor=None, allow_private=False).getHostByName("rebind.example").addCallback(
        answers.append
    )
    assert answers == ["93.184.215.14"] and lookups == ["rebind.example"]  # no second lookup
    # A name nobody checked is checked by the resolver itself: loopback fails the lookup.
    with pytest.raises(DNSLookupError, match="blocked_address"):
        resolver.PinnedResolver(reactor=None, allow_private=False)._check("other.example")
    assert resolver.pinned("other.example") is None
    assert ipaddress.ip_address(answers[0]).is_global
