"""What an openai-python user meets first: `client.models.list()` names the served models (with the hash of
their weights, a task's on-chain model id), and a client holding only an API key gets a 401 that says this
coordinator takes wallet signatures, not API keys."""

from __future__ import annotations

import openai
import pytest

from coordinator.config import ServedModel
from tests.coordinator.conftest import MODEL_NAME, ApiServer


def test_models_list_names_the_served_models_with_their_hashes(
    api: ApiServer, served_model: ServedModel
) -> None:
    client = openai.OpenAI(base_url=f"{api.url}/v1", api_key="unused")
    models = client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in models.data] == [(MODEL_NAME, "model", "batchmarket")]
    assert models.data[0].model_extra == {"model_hash": "0x" + served_model.model_hash.hex()}


def test_an_api_key_is_told_to_sign_with_a_wallet(api: ApiServer) -> None:
    client = openai.OpenAI(base_url=f"{api.url}/v1", api_key="sk-proj-0123456789abcdef", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        client.batches.list()
    assert refused.value.status_code == 401
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "invalid_session"
    assert "takes no API keys" in error["message"] and "WalletSigner" in error["message"]
