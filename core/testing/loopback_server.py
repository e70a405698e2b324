"""A local OpenAI-protocol server that behaves like vLLM, for tests and benchmarks.

It binds 127.0.0.1 only and answers `/v1/chat/completions`, `/v1/models` and `/health`.
A chat completion honours `response_format={"type": "json_schema", ...}` by building a
schema-valid answer: enum values come from a ground-truth map the caller supplies
(keyed by image sha256, or "sha256|bbox" for a crop), else the first enum value. The
image being annotated is named by the `X-Request-Id` header the annotator sends
("<sha256>|<bbox>|<task>|<nonce>"); without it, by the sha256 of the decoded image bytes.

Faults are injected on demand, per image, in order (each request consumes one), or for
every request of an image (`sticky`):

    429          429 with `Retry-After: <retry_after>`
    500, 503     server error
    400, 401, 404  client errors (not to be retried)
    hang         sleep `hang_seconds` before answering (a timeout for the client)
    invalid_json text that is not JSON
    oov          a value outside the schema's enum
    missing      the first attribute group left out
    bad_main     main_attribute set to a value not among the answered values
    truncated    half the JSON with `finish_reason="length"`
    box_outside  grounding boxes that leave the image

Every request is counted per image (`requests_for(sha)`), and every payload is checked
for remote image URLs (`remote_image_urls`), so tests can assert what was sent.

Usage: `with LoopbackServer(truth=...) as server: server.base_url` (a background thread),
or `python -m lookbench_live.testing.loopback_server --port P` (a process, for the bench).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import collections
import hashlib
import io
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import uvicorn
from PIL import Image

FAULTS = (
    "429",
    "500",
    "503",
    "400",
    "401",
    "404",
    "hang",
    "invalid_json",
    "oov",
    "missing",
    "bad_main",
    "truncated",
    "box_outside",
)
OUT_OF_VOCABULARY = "plaid-ish-zebra"  # a value no taxonomy has


def openai_parameter_error(model: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The 400 body OpenAI's API returns when a reasoning model (o1, o3, o4, GPT-5 family) gets
    `max_tokens` or a `temperature` other than 1 (X4); None when the request is acceptable.

    The texts are the API's own, as quoted in public bug reports (e.g. fish2018/YPrompt#26,
    gabrii/Cursor-Azure-GPT-5#33). Other model names (vLLM's) accept both parameters."""
    from lookbench_live.annotation.endpoint import is_reasoning_model

    if not is_reasoning_model(model):
        return None
    if "max_tokens" in body:
        return {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        }
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return {
            "error": {
                "message": f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                "Only the default (1) value is supported.",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "unsupported_value",
            }
        }
    return None


def strict_schema_error(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The 400 body OpenAI's API returns for `response_format` json_schema with `strict: true`
    whose schema is outside the strict subset (schema/strict.py); None when it fits or is not
    strict. The body's shape is the API's ("Invalid schema for response_format '<name>': ...",
    type invalid_request_error, param response_format, code None, as quoted in ag2ai/ag2#1990);
    the detail after the colon is ours."""
    from lookbench_live.schema.strict import openai_strict_problems

    response_format = body.get("response_format")
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping) or spec.get("strict") is not True:
        return None
    problems = openai_strict_problems(spec.get("schema"))
    if not problems:
        return None
    return {
        "error": {
            "message": f"Invalid schema for response_format {spec.get('name', '')!r}: {problems[0]}",
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    }


class LoopbackState:
    """What the server answers and what it saw; safe to mutate from the test thread."""

    def __init__(
        self,
        *,
        truth: Mapping[str, Mapping[str, Any]] | None = None,
        grounding: Mapping[str, list[dict[str, Any]]] | None = None,
        model: str = "loopback-vlm",
        latency: float = 0.0,
        retry_after: float = 0.0,
        hang_seconds: float = 30.0,
        api_key: str | None = None,
    ) -> None:
        self.truth: dict[str, Mapping[str, Any]] = dict(truth or {})
        self.grounding: dict[str, list[dict[str, Any]]] = dict(grounding or {})
        self.model = model
        self.latency = latency
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds
        self.api_key = api_key
        self.faults: dict[str, collections.deque[str]] = {}
        self.sticky: dict[str, str] = {}
        self.counts: collections.Counter[str] = collections.Counter()
        self.work_counts: collections.Counter[str] = collections.Counter()  # "sha256|bbox|task"
        self.total = 0
        self.remote_image_urls: list[str] = []
        self.payload_bytes: list[int] = []
        self.bodies: list[dict[str, Any]] = []
        self.keep_bodies = False
        self.headers_seen: list[dict[str, str]] = []
        self.rejected_parameters: list[str] = []
        self.rejected_schemas: list[str] = []  # 400s for a strict schema outside OpenAI's subset
        self._lock = threading.Lock()

    def inject(self, sha256: str, *faults: str, sticky: bool = False) -> None:
        for fault in faults:
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; faults are {FAULTS}")
        with self._lock:
            if sticky:
                self.sticky[sha256] = faults[0]
            else:
                self.faults.setdefault(sha256, collections.deque()).extend(faults)

    def requests_for(self, sha256: str) -> int:
        with self._lock:
            return self.counts[sha256]

    def requests_for_work(self, sha256: str, bbox: str, task: str) -> int:
        with self._lock:
            return self.work_counts[f"{sha256}|{bbox}|{task}"]

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.work_counts.clear()
            self.total = 0
            self.bodies.clear()
            self.payload_bytes.clear()

    def _next_fault(self, sha256: str, key: str) -> str | None:
        with self._lock:
            for name in (key, sha256):
                if name in self.sticky:
                    return self.sticky[name]
                queue = self.faults.get(name)
                if queue:
                    return queue.popleft()
        return None


# ----------------------------------------------------------------- answer building


def _image_of(body: Mapping[str, Any]) -> tuple[bytes | None, list[str]]:
    """The first data-URL image in the messages, and any non-data image URLs seen."""
    found: bytes | None = None
    remote: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            url = str((part.get("image_url") or {}).get("url", ""))
            if not url.startswith("data:"):
                remote.append(url)
                continue
            if found is None:
                try:
                    found = base64.b64decode(url.split(",", 1)[1], validate=True)
                except (IndexError, binascii.Error):
                    found = b""
    return found, remote


def _text_len(body: Mapping[str, Any]) -> int:
    total = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    return total


def _value_for(schema: Mapping[str, Any], name: str, truth: Mapping[str, Any]) -> Any:
    if "enum" in schema:
        wanted = truth.get(name)
        return wanted if wanted in schema["enum"] else schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for combiner in ("anyOf", "oneOf"):
        if combiner in schema:
            return _value_for(schema[combiner][0], name, truth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return _object_for(schema, truth)
    if kind == "array":
        count = int(schema.get("minItems", 0))
        # A multi-valued group: the truth may be a list or "a|b"; keep the values the enum has.
        enum = schema.get("items", {}).get("enum")
        wanted = truth.get(name)
        if enum is not None and wanted is not None:
            listed = wanted.split("|") if isinstance(wanted, str) else list(wanted)
            values = [v for v in listed if v in enum][: int(schema.get("maxItems", len(listed)))]
            if len(values) >= count:
                return values
        return [_value_for(schema.get("items", {}), name, truth) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return truth.get(name, "") if isinstance(truth.get(name), str) else ""


def _object_for(schema: Mapping[str, Any], truth: Mapping[str, Any]) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    answer: dict[str, Any] = {}
    for name, sub in properties.items():
        if name == "main_attribute":
            continue
        answer[name] = _value_for(sub, name, truth)
    if "main_attribute" in properties:
        answer["main_attribute"] = _main_attribute(properties["main_attribute"], answer, truth)
    return answer


def _main_attribute(schema: Mapping[str, Any], answer: Mapping[str, Any], truth: Mapping[str, Any]) -> Any:
    enum = schema.get("enum")
    wanted = truth.get("main_attribute")
    flat = [v for value in answer.values() for v in (value if isinstance(value, list) else [value])]
    chosen = [v for v in flat if isinstance(v, str) and v and v != "not_visible"]
    if wanted in chosen and (enum is None or wanted in enum):
        return wanted
    for value in chosen:
        if enum is None or value in enum:
            return value
    return _value_for(schema, "main_attribute", truth)


def _is_grounding(schema: Mapping[str, Any]) -> bool:
    item = schema.get("properties", {}).get("items", {}).get("items", {})
    return isinstance(item, dict) and "bbox_2d" in item.get("properties", {})


def _grounding_answer(
    schema: Mapping[str, Any], size: tuple[int, int], stated: list[dict[str, Any]] | None
) -> dict[str, Any]:
    width, height = size
    item_schema = schema["properties"]["items"]["items"]
    categories = item_schema["properties"]["category"].get("enum", ["item"])
    if stated:
        items = []
        for entry in stated:
            # Ground truth boxes are fractions of the image, so they survive the client's resize.
            fx0, fy0, fx1, fy1 = entry["box"]
            box = [round(fx0 * width), round(fy0 * height), round(fx1 * width), round(fy1 * height)]
            items.append({"category": entry["category"], "bbox_2d": box})
        return {"items": items}
    return {"items": [{"category": categories[0], "bbox_2d": [0, 0, width, height]}]}


def build_answer(
    body: Mapping[str, Any], state: LoopbackState, sha256: str, key: str, fault: str | None
) -> tuple[str, str]:
    """The completion text and finish reason for a request, with the fault applied."""
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    image, _ = _image_of(body)
    if fault == "invalid_json":
        return '{"category": "dress", "colour": ', "stop"
    if _is_grounding(schema):
        size = (0, 0)
        if image:
            with Image.open(io.BytesIO(image)) as opened:
                size = opened.size
        answer = _grounding_answer(schema, size, state.grounding.get(key) or state.grounding.get(sha256))
        if fault == "box_outside":
            for item in answer["items"]:
                item["bbox_2d"] = [size[0] // 2, size[1] // 2, size[0] + 40, size[1] + 40]
    else:
        truth = state.truth.get(key) or state.truth.get(sha256) or {}
        answer = _object_for(schema, truth)
        groups = [n for n, s in schema.get("properties", {}).items() if "enum" in s and n != "main_attribute"]
        if fault == "oov" and groups:
            answer[groups[-1]] = OUT_OF_VOCABULARY
        elif fault == "missing" and groups:
            answer.pop(groups[-1], None)
        elif fault == "bad_main":
            answer["main_attribute"] = OUT_OF_VOCABULARY
    text = json.dumps(answer, separators=(",", ":"))
    if fault == "truncated":
        return text[: max(1, len(text) // 2)], "length"
    return text, "stop"


# ----------------------------------------------------------------- the ASGI app


class LoopbackApp:
    """A raw ASGI app (no framework: it has to sustain the client benchmark)."""

    def __init__(self, state: LoopbackState) -> None:
        self.state = state

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope["path"]
        method = scope["method"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path == "/health":
            await _send_json(send, 200, {})
            return
        if self.state.api_key is not None and headers.get("authorization") != f"Bearer {self.state.api_key}":
            await _send_json(send, 401, {"error": {"message": "invalid api key", "type": "auth"}})
            return
        if path == "/v1/models" and method == "GET":
            await _send_json(
                send, 200, {"object": "list", "data": [{"id": self.state.model, "object": "model"}]}
            )
            return
        if path != "/v1/chat/completions" or method != "POST":
            await _send_json(send, 404, {"error": {"message": f"no route {method} {path}"}})
            return
        raw = bytearray()
        while True:
            message = await receive()
            raw.extend(message.get("body", b""))
            if not message.get("more_body"):
                break
        await self._complete(bytes(raw), headers, send)

    async def _complete(self, raw: bytes, headers: Mapping[str, str], send: Callable[..., Any]) -> None:
        state = self.state
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            await _send_json(send, 400, {"error": {"message": "body is not JSON"}})
            return
        rejected = openai_parameter_error(str(body.get("model", state.model)), body)
        if rejected is not None:
            with state._lock:
                state.total += 1
                state.rejected_parameters.append(rejected["error"]["param"])
            await _send_json(send, 400, rejected)
            return
        refused = strict_schema_error(body)
        if refused is not None:
            with state._lock:
                state.total += 1
                state.rejected_schemas.append(refused["error"]["message"])
            await _send_json(send, 400, refused)
            return
        image, remote = _image_of(body)
        request_id = headers.get("x-request-id", "")
        parts = request_id.split("|")
        if len(parts) >= 3:
            sha256, key = parts[0], f"{parts[0]}|{parts[1]}"
        else:
            sha256 = hashlib.sha256(image or b"").hexdigest()
            key = sha256
        with state._lock:
            state.counts[sha256] += 1
            if len(parts) >= 3:
                state.work_counts["|".join(parts[:3])] += 1
            state.total += 1
            state.remote_image_urls.extend(remote)
            state.payload_bytes.append(len(raw))
            state.headers_seen.append(dict(headers))
            if state.keep_bodies:
                state.bodies.append(body)
        fault = state._next_fault(sha256, key)
        if state.latency:
            await asyncio.sleep(state.latency)
        if fault == "429":
            await _send_json(
                send,
                429,
                {"error": {"message": "rate limited", "type": "rate_limit"}},
                extra=[(b"retry-after", f"{state.retry_after:g}".encode())],
            )
            return
        if fault in ("500", "503", "400", "401", "404"):
            await _send_json(
                send, int(fault), {"error": {"message": f"injected {fault}", "type": "injected"}}
            )
            return
        if fault == "hang":
            await asyncio.sleep(state.hang_seconds)
        if remote:
            await _send_json(send, 400, {"error": {"message": "remote image URLs are not allowed here"}})
            return
        text, finish = build_answer(body, state, sha256, key, fault)
        prompt_tokens = _text_len(body) // 4 + _image_tokens(image)
        completion_tokens = max(1, len(text) // 4)
        await _send_json(
            send,
            200,
            {
                "id": f"chatcmpl-{state.total}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", state.model),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


def _image_tokens(image: bytes | None) -> int:
    # Qwen2.5-VL: one token per 28×28 pixels after resizing.
    if not image:
        return 0
    try:
        with Image.open(io.BytesIO(image)) as opened:
            width, height = opened.size
    except Exception:
        return 0
    return max(1, (width * height) // (28 * 28))


async def _send_json(
    send: Callable[..., Any], status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": data})


# ----------------------------------------------------------------- running it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LoopbackServer:
    """The server in a background thread of this process; a context manager."""

    def __init__(self, port: int | None = None, **state: Any) -> None:
        self.state = LoopbackState(**state)
        self.port = port or free_port()
        config = uvicorn.Config(
            LoopbackApp(self.state),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="loopback-vlm", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LoopbackServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"loopback server did not start on 127.0.0.1:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getattr__(self, name: str) -> Any:
        # Convenience: server.inject(...), server.requests_for(...), server.total …
        return getattr(self.__dict__["state"], name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A vLLM-like OpenAI-protocol server on 127.0.0.1.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--model", default="loopback-vlm")
    parser.add_argument("--truth", help="JSON file: {sha256 or 'sha256|bbox': {group: value}}")
    args = parser.parse_args(argv)
    truth = json.loads(Path(args.truth).read_text(encoding="utf-8")) if args.truth else None
    state = LoopbackState(truth=truth, model=args.model, latency=args.latency)
    uvicorn.run(
        LoopbackApp(state),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
