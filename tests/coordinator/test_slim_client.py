"""The slim signing client on a newer Python: the package installed without its `full` extra into a fresh
Python 3.13 (or 3.12) environment holds only what signing needs (eth-account, httpx), and from there it signs
requests the coordinator accepts (a session token bought with one signature, signed writes and reads), a
tampered signature is refused, and the market's commands say in one line what to install instead of failing
on an import. The coordinator itself runs here, on the project's Python."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.coordinator.conftest import ApiServer

NEWER_PYTHONS = ("3.13", "3.12")
SOURCES = ("pyproject.toml", "README.md", "client_sdk", "coordinator", "miner")

# Run by the slim environment's Python: every request the openai-python path makes goes through WalletSigner.
SIGNING_SCRIPT = """
import importlib.util, json, sys
import httpx
from eth_account import Account
from client_sdk.http import WalletSigner, coordinator_client

url = sys.argv[1]
account = Account.create()
with coordinator_client(url, account, 30) as client:  # reads on a session token, writes signed
    batches = client.get("/v1/batches")
    files = client.get("/v1/files")
with httpx.Client(base_url=url, auth=WalletSigner(account), timeout=30) as signed:  # every request signed
    signed_read = signed.get("/v1/files")
    request = next(WalletSigner(account).auth_flow(signed.build_request("GET", "/v1/files")))
    request.headers["Authorization"] = request.headers["Authorization"][:-4] + "0000"
with httpx.Client(base_url=url, timeout=30) as plain:
    tampered = plain.send(request)
print(json.dumps({
    "python": list(sys.version_info[:2]),
    "statuses": [batches.status_code, files.status_code, signed_read.status_code],
    "objects": [batches.json()["object"], files.json()["object"]],
    "tampered": [tampered.status_code, tampered.json()["error"]["type"]],
    "heavy": [n for n in ("web3", "torch", "fastapi", "transformers") if importlib.util.find_spec(n)],
}))
"""


def newer_python() -> str | None:
    """A Python 3.13 or 3.12 interpreter that runs: on PATH, or one pyenv installed."""
    for version in NEWER_PYTHONS:
        candidates = [shutil.which(f"python{version}")]
        if shutil.which("pyenv"):
            latest = subprocess.run(["pyenv", "latest", version], capture_output=True, text=True)
            prefix = subprocess.run(
                ["pyenv", "prefix", latest.stdout.strip()], capture_output=True, text=True
            )
            if latest.returncode == 0 and prefix.returncode == 0:
                candidates.append(f"{prefix.stdout.strip()}/bin/python{version}")
        for candidate in filter(None, candidates):
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True
            )
            if probe.returncode == 0:
                return candidate
    return None


@pytest.fixture(scope="module")
def slim_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a fresh environment on a newer interpreter with the package installed, extras none."""
    interpreter = newer_python()
    if interpreter is None:
        pytest.skip(f"no Python {' or '.join(NEWER_PYTHONS)} here to install the slim client on")
    work = tmp_path_factory.mktemp("slim")
    source = work / "source"  # a copy, so that building the wheel leaves the checkout as it was
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "--quiet", "--python", interpreter, str(work / "venv")], check=True)
    python = work / "venv" / "bin" / "python"
    subprocess.run([*uv, "pip", "install", "--quiet", "--python", str(python), str(source)], check=True)
    return python


def test_the_slim_client_signs_requests_the_coordinator_accepts(
    slim_python: Path, chainless_api: ApiServer
) -> None:
    answer = subprocess.run(
        [str(slim_python), "-c", SIGNING_SCRIPT, chainless_api.url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout)
    assert tuple(report["python"]) >= (3, 12)
    assert report["statuses"] == [200, 200, 200]
    assert report["objects"] == ["list", "list"]
    assert report["tampered"] == [401, "authentication_error"]
    assert report["heavy"] == [], "the slim install pulled in the market's dependencies"


@pytest.mark.parametrize("command", ["market", "miner", "coordinator", "arbitration"])
def test_the_slim_install_s_commands_say_what_to_install(slim_python: Path, command: str) -> None:
    answer = subprocess.run([str(slim_python.parent / command), "--help"], capture_output=True, text=True)
    assert answer.returncode == 1
    assert answer.stdout == ""
    [line] = answer.stderr.splitlines()
    assert line.startswith(f"{command}: this install is the signing client alone (")
    assert line.endswith("is missing): pip install 'batchmarket[full]'")
