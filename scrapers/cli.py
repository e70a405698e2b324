"""`lookbench-live extract`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("extract")(extract_command)


def extract_command(
    path_or_url: Annotated[
        str, typer.Argument(help="a saved page or API response, or an http(s) URL to fetch")
    ],
    url: Annotated[
        str | None, typer.Option("--url", help="the page's original URL (relative links resolve against it)")
    ] = None,
    allow_private: Annotated[
        bool, typer.Option("--allow-private", help="allow fetching loopback/private addresses")
    ] = False,
    looks: Annotated[
        bool, typer.Option("--looks/--no-looks", help="also print looks found on the page")
    ] = False,
    vlm: Annotated[
        bool,
        typer.Option(
            "--vlm",
            help="last resort: ask the configured [annotation] endpoint for the title, price, currency "
            "and brand the markup and page rules did not find; a value the page does not state is dropped",
        ),
    ] = False,
    config: Annotated[
        str | None, typer.Option("--config", help="TOML configuration file, for --vlm's endpoint")
    ] = None,
) -> None:
    """Print the normalized products of one page or API response as JSON lines.

    The platform (Shopify JSON, WooCommerce Store API JSON, schema.org HTML) is detected
    from the content. Problems (bad JSON-LD scripts, a VLM value the page does not state…) are
    reported on stderr. --vlm is off by default and needs [annotation] base_url.
    """
    import json

    from lookbench_live.scrapers.extract import decode_body, extract_document

    endpoint = None
    if vlm:  # a wrong or missing endpoint fails before the page is fetched
        from lookbench_live.config import load_settings

        endpoint = load_settings(config).annotation
        if not endpoint.endpoints:
            raise typer.BadParameter("--vlm needs an [annotation] base_url in the configuration")
    if path_or_url.startswith(("http://", "https://")):
        body, content_type, final_url = _fetch(path_or_url, allow_private)
        base = url or final_url
    else:
        file = Path(path_or_url)
        if not file.is_file():
            raise typer.BadParameter(f"{path_or_url} is neither a file nor an http(s) URL")
        body, content_type = file.read_bytes(), None
        base = url or file.resolve().as_uri()
    text = decode_body(body, content_type)
    extraction = extract_document(text, base)
    if endpoint is not None:
        from lookbench_live.scrapers.extract.vlm import complete_with_vlm

        extraction = complete_with_vlm(extraction, text, base, endpoint)
    for product in extraction.products:
        sys.stdout.write(product.cli_json() + "\n")
    if looks:
        for look in extraction.looks:
            sys.stdout.write(json.dumps({"look": look.to_json()}, ensure_ascii=False) + "\n")
    for problem in extraction.problems:
        print(f"problem: {problem.reason}: {problem.detail}", file=sys.stderr)
    if not extraction.products:
        print(f"no products found (platform detected: {extraction.platform})", file=sys.stderr)


def _fetch(url: str, allow_private: bool) -> tuple[bytes, str | None, str]:
    """One GET through the address guard, redirects followed by hand (≤ 5 hops), 32 MiB cap on the
    bytes received and on what they inflate to."""
    import httpx

    from lookbench_live.network import limits
    from lookbench_live.network.limits import BOT_NAME
    from lookbench_live.network.netguard import MAX_REDIRECTS, GuardedTransport, redirect_target

    limit = limits.PAGE_MAX_BYTES
    # The guarded transport checks each hop's resolved address and connects to that address.
    transport = GuardedTransport(allow_private=allow_private)
    from lookbench_live.network.bounded import ACCEPT_ENCODING, BodyTooLarge, read_bounded

    headers = {"User-Agent": f"{BOT_NAME} extract", "Accept-Encoding": ACCEPT_ENCODING}
    with httpx.Client(
        timeout=limits.DOWNLOAD_TIMEOUT_S, headers=headers, transport=transport, follow_redirects=False
    ) as client:
        for _ in range(MAX_REDIRECTS + 1):
            with client.stream("GET", url) as response:
                target = redirect_target(response)
                if target:
                    url = target
                    continue
                if response.status_code >= 400:
                    raise RuntimeError(f"{url} answered HTTP {response.status_code}")
                try:
                    # Raw bytes capped, each Content-Encoding layer inflated under the same cap.
                    body = read_bounded(response, limit)
                except BodyTooLarge as exc:
                    raise RuntimeError(f"{url}: {exc.detail}") from None
                return body, response.headers.get("content-type"), str(response.url)
    raise RuntimeError(f"{url}: more than {MAX_REDIRECTS} redirects")
