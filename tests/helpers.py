"""Small on-chain setup steps shared by the integration tests (real anvil, real contracts)."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import MinerProfile
from client_sdk.encoding import model_id, short_string
from demo.lifecycle import MODEL, DemoConfig, create_task

UNIT = 10**6


def profile_for(miner: LocalAccount, models: tuple[str, ...] = (MODEL,)) -> MinerProfile:
    return MinerProfile(
        signer=miner.address,
        gpu_class=short_string("A100-80GB"),
        vram_gb=80,
        gpu_count=1,
        region=short_string("us-east-1"),
        price_floor=0,
        endpoint="tcp://127.0.0.1:5555",
        model_ids=tuple(model_id(m) for m in models),
    )


def register_miner(admin: Market, miner: LocalAccount, stake: int) -> Market:
    """Mints `stake` to `miner`, approves and registers it through the SDK; returns the miner's market."""
    admin.token.mint(miner.address, stake)
    mine = admin.as_account(miner)
    mine.token.approve(mine.registry.address, stake)
    mine.registry.register(profile_for(miner), stake)
    return mine


def assigned_task(
    admin: Market, coordinator: LocalAccount, user: LocalAccount, miners: list[LocalAccount]
) -> int:
    """A task created by `user` with the demo parameters, assigned to `miners` (each staking 200)."""
    config = DemoConfig()
    for miner in miners:
        register_miner(admin, miner, config.miner_stake)
    admin.token.mint(user.address, config.max_price)
    task_id = create_task(admin.as_account(user), config)
    admin.as_account(coordinator).tasks.assign_task(task_id, [m.address for m in miners], config.stake_lock)
    return task_id
