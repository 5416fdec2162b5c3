"""The fault matrix's flooding first stage (miner.pipeline.flood): an armed flood adds requests a next stage
takes as real (they pass the wire's checks and hold its pages), once; the next stage frees them when no step
names them again, so the flood cannot wedge it."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

import pytest
import torch

from client_sdk.protocol.sampling import SamplingParams
from miner.pipeline import flood
from miner.pipeline.flood import FIRST_ID, Flood
from miner.pipeline.ledger import StageLedger
from miner.transport.frames import FrameError, Header, RequestSpec, decode, encode, message
from tests.miner.test_protocol import PAGE, Clock, introduce

HIDDEN = 8


def step(request_id: int, tokens: int) -> tuple[Header, torch.Tensor]:
    """A step feeding a new request's `tokens` prompt tokens, with its activations."""
    return message(
        "activations",
        request_ids=(request_id,),
        query_lens=(tokens,),
        token_ids=(1,) * tokens,
        sample=(True,),
        new_requests=(RequestSpec(request_id, tokens, SamplingParams(4)),),
        tensor=torch.ones(tokens, HIDDEN),
    )


def test_an_armed_flood_adds_its_requests_to_one_step_only() -> None:
    header, tensor = step(1, 3)
    attack = Flood(5)
    assert attack(header, tensor) == (header, tensor), "unarmed: the step as it was"
    attack.arm()
    flooded, activations = attack(header, tensor)
    assert flooded.request_ids == (1, *range(FIRST_ID, FIRST_ID + 5))
    assert flooded.sample == (True,) + (False,) * 5, "they never sample, so nothing comes back for them"
    assert [s.request_id for s in flooded.new_requests] == list(flooded.request_ids)
    assert activations.shape == (8, HIDDEN) and torch.equal(activations[:3], tensor)
    wired, wired_tensor = decode(encode(flooded, activations))  # the wire takes it as a real step
    assert wired == flooded and torch.equal(wired_tensor, activations)
    assert attack(header, tensor) == (header, tensor) and attack.bursts == 1


def test_a_next_stage_frees_a_flood_no_step_names_again() -> None:
    clock = Clock()
    ledger = StageLedger(1, 8, PAGE, reclaim_after_s=60.0, clock=clock)
    attack = Flood(7)
    attack.arm()
    flooded, _ = attack(*step(1, 4))
    assert len(ledger.apply(flooded)) == 8  # the whole pool: request 1 and 7 pages of flood
    with pytest.raises(FrameError, match="1 new requests: 8 of 8 are open already"):
        ledger.apply(introduce(2, 4))  # an honest head's request, while the flood holds every page
    clock.now = 61.0  # no step named the flood (nor request 1, whose head was the flooder) since
    (table,) = ledger.apply(introduce(3, 4))
    assert len(table) == 1, "a page the flood held, freed"
    assert ledger.reclaimed == 8 and sorted(ledger.records) == [3]


def test_the_switch_arms_a_flood_on_each_sigusr1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(flood.ENV, raising=False)
    assert flood.from_environment() is None
    monkeypatch.setenv(flood.ENV, "0")
    with pytest.raises(ValueError, match="BATCHMARKET_TEST_FLOOD must be a count from 1 to 4096, not 0"):
        flood.from_environment()
    monkeypatch.setenv(flood.ENV, "3")
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        attack = flood.from_environment()
        assert attack is not None and attack.count == 3
        os.kill(os.getpid(), signal.SIGUSR1)
        header, tensor = step(1, 2)
        assert len(attack(header, tensor)[0].request_ids) == 4
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_flood_past_the_bound_is_refused_whole_and_leaves_nothing_behind() -> None:
    ledger = StageLedger(1, 8, PAGE)
    ledger.apply(introduce(1, 4))
    attack = Flood(8)
    attack.arm()
    flooded, _ = attack(*step(2, 4))  # request 2 and 8 of flood: 10 open, over the pool's 8 pages
    with pytest.raises(FrameError, match="9 new requests: 1 of 8 are open already"):
        ledger.apply(flooded)
    assert sorted(ledger.records) == [1], "none of the refused step's requests stays open"
    (table,) = ledger.apply(introduce(3, 4))  # the next honest step fits at once
    assert len(table) == 1 and sorted(ledger.records) == [1, 3]


def test_a_flood_armed_in_a_session_that_ended_is_dropped() -> None:
    attack = Flood(2)
    header, tensor = step(1, 2)
    old, new = replace(header, epoch=(1, 5)), replace(header, epoch=(1, 6))
    attack(old, tensor)  # a step of session 5 went on
    attack.arm()
    assert attack(new, tensor) == (new, tensor), "the head restarted since: the burst is dropped"
    attack.arm()
    assert len(attack(new, tensor)[0].request_ids) == 3 and attack.bursts == 1
