"""Every external function of the contracts that can change state emits an event: in its own body, through the
internal functions it calls (in its file or the sources it imports: a contract's parts), through a call to one
of our other contracts (each checked here), or through an OpenZeppelin internal that emits (`_pause`,
`_grantRole`, `_mint`, ...). A setter added without an event fails here; the Foundry tests check the events'
arguments (contracts/test/ArbitrationEvents.t.sol for arbitration's)."""

from __future__ import annotations

import re
from pathlib import Path

SOURCES = Path(__file__).resolve().parent.parent / "contracts" / "src"
FUNCTION = re.compile(r"function\s+(\w+)\s*\(([^)]*)\)([^{;]*)([{;])")
CALL = re.compile(r"\b(_\w+)\s*\(")
# OpenZeppelin internals that emit their own events.
EMITTING_LIBRARY_INTERNALS = {"_pause", "_unpause", "_grantRole", "_revokeRole", "_mint", "_transfer"}
# A call to one of our other contracts; it emits when the function it calls changes state (each checked here).
OUR_CONTRACT_CALL = re.compile(r"\b(?:escrow|gpuRegistry|verifiers|taskRegistry)\.(\w+)\s*\(")


IMPORT = re.compile(r'^import\s+\{[^}]*\}\s+from\s+"(\.[^"]+)";', re.MULTILINE)


def bodies(path: Path) -> dict[str, tuple[str, str]]:
    """The functions of one source file that have a body: name -> (what follows the parameters, body)."""
    text = path.read_text()
    found = {}
    for match in FUNCTION.finditer(text):
        if match.group(4) == ";":
            continue
        start = match.end()
        depth, end = 1, start
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        found[match.group(1)] = (match.group(3), text[start:end])
    return found


def visible(path: Path) -> list[Path]:
    """`path` and every source it imports, directly or not (our own sources only: relative imports)."""
    seen = [path]
    for current in seen:
        for target in IMPORT.findall(current.read_text()):
            resolved = (current.parent / target).resolve()
            if resolved not in seen:
                seen.append(resolved)
    return seen


def changes_state(signature: str) -> bool:
    return bool(re.search(r"\b(external|public)\b", signature)) and not re.search(
        r"\b(view|pure)\b", signature
    )


STATE_CHANGING = {
    name
    for path in SOURCES.rglob("*.sol")
    for name, (signature, _) in bodies(path).items()
    if changes_state(signature)
}


def emits(internals: dict[str, str], body: str, seen: set[str]) -> bool:
    """Whether running `body` emits an event, following the internal functions it calls."""
    if "emit " in body or STATE_CHANGING.intersection(OUR_CONTRACT_CALL.findall(body)):
        return True
    for callee in CALL.findall(body):
        if callee in EMITTING_LIBRARY_INTERNALS:
            return True
        if callee in seen or callee not in internals:
            continue
        seen.add(callee)
        if emits(internals, internals[callee], seen):
            return True
    return False


def test_every_state_changing_external_function_emits_an_event() -> None:
    checked, silent = 0, []
    for path in sorted(SOURCES.rglob("*.sol")):
        # The internals this file can call: its own and those of the parts it builds on.
        internals = {
            name: body
            for source in reversed(visible(path))
            for name, (_, body) in bodies(source).items()
            if name.startswith("_")
        }
        for name, (signature, body) in bodies(path).items():
            if not changes_state(signature):
                continue
            checked += 1
            if not emits(internals, body, set()):
                silent.append(f"{path.stem}.{name}")
    assert checked >= 40
    assert silent == []


def test_the_check_sees_a_silent_setter() -> None:
    """The check itself: a body that only writes storage or reads another contract is silent; one that calls
    an emitting internal, or a state-changing function of another contract, is not."""
    internals = {"_set": "value = v; emit Changed(v);", "_quiet": "value = v;"}
    assert not emits(internals, "value = v;", set())
    assert not emits(internals, "_quiet(v);", set())
    assert not emits(internals, "value = taskRegistry.getTask(id).owner;", set())
    assert emits(internals, "_quiet(v); _set(v);", set())
    assert emits(internals, "escrow.fundAuditPool(msg.sender, amount);", set())
