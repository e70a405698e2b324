"""docker-compose.yml: a valid Compose file whose services agree with the settings the code reads.

No Docker engine runs here: the file is validated with Debian's `docker-compose` 1.29
(`config -q`) or, without it, against the Compose Specification JSON schema it ships.
The rest checks the wiring: the worker's environment, deploy/lookbench.toml, the vLLM,
MinIO and Prefect services, loopback-only ports and secrets taken only from the environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from lookbench_live.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
TOML = ROOT / "deploy" / "lookbench.toml"
DOCKERFILE = ROOT / "deploy" / "worker.Dockerfile"
SCHEMA_CANDIDATES = [
    Path("/usr/lib/python3/dist-packages/compose/config/compose_spec.json"),  # Debian's docker-compose
]
# The package folders installed under lookbench_live (what "the code" is).
CODE_DIRS = (
    "lookbench_live",
    "core",
    "flows",
    "scrapers",
    "generation",
    "annotation",
    "schema",
    "warehouse",
    "dedup",
    "evaluation",
)
# Every variable the file requires (`${VAR:?…}`), with a distinct sentinel value each.
SECRETS = {
    "POSTGRES_PASSWORD": "sentinel-postgres-password",
    "MINIO_ROOT_USER": "sentinel-minio-user",
    "MINIO_ROOT_PASSWORD": "sentinel-minio-password",
    "LOOKBENCH_S3_ACCESS_KEY": "sentinel-s3-access",
    "LOOKBENCH_S3_SECRET_KEY": "sentinel-s3-secret",
    "VLLM_API_KEY": "sentinel-vllm-key",
    "OPENAI_API_KEY": "sentinel-openai-key",
}
SECRET_NAME = re.compile(r"(KEY|SECRET|PASSWORD|TOKEN|ROOT_USER)$")
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, $$."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        present = name in env and (env[name] != "" or op in (None, "-", "?"))
        if op in (":-", "-"):
            return env[name] if present else arg
        if op in (":?", "?") and not present:
            raise KeyError(f"{name}: {arg}")
        return env.get(name, "")

    parts = value.split("$$")
    return "$".join(REFERENCE.sub(one, part) for part in parts)


def resolve(node: Any, env: dict[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolve(item, env) for item in node]
    if isinstance(node, dict):
        return {key: resolve(value, env) for key, value in node.items()}
    return node


@cache
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


@cache
def resolved() -> dict[str, Any]:
    return resolve(raw(), dict(SECRETS))


def service(name: str) -> dict[str, Any]:
    services = resolved()["services"]
    assert name in services, f"docker-compose.yml has no service {name!r} (services: {sorted(services)})"
    return services[name]


def environment(name: str) -> dict[str, str]:
    env = service(name).get("environment") or {}
    if isinstance(env, list):  # the list form: ["KEY=value", …]
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def arg_after(command: list[str], flag: str) -> str:
    assert flag in command, f"{flag} not in {command}"
    return command[command.index(flag) + 1]


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """Only PATH and what the test gives: the developer's own variables must not make the file pass."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"), **extra}


# ---------------------------------------------------------------------- validity
def test_compose_file_is_valid() -> None:
    validated_by = []
    binary = shutil.which("docker-compose")
    if binary:
        ok = subprocess.run(
            [binary, "-f", str(COMPOSE), "config", "-q"],
            capture_output=True,
            text=True,
            env=clean_env(SECRETS),
            cwd=ROOT,
            timeout=60,
        )
        assert ok.returncode == 0, f"docker-compose config -q failed:\n{ok.stderr}"
        # Without its secrets the file refuses to render, naming the variable.
        missing = subprocess.run(
            [binary, "-f", str(COMPOSE), "config", "-q"],
            capture_output=True,
            text=True,
            env=clean_env({}),
            cwd=ROOT,
            timeout=60,
        )
        assert missing.returncode != 0
        assert any(name in missing.stderr for name in SECRETS), missing.stderr
        validated_by.append("docker-compose")
    schema_path = next((p for p in SCHEMA_CANDIDATES if p.exists()), None)
    if schema_path is not None:
        import jsonschema

        schema = json.loads(schema_path.read_text())
        validator_cls = jsonschema.validators.validator_for(schema)
        errors = sorted(validator_cls(schema).iter_errors(resolved()), key=lambda e: list(e.path))
        assert not errors, "; ".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5])
        validated_by.append(str(schema_path))
    if not validated_by:
        pytest.fail(
            "cannot validate docker-compose.yml: neither the docker-compose binary nor the Compose "
            "Specification schema is installed; run `bash scripts/install-system.sh` as root "
            "(apt-get install -y docker-compose)"
        )


def test_services_healthchecks_and_volumes() -> None:
    services = resolved()["services"]
    assert {"postgres", "prefect-server", "worker", "minio", "minio-init", "vllm"} <= set(services)
    for name, spec in services.items():
        if spec.get("restart") != "no":  # a one-shot job (minio-init, models-pull) has nothing to watch
            assert spec.get("healthcheck", {}).get("test"), f"service {name} has no healthcheck"
    declared = set(resolved().get("volumes") or {})
    for name, spec in services.items():
        for mount in spec.get("volumes") or []:
            source = mount.split(":", 1)[0] if isinstance(mount, str) else mount.get("source", "")
            if source and not source.startswith((".", "/", "~", "$")):
                assert source in declared, f"service {name} mounts undeclared volume {source}"
    assert {"postgres-data", "minio-data", "worker-state"} <= declared
    prefect = service("prefect-server")
    assert prefect["image"].startswith("prefecthq/prefect:3")
    assert (
        prefect["command"][:3] == ["prefect", "server", "start"]
        and arg_after(prefect["command"], "--host") == "0.0.0.0"
    )
    db_url = environment("prefect-server")["PREFECT_API_DATABASE_CONNECTION_URL"]
    parts = urlsplit(db_url)
    assert parts.scheme == "postgresql+asyncpg" and parts.hostname == "postgres"
    assert (
        parts.password == SECRETS["POSTGRES_PASSWORD"]
        and parts.username == environment("postgres")["POSTGRES_USER"]
    )
    assert parts.path.lstrip("/") == environment("postgres")["POSTGRES_DB"]
    assert service("prefect-server")["depends_on"]["postgres"]["condition"] == "service_healthy"
    worker_deps = service("worker")["depends_on"]
    assert worker_deps["prefect-server"]["condition"] == "service_healthy"
    assert worker_deps["minio-init"]["condition"] == "service_completed_successfully"


# ---------------------------------------------------------------------- the worker reads what it is given
def _string_literals(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        found |= set(
            re.findall(
                r"""["']([A-Z][A-Z0-9_]{2,})["']""", path.read_text(encoding="utf-8", errors="replace")
            )
        )
    return found


@cache
def our_env_names() -> set[str]:
    return _string_literals([p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py")])


@cache
def library_env_names() -> dict[str, set[str]]:
    """Environment variables the libraries the worker runs read, from their own sources."""
    import botocore.configprovider
    import botocore.credentials
    import huggingface_hub.constants
    from prefect.settings import Settings
    from prefect.settings.legacy import _get_valid_setting_names

    botocore_names = {
        n
        for n in _string_literals(
            [Path(botocore.configprovider.__file__), Path(botocore.credentials.__file__)]
        )
        if n.startswith("AWS_")
    }
    return {
        "prefect": set(_get_valid_setting_names(Settings)),
        "botocore": botocore_names,
        "huggingface_hub": {
            n for n in _string_literals([Path(huggingface_hub.constants.__file__)]) if n.startswith("HF_")
        },
    }


def test_every_worker_variable_is_read_by_the_code_or_its_libraries() -> None:
    env = environment("worker")
    settings = load_settings(TOML)
    named_in_toml = {settings.annotation.api_key_env, settings.judge.api_key_env}
    libraries = library_env_names()
    for name in env:
        readers = [lib for lib, names in libraries.items() if name in names]
        if name in our_env_names():
            readers.append("lookbench_live")
        if name in named_in_toml:
            readers.append("deploy/lookbench.toml")
        assert readers, f"worker variable {name} is read by nothing (a typo?)"
    for name in ("LOOKBENCH_HOME", "LOOKBENCH_CONFIG"):
        assert name in env and name in our_env_names(), name
    assert "PREFECT_API_URL" in env and "PREFECT_API_URL" in libraries["prefect"]
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        assert name in env and name in libraries["botocore"], name


def test_worker_runs_the_serve_command_with_the_mounted_config(cli: str) -> None:
    worker = service("worker")
    command = worker["command"]
    assert command[:2] == ["lookbench-live", "serve"]
    config_path = arg_after(command, "--config")
    assert environment("worker")["LOOKBENCH_CONFIG"] == config_path
    mounts = {m.split(":")[1]: m.split(":")[0] for m in worker["volumes"] if isinstance(m, str)}
    assert (ROOT / mounts[config_path]).resolve() == TOML, (
        "the TOML mounted at --config is deploy/lookbench.toml"
    )
    assert worker["build"]["dockerfile"] == "deploy/worker.Dockerfile"
    assert (ROOT / worker["build"]["context"] / worker["build"]["dockerfile"]).resolve() == DOCKERFILE
    proc = subprocess.run([cli, "serve", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--config" in proc.stdout, proc.stderr[-2000:]


def test_worker_image_installs_what_the_stack_needs() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    pinned = (ROOT / "constraints.txt").read_text().split("torch==", 1)[1].split()[0]
    assert f"torch=={pinned}" in text, "the image pins the same torch as constraints.txt"
    assert "-c constraints.txt" in text
    assert re.search(r"apt-get install[^\n]*chromium", text)
    extras = re.search(r"\[([a-z0-9_,-]+)\]\"", text)
    assert extras, "the project is installed with extras"
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"s3", "dask"} <= set(extras.group(1).split(",")) <= set(optional)
    assert "COPY deploy/lookbench.toml " + environment("worker")["LOOKBENCH_CONFIG"] in text


# ---------------------------------------------------------------------- the TOML and the services agree
def test_lookbench_toml_points_at_the_services() -> None:
    settings = load_settings(TOML)  # unknown keys or wrong values fail here
    worker_env = environment("worker")

    # annotation -> the vllm service, on the port vllm serves, with the model it serves
    url = urlsplit(settings.annotation.base_url or "")
    vllm = service("vllm")
    assert url.scheme == "http" and url.hostname == "vllm" and url.path.rstrip("/") == "/v1"
    assert url.port == int(arg_after(vllm["command"], "--port"))
    assert settings.annotation.model == arg_after(vllm["command"], "--served-model-name")
    assert settings.annotation.model == "Qwen/Qwen2.5-VL-72B-Instruct"
    # the key the TOML names reaches the worker, and it is the key vllm checks
    assert settings.annotation.api_key_env in worker_env
    assert worker_env[settings.annotation.api_key_env] == environment("vllm")["VLLM_API_KEY"]
    if settings.judge.base_url:
        assert settings.judge.api_key_env in worker_env

    # the lake -> the bucket minio-init creates, through the minio service
    lake = urlsplit(settings.lake.home or "")
    assert lake.scheme == "s3"
    init_script = " ".join(service("minio-init")["command"])
    buckets = re.findall(r"mc mb (?:--ignore-existing |-p )*local/([a-z0-9.-]+)", init_script)
    assert lake.hostname in buckets, f"bucket {lake.hostname} is not created by minio-init ({buckets})"
    assert worker_env["LOOKBENCH_HOME"] == settings.lake.home
    endpoint = urlsplit(worker_env["AWS_ENDPOINT_URL"])
    minio = service("minio")
    assert endpoint.hostname == "minio" and minio["command"][:2] == ["server", "/data"]
    assert endpoint.port == 9000 and "--address" not in minio["command"]  # MinIO's default S3 port
    assert "mc alias set local http://minio:9000 " in init_script
    # the worker's S3 user is the one minio-init creates
    init_env = environment("minio-init")
    assert worker_env["AWS_ACCESS_KEY_ID"] == init_env["LOOKBENCH_S3_ACCESS_KEY"]
    assert worker_env["AWS_SECRET_ACCESS_KEY"] == init_env["LOOKBENCH_S3_SECRET_KEY"]
    assert 'mc admin user add local "$LOOKBENCH_S3_ACCESS_KEY" "$LOOKBENCH_S3_SECRET_KEY"' in init_script

    # Prefect: the worker talks to the server service on the port it starts on
    api = urlsplit(worker_env["PREFECT_API_URL"])
    assert api.hostname == "prefect-server" and api.path == "/api"
    assert api.port == int(arg_after(service("prefect-server")["command"], "--port"))


# ---------------------------------------------------------------------- exposure and secrets
def test_nothing_is_published_beyond_loopback() -> None:
    for name, spec in resolved()["services"].items():
        assert spec.get("network_mode") != "host", f"service {name} uses the host network"
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                host_ip = port.get("host_ip")
            else:
                fields = str(port).split(":")
                host_ip = fields[0] if len(fields) == 3 else None
            assert host_ip == "127.0.0.1", f"service {name} publishes {port} beyond loopback"


def test_secrets_come_only_from_the_environment() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    for name, spec in raw()["services"].items():
        env = spec.get("environment") or {}
        for key, value in env.items():
            value = str(value)
            if SECRET_NAME.search(key):
                ref = REFERENCE.fullmatch(value)
                assert ref, f"{name}.{key} must be a ${{VAR}} reference, not a literal"
                assert ref.group(2) == ":?" or (ref.group(2) == ":-" and not ref.group(3)), (
                    f"{name}.{key}: a secret is required (${{VAR:?…}}) or empty by default, never defaulted"
                )
            for userinfo in re.findall(r"://[^/@\s]*:([^/@\s]+)@", value):
                assert REFERENCE.fullmatch(userinfo), f"{name}.{key} embeds a literal password in a URL"
    # Rendered with sentinels, every secret-named variable carries its sentinel: nothing else supplies it.
    for name in resolved()["services"]:
        for key, value in environment(name).items():
            if SECRET_NAME.search(key) and key != "HF_TOKEN":
                assert value in SECRETS.values(), f"{name}.{key} does not come from the environment"
    # And no sentinel-shaped literal, key or password value was written into the file itself.
    for value in SECRETS.values():
        assert value not in text
    assert not re.search(r"(?i)(sk-[a-z0-9]{16,}|AKIA[0-9A-Z]{16})", text), (
        "an API key literal is in the file"
    )


# ---------------------------------------------------------------------- models: pulled once, runs offline
def test_models_are_pulled_into_a_volume_the_offline_worker_and_vllm_read() -> None:
    worker, vllm, pull = service("worker"), service("vllm"), service("models-pull")
    assert environment("worker")["HF_HUB_OFFLINE"] == "1" and environment("vllm")["HF_HUB_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in environment("models-pull")  # the one online step
    hf_home = environment("worker")["HF_HOME"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in worker["volumes"]}
    assert mounts[hf_home] == "models"
    pull_mounts = {m.split(":")[1]: m.split(":")[0] for m in pull["volumes"]}
    assert pull_mounts[environment("models-pull")["HF_HOME"]] == "models"
    assert pull_mounts["/etc/lookbench/lookbench.toml"] == "./deploy/lookbench.toml"
    vllm_mounts = {m.split(":")[1]: m.split(":")[0] for m in vllm["volumes"]}
    assert vllm_mounts[environment("vllm")["HF_HOME"]] == "models"
    script = " ".join(pull["command"])
    assert "lookbench-live models pull --config /etc/lookbench/lookbench.toml" in script
    assert f"--to {hf_home}/hub" in script  # the hub cache of the worker's HF_HOME
    assert pull["profiles"] == ["pull"] and pull["image"] == worker["image"]
    # The worker and vLLM get distinct GPUs.
    gpus = {
        name: set(service(name)["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"])
        for name in ("worker", "vllm")
    }
    assert len(gpus["vllm"]) == int(arg_after(vllm["command"], "--tensor-parallel-size"))
    assert gpus["worker"] and not gpus["worker"] & gpus["vllm"]


def test_every_image_is_pinned_and_the_worker_waits_for_a_healthy_vllm() -> None:
    """Issue 25: no `latest`-style tag, the Prefect server at the worker's Prefect version, and
    the worker started only once vLLM passes its healthcheck."""
    import re

    import prefect

    for name, spec in resolved()["services"].items():
        image = spec.get("image")
        if image is None:
            continue
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert tag and "latest" not in tag and re.search(r"\d+\.\d+|\d{4}-\d{2}-\d{2}", tag), (
            f"service {name}: {image} is not pinned"
        )
    server_tag = service("prefect-server")["image"].rsplit(":", 1)[1]
    assert server_tag.split("-", 1)[0] == prefect.__version__
    assert f"prefect=={prefect.__version__}" in (ROOT / "constraints.txt").read_text(encoding="utf-8").split()
    assert service("worker")["depends_on"]["vllm"]["condition"] == "service_healthy"
    assert service("vllm")["healthcheck"]["test"]
