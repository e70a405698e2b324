"""Values the configuration refuses at load, through the installed command (X11, X20 traps):
a secret pasted where an environment variable's name belongs is refused and never echoed, and a
site's base_url must be an http(s) URL with a host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lookbench_live.config import ConfigError, load_settings

CANARY = "sk-proj-CANARY-7f3e9a1b2c"


def _run(cli: str, config: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "LOOKBENCH_HOME": str(tmp_path / "lake"), **env}
    return subprocess.run(
        [cli, "takedown", "list", "--config", str(config)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


@pytest.mark.parametrize("section", ["judge", "annotation"])
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "LOOKBENCH_DEBUG"])
def test_a_secret_pasted_into_an_env_setting_is_refused_and_never_echoed(
    cli: str, tmp_path: Path, section: str, debug: bool
) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(f'[{section}]\napi_key_env = "{CANARY}"\n')
    out = _run(cli, config, tmp_path, **({"LOOKBENCH_DEBUG": "1"} if debug else {}))
    assert out.returncode != 0
    assert f"{section}.api_key_env" in out.stderr and "environment variable" in out.stderr
    # Neither the value nor any part of it, even in the traceback LOOKBENCH_DEBUG prints.
    assert "CANARY" not in out.stdout + out.stderr
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").rglob("*.parquet"))


@pytest.mark.parametrize(
    "value", ["VLLM_API_KEY", "MY_KEY_2", "_PRIVATE"], ids=["default", "digits", "underscore"]
)
def test_environment_variable_names_are_accepted(tmp_path: Path, value: str) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(f'[annotation]\napi_key_env = "{value}"\n[judge]\napi_key_env = "{value}"\n')
    settings = load_settings(config)
    assert settings.annotation.api_key_env == settings.judge.api_key_env == value


@pytest.mark.parametrize("value", ["sk-abc", "openai_api_key", "1KEY", "KEY NAME", "", "KEY=sk-1"])
def test_anything_else_is_not_a_name(tmp_path: Path, value: str) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(f'[judge]\napi_key_env = "{value}"\n')
    with pytest.raises(ConfigError, match=r"judge\.api_key_env") as raised:
        load_settings(config)
    if value:
        assert value not in str(raised.value)


def _site(base_url: str) -> str:
    return f'[[crawl.sites]]\nname = "boutique"\nplatform = "shopify"\nbase_url = "{base_url}"\n'


def test_a_file_base_url_is_refused_at_load_naming_the_site(cli: str, tmp_path: Path) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(_site("file:///etc/passwd"))
    out = _run(cli, config, tmp_path)
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "crawl.sites.0.base_url" in out.stderr and "'boutique'" in out.stderr
    assert "http(s)" in out.stderr


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("crawl.sites.0.base_url", _site("ftp://shop.example")),
        ("crawl.sites.0.base_url", _site("https://")),
        ("crawl.sites.0.base_url", _site("shop.example")),
        ("crawl.sites.0.base_url", _site("https://shop.example:99999/")),
        ("crawl.sites.0.base_url", _site(f"https://admin:{CANARY}@shop.example/")),
        ("judge.base_url", '[judge]\nbase_url = "file:///tmp/judge"\n'),
        ("annotation.base_url", f'[annotation]\nbase_url = "http://u:{CANARY}@vllm:8000/v1"\n'),
    ],
)
def test_unusable_urls_are_refused_at_load(tmp_path: Path, where: str, text: str) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")) as raised:
        load_settings(config)
    assert "CANARY" not in str(raised.value)


def test_usable_site_urls_load(tmp_path: Path) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(
        _site("https://shop.example") + _site("http://127.0.0.1:8080/store").replace("boutique", "local")
    )
    sites = load_settings(config).crawl.sites
    assert [s.base_url for s in sites] == ["https://shop.example", "http://127.0.0.1:8080/store"]
