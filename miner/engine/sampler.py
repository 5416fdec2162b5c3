"""Next-token choice on the last stage: greedy, or Gumbel-max over the top-p set with seed-synchronized noise.

A sampled token is argmax over the top-p set of logits / temperature + g, where g (miner/engine/gumbel.py,
docs/sampling.md) depends only on the request's seed, the token's absolute position p (prompt and output
counted) and the token id: not on what the request is batched with, how the model is split into stages, or
how many tokens this process sampled for it before. So a request resumed at position p (re-prefilled elsewhere
from its token ids) samples what it would have sampled uninterrupted, and a verifier holding the reference
logits knows which token an honest miner drew.
"""

from __future__ import annotations

import torch

from client_sdk.protocol.sampling import SamplingParams
from miner.engine import gumbel

TOP_P_SEARCH = 256  # tokens searched for the top-p prefix before a row is sorted whole


def sample(logits: torch.Tensor, params: list[SamplingParams], positions: list[int]) -> list[int]:
    """One token per row of `logits` [sequences, vocab]; row i uses `params[i]` and is the token at absolute
    position `positions[i]` of its request."""
    tokens = [0] * len(params)
    greedy = [i for i, p in enumerate(params) if p.temperature == 0]
    sampled = [i for i, p in enumerate(params) if p.temperature != 0]
    if greedy:  # one argmax over all greedy rows (the first maximum, as per row)
        chosen = logits[row_index(greedy, len(params), logits.device)].argmax(-1)
        for i, token in zip(greedy, chosen.tolist(), strict=True):
            tokens[i] = token
    if sampled:
        chosen_params = [params[i] for i in sampled]
        scaled = scale(logits[row_index(sampled, len(params), logits.device)], chosen_params)
        chosen, _ = draw(scaled, chosen_params, draw_keys(chosen_params, [positions[i] for i in sampled]))
        for i, token in zip(sampled, chosen.tolist(), strict=True):
            tokens[i] = token
    return tokens


def draw(
    scaled: torch.Tensor, params: list[SamplingParams], keys: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampled rows' tokens [rows] and their perturbed scores [rows], from logits / temperature (`scale`) and
    the rows' draw keys (`draw_keys`): the argmax of scaled + g over each row's top-p set."""
    return gumbel.gumbel_max(scaled, keys, top_p_sets(scaled, [p.top_p for p in params]))


def draw_keys(params: list[SamplingParams], positions: list[int]) -> list[int]:
    """The noise key of each row's draw: its request's seed and the token's absolute position."""
    return [gumbel.row_key(p.seed, position) for p, position in zip(params, positions, strict=True)]


def scale(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """float32 logits / temperature per row."""
    return logits.float() / torch.tensor([p.temperature for p in params], device=logits.device)[:, None]


def top_p_sets(scaled: torch.Tensor, top_p: list[float]) -> torch.Tensor | None:
    """[rows, vocab] bool, from scaled logits: the smallest prefix of each row sorted by probability whose
    mass reaches the row's top_p (the token that crosses it included), and every token where top_p is 1 or
    more; None when every row's is.

    The prefix is found among each row's TOP_P_SEARCH most likely tokens (a partial sort) and by a full sort
    only in rows where those do not reach top_p: sorting whole rows of a large vocabulary costs more than the
    rest of the draw."""
    if all(p >= 1 for p in top_p):
        return None
    sets = torch.ones(scaled.shape, dtype=torch.bool, device=scaled.device)
    rows = [i for i, p in enumerate(top_p) if p < 1]
    limit = torch.tensor([top_p[i] for i in rows], device=scaled.device)[:, None]
    probs = scaled[rows].softmax(-1)
    found = _prefixes(*probs.topk(min(TOP_P_SEARCH, probs.shape[-1]), dim=-1), limit, probs.shape[-1])
    unreached = (~found.any(-1)).nonzero()[:, 0]
    if len(unreached):
        found[unreached] = _prefixes(*probs[unreached].sort(dim=-1, descending=True), limit[unreached])
    sets[rows] = found
    return sets


def _prefixes(
    sorted_probs: torch.Tensor, order: torch.Tensor, limit: torch.Tensor, vocab: int | None = None
) -> torch.Tensor:
    """[rows, vocab] bool: each row's tokens, listed in `order` (sorted by probability), whose mass before
    them is below `limit`. Given a leading part of the sort (`vocab` set), a row whose listed tokens do not
    reach its limit gets no token: its prefix is longer than the part."""
    mass = sorted_probs.cumsum(-1)
    keep = mass - sorted_probs < limit
    if vocab is not None:
        keep &= mass[:, -1:] >= limit
    shape = (len(order), vocab or order.shape[-1])
    return torch.zeros(shape, dtype=torch.bool, device=order.device).scatter(-1, order, keep)


def row_index(rows: list[int], count: int, device: torch.device) -> slice | torch.Tensor:
    """An index of `rows` among `count`: every row as a slice (no copy), else a tensor on `device` (a
    Python list as an index is converted on the CPU each time it is used)."""
    return slice(None) if len(rows) == count else torch.tensor(rows, dtype=torch.long, device=device)
