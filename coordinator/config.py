"""Coordinator settings: one frozen object built from the environment (or by tests), passed to every part."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from client_sdk.errors import UserError
from client_sdk.protocol.constants import MAX_BATCH_LINES
from client_sdk.protocol.model_identity import served_model_hash

DEFAULT_DATABASE_URL = "sqlite:///coordinator.db"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class ServedModel:
    """A model the market serves: its name (as in request bodies) and a checkpoint directory whose
    config.json and tokenizer the coordinator reads to count prompt tokens."""

    name: str
    path: Path

    @property
    def model_hash(self) -> bytes:
        """The checkpoint's identity, the model id its tasks carry on-chain (hashed once per process)."""
        return served_model_hash(self.path)


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL
    models: tuple[ServedModel, ...] = ()
    max_file_bytes: int = 200 * 1024 * 1024  # OpenAI's batch input limit
    max_file_lines: int = MAX_BATCH_LINES
    # any request body but a file upload: a unit's results are the largest (64 lines of 8,192 output tokens
    # take at most about 16 MiB: 7 bytes an id, 24 bytes of text escaped at worst), and parsing 32 MiB of JSON
    # takes the event loop a fraction of a second
    max_json_bytes: int = 32 * 1024 * 1024
    max_completion_window_h: int = 168
    price_per_million_tokens: int = 20_000_000  # token base units (6 decimals): 20 tokens per million
    work_unit_size: int = 64  # requests per work unit: enough to keep a head's engine full between claims
    work_lease_s: int = 60  # a head that holds a unit longer without answering loses it to another pipeline
    heartbeat_ttl_s: int = 30  # a miner silent this long drops out of the live set
    # a live miner that has not signed a batch's results this long after it began finalizing is left out:
    # its lines are served again without it (a node signs within seconds of the request)
    signature_wait_s: int = 600
    rpc_url: str | None = None
    deployment_file: Path | None = None

    def model(self, name: str) -> ServedModel | None:
        return next((m for m in self.models if m.name == name), None)

    @property
    def offered(self) -> str:
        """The served models' names, for a message about one that is not served."""
        return ", ".join(m.name for m in self.models) or "none"

    @property
    def max_body_bytes(self) -> int:
        """The largest request body taken: a whole input file with room for its multipart framing."""
        return self.max_file_bytes + 64 * 1024

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """From the environment: BATCHMARKET_DATABASE_URL, BATCHMARKET_REDIS_URL, BATCHMARKET_MODELS (JSON
        {name: dir}), BATCHMARKET_MAX_FILE_BYTES, BATCHMARKET_MAX_FILE_LINES, BATCHMARKET_MAX_JSON_BYTES,
        BATCHMARKET_PRICE_PER_MILLION_TOKENS (base units), BATCHMARKET_WORK_UNIT_SIZE,
        BATCHMARKET_WORK_LEASE_S, BATCHMARKET_HEARTBEAT_TTL_S, BATCHMARKET_RPC_URL, BATCHMARKET_DEPLOYMENT."""
        env = dict(os.environ if env is None else env)
        deployment = env.get("BATCHMARKET_DEPLOYMENT")
        return cls(
            database_url=env.get("BATCHMARKET_DATABASE_URL", DEFAULT_DATABASE_URL),
            redis_url=env.get("BATCHMARKET_REDIS_URL", DEFAULT_REDIS_URL),
            models=parse_models(env.get("BATCHMARKET_MODELS", "{}")),
            max_file_bytes=_positive_int(env, "BATCHMARKET_MAX_FILE_BYTES", cls.max_file_bytes),
            max_file_lines=_positive_int(env, "BATCHMARKET_MAX_FILE_LINES", cls.max_file_lines),
            max_json_bytes=_positive_int(env, "BATCHMARKET_MAX_JSON_BYTES", cls.max_json_bytes),
            price_per_million_tokens=_positive_int(
                env, "BATCHMARKET_PRICE_PER_MILLION_TOKENS", cls.price_per_million_tokens
            ),
            work_unit_size=_positive_int(env, "BATCHMARKET_WORK_UNIT_SIZE", cls.work_unit_size),
            work_lease_s=_positive_int(env, "BATCHMARKET_WORK_LEASE_S", cls.work_lease_s),
            heartbeat_ttl_s=_positive_int(env, "BATCHMARKET_HEARTBEAT_TTL_S", cls.heartbeat_ttl_s),
            signature_wait_s=_positive_int(env, "BATCHMARKET_SIGNATURE_WAIT_S", cls.signature_wait_s),
            rpc_url=env.get("BATCHMARKET_RPC_URL"),
            deployment_file=Path(deployment) if deployment else None,
        )


def parse_models(text: str) -> tuple[ServedModel, ...]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"BATCHMARKET_MODELS is not JSON: {exc.msg}") from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise UserError('BATCHMARKET_MODELS must be a JSON object {"model name": "checkpoint dir"}')
    models = []
    for name, directory in raw.items():
        path = Path(directory)
        if not (path / "config.json").is_file():
            raise UserError(f"model {name!r}: {path} has no config.json")
        models.append(ServedModel(name, path))
    return tuple(models)


def _positive_int(env: dict[str, str], key: str, default: int) -> int:
    value = env.get(key)
    if value is None:
        return default
    if not value.isdigit() or int(value) <= 0:
        raise UserError(f"{key} must be a positive integer, not {value!r}")
    return int(value)
