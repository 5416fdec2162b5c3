"""Chooses what the next forward pass computes: continuous batching with chunked prefill.

Decoding sequences get one token each; the rest of the token budget goes to prefill chunks, first of running
sequences, then of newly admitted ones, so a finished sequence's slot is refilled at once. When the page pool
cannot grow a decoding sequence, the newest running sequence is preempted: its pages are freed and it is
later re-prefilled from its token ids (prompt + output so far).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from miner.engine.sequence import Sequence
from miner.kv.blocks import BlockManager


@dataclass(frozen=True)
class ScheduledChunk:
    seq: Sequence
    tokens: list[int]  # new tokens fed this step
    context_len: int  # tokens already cached before them

    @property
    def completes_sequence_input(self) -> bool:
        """After this chunk the whole sequence is cached, so its last logits pick the next token."""
        return self.context_len + len(self.tokens) == len(self.seq.tokens)


class Scheduler:
    def __init__(self, blocks: BlockManager, max_seqs: int = 32, token_budget: int = 512) -> None:
        if max_seqs < 1 or token_budget < 1:
            raise ValueError("max_seqs and token_budget must be positive")
        self.blocks = blocks
        self.max_seqs = max_seqs
        self.token_budget = token_budget
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.preemptions = 0

    def add(self, seq: Sequence) -> None:
        capacity = self.blocks.num_pages * self.blocks.page_size
        if len(seq.prompt) + seq.params.max_tokens > capacity:
            raise ValueError(f"sequence {seq.seq_id} needs more KV space than the whole pool holds")
        self.waiting.append(seq)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def schedule(self) -> list[ScheduledChunk]:
        budget = self.token_budget
        chunks: list[ScheduledChunk] = []
        for seq in list(self.running):
            if seq not in self.running:  # preempted below to make room for an older sequence
                continue
            want = min(seq.num_uncached, budget)
            if want == 0:
                continue
            if not self._make_room(seq, want):
                continue
            chunks.append(self._chunk(seq, want))
            budget -= want
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            seq = self.waiting[0]
            want = min(seq.num_uncached, budget)
            if not self.blocks.can_hold(seq.seq_id, want):
                break
            self.waiting.popleft()
            self.running.append(seq)
            chunks.append(self._chunk(seq, want))
            budget -= want
        return chunks

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.release(seq.seq_id)

    def preempt_all(self) -> None:
        """Preempts every running sequence; they are re-prefilled in the order they were admitted."""
        for seq in reversed(self.running):
            self._preempt(seq)

    def _chunk(self, seq: Sequence, count: int) -> ScheduledChunk:
        start = seq.num_cached
        self.blocks.reserve(seq.seq_id, start + count)
        seq.num_cached += count
        return ScheduledChunk(seq, seq.tokens[start : start + count], start)

    def _make_room(self, seq: Sequence, want: int) -> bool:
        """Preempts running sequences newer than `seq` (not yet scheduled this step) until `seq` can grow by
        `want` tokens; if that is not enough, preempts `seq` itself and returns False."""
        while not self.blocks.can_hold(seq.seq_id, seq.num_cached + want):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.release(seq.seq_id)
        seq.num_cached = 0
        self.waiting.appendleft(seq)
        self.preemptions += 1
