"""Bounded decode workers (reliability I7): validate, hash, strip and store images in child processes.

Each worker is a child Python process (running `_worker_main`) that takes
one image at a time over a pipe and answers with the outcome. What bounds it:
- a wall-clock deadline per image (`decode_timeout`): past it the parent kills the worker
  (SIGKILL), records the image `decode_timeout` and starts a replacement;
- `RLIMIT_CPU`, raised before each image to the CPU used so far plus `decode_timeout`: a
  decode spinning on the CPU is killed by the kernel even if the parent is slow to notice;
- `RLIMIT_AS`: the worker's address space may grow by `decode_memory_mb` over what it holds
  after start-up; an image whose decode needs more fails with `MemoryError`, recorded
  `decoder_crash` ("out of memory"), and that worker exits and is replaced (its heap may be
  fragmented);
- a worker that dies on an image (a parser crash, `os.abort`) costs only that image
  (`decoder_crash`): each worker has one image in flight, so the culprit is never in doubt.
The worker also applies the EXIF orientation (`orientation`), strips metadata, computes the sha256 and, for a local lake, writes the file
(atomically, without fsync: the caller makes a whole batch durable before its rows commit,
see `ingestor`), so the parent process only fetches. Workers start with a minimal
environment (no credentials reach code that parses untrusted bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import pickle
import resource
import signal
import struct
import subprocess
import sys
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.metadata import MetadataError, strip_metadata
from lookbench_live.ingest.orientation import upright
from lookbench_live.ingest.validator import ImageRejected, ValidImage, validate_image

Validate = Callable[[bytes, IngestSettings], ValidImage]
_HEADER = struct.Struct(">I")
START_TIMEOUT_S = 60.0
# What a worker's environment keeps; everything else (cloud and API credentials included) is dropped.
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


@dataclass(frozen=True, slots=True)
class Processed:
    """An image that passed: the decode's facts, and the stored (metadata-free) bytes' identity."""

    valid: ValidImage
    sha256: str
    byte_size: int
    path: str | None  # the file written in a local lake (to make durable before commit)
    data: bytes | None  # the stripped bytes, when the caller stores them itself (object stores)
    note: str | None = None  # how the EXIF orientation was applied, recorded in `images.detail`


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    detail: str


def write_unsynced(path: str, data: bytes) -> None:
    """Write `data` to `path` atomically (tmp + rename) but without fsync; see `sync_paths`.

    An existing file of the right size is kept: content-addressed, it holds these bytes (a
    crash before the batch's sync may leave a short or empty file, which is rewritten).
    """
    try:
        if os.path.getsize(path) == len(data):
            return
    except OSError:
        pass
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def process_image(
    data: bytes, settings: IngestSettings, validate: Validate, image_path: Callable[[str], str] | None
) -> Processed | Refused:
    """Validate by decoding, make upright, strip metadata, hash, and store when `image_path` is given."""
    try:
        valid = validate(data, settings)
    except ImageRejected as exc:
        return Refused(exc.reason, exc.detail)
    try:
        oriented = upright(data, valid.format)
    except (OSError, ValueError, SyntaxError, EOFError, subprocess.SubprocessError) as exc:
        # Pillow's decode errors, as in the validator: the image is recorded, never half stored.
        return Refused("orientation_error", f"{type(exc).__name__}: {exc}")
    if oriented.method is not None:
        # Size and perceptual hashes are those of the upright picture, the frame of every box.
        data = oriented.data
        try:
            valid = validate(data, settings)
        except ImageRejected as exc:
            return Refused(exc.reason, exc.detail)
    try:
        # Metadata (EXIF GPS, XMP, text chunks) never enters the lake; pixel data is kept byte for byte.
        stripped = strip_metadata(data, valid.format)
    except MetadataError as exc:
        return Refused("malformed_container", str(exc))
    sha = hashlib.sha256(stripped).hexdigest()
    if image_path is None:
        return Processed(valid, sha, len(stripped), None, stripped, oriented.note())
    path = image_path(sha)
    write_unsynced(path, stripped)
    return Processed(valid, sha, len(stripped), path, None, oriented.note())


def images_root(lake_home: str | None) -> str | None:
    """The folder of a local lake's image files (`Lake(lake_home).path("images")`)."""
    if lake_home is None:
        return None
    from lookbench_live.warehouse.lake import Lake

    return Lake(lake_home).path("images")


def local_image_path(root: str, sha256: str) -> str:
    """`Lake.image_path` for a local lake whose images live under `root`, without importing the
    lake (pyarrow, pandas) into a decode worker; `test_ingest_workers` checks the two agree."""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return "/".join([root, sha256[:2], sha256[2:4], sha256])


# ---------------------------------------------------------------------------- worker side
def _read_exact(stream: Any, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _vm_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _worker_main() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        # Die with the parent (a killed run): a worker stuck in a decode would otherwise linger.
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    inbox = sys.stdin.buffer
    outbox = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # a stray print from a library must not corrupt the replies
    header = _read_exact(inbox, _HEADER.size)
    if header is None:
        return
    init = pickle.loads(_read_exact(inbox, _HEADER.unpack(header)[0]) or b"")
    settings: IngestSettings = init["settings"]
    validate: Validate = init["validate"]
    image_path: Callable[[str], str] | None = None
    if init["images_root"] is not None:
        image_path = functools.partial(local_image_path, init["images_root"])
    budget = settings.decode_memory_mb * 1024 * 1024
    if sys.platform.startswith("linux"):
        limit = _vm_bytes() + budget
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]

    def reply(message: object) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        outbox.write(_HEADER.pack(len(payload)) + payload)

    reply("ready")
    while True:
        header = _read_exact(inbox, _HEADER.size)
        if header is None:
            return  # the parent closed the pipe: done
        data = _read_exact(inbox, _HEADER.unpack(header)[0])
        if data is None:
            return
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + settings.decode_timeout) + 1
        if cpu_hard == resource.RLIM_INFINITY or soft < cpu_hard:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
        try:
            result: Processed | Refused = process_image(data, settings, validate, image_path)
        except MemoryError:
            del data
            reply(
                Refused(
                    "decoder_crash", f"out of memory: decoding needs more than {settings.decode_memory_mb} MB"
                )
            )
            return  # exit; the parent starts a fresh worker
        except Exception as exc:  # a bug in a decoder: that image is refused, the worker goes on
            result = Refused("decode_error", f"{type(exc).__name__}: {exc}"[:500])
        reply(result)


# ---------------------------------------------------------------------------- parent side
class WorkersUnavailable(RuntimeError):
    """No decode worker could start (not a property of any image)."""


# Images sent ahead to one worker: the worker never waits for the parent between images
# (on a busy machine each round trip costs two trips through the run queue), and the
# culprit of a crash or hang is still known: a worker decodes its queue in order, so it is
# the oldest unanswered image. The others are sent again to a fresh worker, not blamed.
IN_FLIGHT_PER_WORKER = 4


class _Resend(Exception):
    """The image was queued behind one that killed its worker: decode it again elsewhere."""


class _Worker:
    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.wakeup = asyncio.Event()
        self.reader: asyncio.Task[None] | None = None
        self.alive = True

    def queue(self, data: bytes) -> None:
        """Write one message without yielding, so messages and `pending` keep the same order."""
        assert self.process.stdin is not None
        self.process.stdin.write(_HEADER.pack(len(data)) + data)

    async def send(self, data: bytes) -> None:
        self.queue(data)
        assert self.process.stdin is not None
        await self.process.stdin.drain()

    async def receive(self) -> Any:
        assert self.process.stdout is not None
        header = await self.process.stdout.readexactly(_HEADER.size)
        return pickle.loads(await self.process.stdout.readexactly(_HEADER.unpack(header)[0]))

    def kill(self) -> None:
        self.alive = False
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()


def _widen_pipe(process: asyncio.subprocess.Process) -> None:
    """Let the pipe to a worker hold its queue of images (Linux: up to pipe-max-size, 1 MiB by
    default) instead of 64 KiB: an 80 kB image then goes in one write, not several writes each
    waiting for the worker to drain the pipe and the event loop to notice."""
    import fcntl

    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    transport = process.stdin.transport if process.stdin is not None else None
    pipe = transport.get_extra_info("pipe") if transport is not None else None
    if setter is None or pipe is None:
        return
    with contextlib.suppress(OSError):  # a lower pipe-max-size or an unprivileged limit: keep 64 KiB
        fcntl.fcntl(pipe.fileno(), setter, 1 << 20)


class DecodePool:
    """`size` bounded worker processes; `await pool.process(data)` gives `Processed` or `Refused`.

    `lake_home`: a local lake whose image files the workers write (None: the bytes come back
    and the caller stores them). `validate` must be importable by name (it is pickled by
    reference); tests pass one that hangs or crashes on a marked image.
    """

    def __init__(
        self,
        settings: IngestSettings,
        size: int,
        *,
        validate: Validate = validate_image,
        lake_home: str | None = None,
    ):
        self.settings = settings
        self.size = size
        self.init = pickle.dumps(
            {"settings": settings, "validate": validate, "images_root": images_root(lake_home)},
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        self._workers: list[_Worker] | None = None
        self._start_lock = asyncio.Lock()
        self._room = asyncio.Condition()
        self.replaced = 0

    async def _spawn(self) -> _Worker:
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        env.update(
            PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
            OMP_NUM_THREADS="1",
            OPENBLAS_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from lookbench_live.ingest.workers import _worker_main; _worker_main()",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # a Ctrl-C to the run's group is the parent's to handle
        )
        worker = _Worker(process)
        _widen_pipe(process)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await worker.send(self.init)
                ready = await worker.receive()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError) as exc:
            worker.kill()
            await process.wait()
            raise WorkersUnavailable(
                f"a decode worker did not start ({type(exc).__name__}; exit code {process.returncode})"
            ) from exc
        if ready != "ready":
            worker.kill()
            raise WorkersUnavailable(f"a decode worker answered {ready!r} instead of ready")
        worker.reader = asyncio.ensure_future(self._read(worker))
        return worker

    async def _started(self) -> list[_Worker]:
        async with self._start_lock:
            if self._workers is None:
                self._workers = list(await asyncio.gather(*(self._spawn() for _ in range(self.size))))
            return self._workers

    async def _read(self, worker: _Worker) -> None:
        """Answer `worker`'s queue in order; on a hang or death, blame the oldest image only."""
        while True:
            while not worker.pending:
                if not worker.alive:
                    return
                worker.wakeup.clear()
                await worker.wakeup.wait()
            head = worker.pending[0]
            # The worker starts on the head when it answered the one before: now, roughly.
            try:
                async with asyncio.timeout(self.settings.decode_timeout):
                    result = await worker.receive()
            except TimeoutError:
                failure: Refused = Refused(
                    "decode_timeout", f"decoding took longer than {self.settings.decode_timeout:g} s"
                )
            except (asyncio.IncompleteReadError, ConnectionError, EOFError):
                worker.kill()
                code = await worker.process.wait()
                if code == -signal.SIGXCPU:
                    failure = Refused("decode_timeout", "decoding used up its CPU time limit")
                else:
                    failure = Refused(
                        "decoder_crash", f"the decoding process died on this image (exit code {code})"
                    )
            except Exception as exc:  # an answer we cannot read: that worker is not trusted again
                failure = Refused(
                    "decoder_crash", f"unreadable answer from the decoding process: {exc!r}"[:500]
                )
            else:
                worker.pending.popleft()
                if not head.done():
                    head.set_result(result)
                if not (isinstance(result, Refused) and result.reason == "decoder_crash"):
                    async with self._room:
                        self._room.notify()
                    continue
                await self._retire(worker, None)  # it exits after an out-of-memory answer
                return
            await self._retire(worker, failure)
            return

    async def _retire(self, worker: _Worker, failure: Refused | None) -> None:
        """Kill `worker`, blame its head image (`failure`), resend the rest, start a replacement."""
        worker.kill()
        await worker.process.wait()
        if failure is not None and worker.pending:
            head = worker.pending.popleft()
            if not head.done():
                head.set_result(failure)
        while worker.pending:
            queued = worker.pending.popleft()
            if not queued.done():
                queued.set_exception(_Resend())
        assert self._workers is not None
        self.replaced += 1
        try:
            fresh = await self._spawn()
        except WorkersUnavailable:
            fresh = None
        async with self._room:
            index = self._workers.index(worker)
            if fresh is not None:
                self._workers[index] = fresh
            else:
                del self._workers[index]
            self._room.notify_all()

    async def process(self, data: bytes) -> Processed | Refused:
        workers = await self._started()
        while True:
            async with self._room:
                while True:
                    if not workers:
                        raise WorkersUnavailable("every decode worker died and none could be restarted")
                    live = [w for w in workers if w.alive]
                    worker = min(live, key=lambda w: len(w.pending), default=None)
                    if worker is not None and len(worker.pending) < IN_FLIGHT_PER_WORKER:
                        break
                    await self._room.wait()
                future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                worker.pending.append(future)
                worker.wakeup.set()
                # A dead worker's pipe: its reader blames the oldest image and resends this one.
                with contextlib.suppress(ConnectionError, OSError):
                    worker.queue(data)
            with contextlib.suppress(ConnectionError, OSError):
                assert worker.process.stdin is not None
                await worker.process.stdin.drain()
            try:
                return await future  # type: ignore[no-any-return]
            except _Resend:
                continue

    async def aclose(self) -> None:
        workers = self._workers or []
        for worker in workers:
            worker.alive = False
            worker.wakeup.set()
            if worker.process.stdin is not None and not worker.process.stdin.is_closing():
                worker.process.stdin.close()
        for worker in workers:
            try:
                async with asyncio.timeout(5):
                    await worker.process.wait()
            except TimeoutError:
                worker.kill()
                await worker.process.wait()
            if worker.reader is not None:
                worker.reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker.reader


def sync_paths(paths: list[str]) -> None:
    """Make written files (and their folders' entries) durable before rows that name them commit.

    On Linux one `syncfs` of the lake's filesystem does it for the whole batch; elsewhere
    each file and folder is fsynced.
    """
    if not paths:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(os.path.dirname(paths[0]), os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    folders = set()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        folders.add(os.path.dirname(path))
        folders.add(os.path.dirname(os.path.dirname(path)))
    for folder in folders:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
