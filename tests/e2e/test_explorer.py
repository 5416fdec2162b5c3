"""The market explorer in a real headless browser (Debian's Chromium, driven by Playwright) over a running
local market: two miners forming one 2-stage pipeline and one verifier. The tests run in file order on one
system: a batch is watched from its page while it is served (its figures change without a reload), the market
page shows the models, miners, plan and throughput, the task page the task as the chain records it, and a
dispute of one of its lines is followed round by round to its outcome; then hostile visitors and a hostile
miner get nothing out of it. Every figure is compared with what the API or the chain says; no page logs an
error in the browser's console. Each page's screenshot is written to docs/explorer/ (the README shows
them)."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright
from typer.testing import CliRunner

from client_sdk.chain.anvil import dev_accounts
from client_sdk.chain.types import DisputeStatus, MinerProfile, Vote
from client_sdk.cli.arbitration import app as arbitration_app
from client_sdk.client import Batch
from client_sdk.encoding import short_string
from client_sdk.protocol.model_identity import served_model_hash
from client_sdk.units import format_amount
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.transport.security import LinkKeys
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip("no Chromium binary (as root: apt-get install -y chromium)", allow_module_level=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "explorer"
CONFIG = SystemConfig(miners=2, stages=2, verifiers=1, work_unit_size=2)
LINES = 8
HOSTILE = dev_accounts()[7]  # neither a party of the market nor one of its miners
HOSTILE_REGION = "<script>window.owned=1</script>"
HOSTILE_ENDPOINT = 'tcp://x"><img src=x onerror="window.owned=2">:1'


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    with LocalSystem(tmp_path_factory.mktemp("explorer"), CONFIG) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab; the test fails if anything on it logs an error to the console or throws."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda message: _record(errors, message))
    tab.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    yield tab
    context.close()
    assert errors == []


def _record(errors: list[str], message: ConsoleMessage) -> None:
    if message.type in ("error", "warning"):
        errors.append(f"console {message.type}: {message.text}")


def figure(tab: Page, key: str) -> str:
    """The text the page shows for figure `key` (an HTML element's, or an SVG label's)."""
    return tab.locator(f'[data-live="{key}"]').text_content() or ""


def title(tab: Page, key: str) -> str | None:
    return tab.locator(f'[data-live="{key}"]').get_attribute("title")


def shows(tab: Page, key: str, text: str, timeout: float = 30) -> None:
    """Until the page itself (its script, no reload) shows `text` for figure `key`."""
    wait_for(lambda: figure(tab, key) == text, timeout=timeout, poll=0.2)


def reloaded_until(tab: Page, key: str) -> None:
    """Reloads the page until it has figure `key`: new rows (a miner, a juror) come with the page, and its
    reads are a few seconds old at most."""

    def listed() -> bool:
        tab.reload()
        return tab.locator(f'[data-live="{key}"]').count() == 1

    wait_for(listed, timeout=30, poll=1)


def screenshot(tab: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def tokens(system: LocalSystem, base_units: int) -> str:
    return f"{format_amount(base_units)} {system.market.token.symbol}"


@dataclass
class Watched:
    batch: Batch | None = None


WATCHED = Watched()  # the batch the tests follow, served in the first


def test_the_batch_page_follows_the_batch_while_it_is_served(system: LocalSystem, page: Page) -> None:
    client = system.client()
    lines = [chat_line(f"watch-{i}", f"count from {i} to {i + 3}", max_tokens=12) for i in range(LINES)]
    file = client.files.create(file=jsonl(lines), purpose="batch")
    created = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=UNIT)
    page.goto(f"{system.api_url}/explorer/batches/{created.id}")
    seen = {figure(page, "batch.completed")}

    def completed() -> bool:
        seen.add(figure(page, "batch.completed"))
        return figure(page, "batch.status") == "completed"

    wait_for(completed, timeout=240, poll=0.2)
    done = client.batches.retrieve(created.id)
    WATCHED.batch = done
    assert done.status == "completed"
    assert len(seen) >= 2, f"the page never changed its figures while the batch ran: {seen}"
    shows(page, "batch.completed", str(done.request_counts.completed))
    assert done.usage is not None
    for key, expected in (
        ("batch.total", LINES),
        ("batch.failed", done.request_counts.failed),
        ("batch.input_tokens", done.usage.input_tokens),
        ("batch.output_tokens", done.usage.output_tokens),
        ("batch.task", done.task_id),
        ("batch.miners", len(system.miner_accounts)),
        ("batch.signed", len(system.miner_accounts)),
        ("batch.units.done", LINES // CONFIG.work_unit_size),
    ):
        assert figure(page, key) == f"{expected:,}", key
    assert figure(page, "batch.progress") == "100%"
    assert title(page, "batch.results_root") == done.results_root
    assert title(page, "batch.commit_tx") == (done.model_extra or {})["commit_tx"]
    assert page.locator('[data-live="batch.task"]').get_attribute("href") == f"/explorer/tasks/{done.task_id}"
    screenshot(page, "batch")


def test_the_market_page_shows_models_miners_plan_and_throughput(system: LocalSystem, page: Page) -> None:
    batch = WATCHED.batch
    assert batch is not None
    page.goto(f"{system.api_url}/explorer")
    models = httpx.get(f"{system.api_url}/v1/models").json()["data"]
    for model in models:
        row = page.locator("tr", has_text=model["id"])
        assert row.locator("code").get_attribute("title") == model["model_hash"]
    market = system.market
    for miner in system.miner_accounts:
        key = f"miner.{miner.address}"
        stake = market.registry.stake_of(miner.address)
        assert title(page, f"{key}.address") == miner.address
        assert figure(page, f"{key}.stake") == tokens(system, stake.total)
        assert figure(page, f"{key}.free") == tokens(system, stake.free)
        assert figure(page, f"{key}.state") == "serving"
        assignment = system.client(miner).request("GET", "/v1/miners/assignment").json()
        label = figure(page, f"pipeline.{assignment['pipeline_id']}.{miner.address}")
        assert label.endswith(f" L{assignment['start']}-{assignment['end'] - 1}")
    assert page.locator("tr.region").inner_text().startswith(f"region {CONFIG.region} · 2 miners")
    assert figure(page, "miners.live") == figure(page, "miners.serving") == "2"
    assert batch.usage is not None
    assert figure(page, "throughput.span") == f"{batch.usage.output_tokens:,}"
    assert figure(page, "batches.completed") == "1"
    assert figure(page, "chain.tasks") == str(market.tasks.task_count())
    assert (
        figure(page, f"task.{batch.task_id}.status")
        == market.tasks.get_task(batch.task_id).status.name.lower()
    )
    screenshot(page, "market")


def test_the_task_page_shows_the_task_as_the_chain_records_it(system: LocalSystem, page: Page) -> None:
    batch = WATCHED.batch
    assert batch is not None
    tasks, task_id = system.market.tasks, batch.task_id
    page.goto(f"{system.api_url}/explorer/tasks/{task_id}")
    task = tasks.get_task(task_id)
    assert figure(page, "task.status") == task.status.name.lower()
    assert title(page, "task.owner") == system.user.address
    assert figure(page, "task.model") == CONFIG.model
    for key, amount in (
        ("task.max_price", task.max_price),
        ("task.escrow", system.market.escrow.escrow_of(task_id)),
        ("task.payment", task.payment),
        ("task.fee", task.fee),
        ("task.stake_lock", task.stake_lock),
    ):
        assert figure(page, key) == tokens(system, amount), key
    assert figure(page, "task.input_tokens") == f"{task.input_tokens:,}"
    assert figure(page, "task.output_tokens") == f"{task.output_tokens:,}"
    assert title(page, "task.results_root") == "0x" + task.results_root.hex() == batch.results_root
    mask, signers = tasks.signed_mask_of(task_id), tasks.signers_of(task_id)
    for index, miner in enumerate(tasks.miners_of(task_id)):
        assert figure(page, f"task.miner.{miner}.signed") == ("signed" if mask >> index & 1 else "not signed")
        assert title(page, f"task.miner.{miner}.signer") == signers[index]
    screenshot(page, "task")


def test_a_dispute_is_followed_round_by_round_to_its_outcome(system: LocalSystem, page: Page) -> None:
    batch = WATCHED.batch
    assert batch is not None
    env = system.environment(system.user) | {"BATCHMARKET_COORDINATOR_URL": system.api_url}
    args = ["dispute", "open", "--batch", batch.id, "--custom-id", "watch-1", "--json"]
    opened = CliRunner().invoke(arbitration_app, args, env=env)
    assert opened.exit_code == 0, opened.output
    dispute_id = int(json.loads(opened.stdout)["dispute"])
    page.goto(f"{system.api_url}/explorer/disputes/{dispute_id}")
    assert figure(page, "dispute.status") == "open"
    assert figure(page, "dispute.task") == str(batch.task_id)
    assert figure(page, "dispute.line") == "1"
    arbitration, market = system.market.arbitration, system.market
    record = arbitration.get_dispute(dispute_id)
    assert figure(page, "dispute.bond") == tokens(system, record.bond)
    # the verifier draws, commits, reveals and resolves; the test moves the clock from phase to phase
    wait_for(lambda: arbitration.round_of(dispute_id, 0).drawn, timeout=120)
    drawn = arbitration.round_of(dispute_id, 0)
    jurors = arbitration.jurors_of(dispute_id, 0)
    committed = lambda: all(any(arbitration.juror_of(dispute_id, 0, j).commitment) for j in jurors)  # noqa: E731
    wait_for(committed, timeout=120)
    reloaded_until(page, f"round.0.juror.{jurors[0]}.address")  # rows come with the page, figures live
    shows(page, "round.0.commits", f"{len(jurors)} of {len(jurors)}")
    system.advance_chain_time(drawn.commit_deadline - market.chain_time() + 1)
    revealed = lambda: all(arbitration.juror_of(dispute_id, 0, j).vote != Vote.NONE for j in jurors)  # noqa: E731
    wait_for(revealed, timeout=120)
    system.advance_chain_time(drawn.appeal_deadline - market.chain_time() + 1)
    wait_for(lambda: arbitration.get_dispute(dispute_id).status != DisputeStatus.OPEN, timeout=120)
    shows(page, "dispute.phase", "resolved")
    resolved = arbitration.get_dispute(dispute_id)
    assert resolved.status == DisputeStatus.MINERS_CORRECT
    assert figure(page, "dispute.status").startswith("miners correct")
    final = arbitration.round_of(dispute_id, 0)
    assert figure(page, "round.0.seats") == f"{final.seats_drawn} of {final.seats}"
    assert figure(page, "round.0.correct") == str(final.votes_correct) == str(final.seats_drawn)
    assert figure(page, "round.0.at_fault") == "0"
    assert figure(page, "round.0.reveals") == f"{len(jurors)} of {len(jurors)}"
    for juror in jurors:
        key = f"round.0.juror.{juror}"
        assert title(page, f"{key}.address") == juror
        assert figure(page, f"{key}.seats") == str(arbitration.juror_of(dispute_id, 0, juror).seats)
        assert figure(page, f"{key}.vote") == "miners correct"
    # an honest line: the bond pays the jurors their share and the miners the rest; nothing is slashed
    reward = record.bond * record.terms.reward_bps // 10_000
    assert figure(page, "money.juror_rewards") == tokens(system, reward)
    assert figure(page, "money.slashed") == figure(page, "money.penalties") == tokens(system, 0)
    accountable = arbitration.pipeline_of(dispute_id)
    assert [title(page, f"dispute.pipeline.{i}") for i in range(len(accountable))] == accountable
    screenshot(page, "dispute")

    page.goto(f"{system.api_url}/explorer/disputes")
    assert figure(page, f"dispute.{dispute_id}.status") == "miners_correct"
    assert figure(page, f"dispute.{dispute_id}.bond") == tokens(system, record.bond)
    verifier = system.verifier_accounts[0].address
    staked = market.verifiers.verifier_of(verifier)
    seat = market.verifiers.min_stake()
    assert figure(page, f"verifier.{verifier}.stake") == tokens(system, staked.stake)
    assert figure(page, f"verifier.{verifier}.seats") == f"{staked.locked // seat} of {staked.stake // seat}"
    assert figure(page, f"verifier.{verifier}.models") == CONFIG.model
    screenshot(page, "disputes")


def test_hostile_visitors_get_no_content_no_write_and_clear_404s(system: LocalSystem) -> None:
    batch = WATCHED.batch
    assert batch is not None
    base = system.api_url
    for path in (
        "/explorer/tasks/" + "9" * 40,  # an enormous id: no chain call, no error
        "/explorer/tasks/99999",  # past the chain's count
        "/explorer/tasks/0",
        "/explorer/tasks/-1",
        "/explorer/disputes/1e3",
        "/explorer/batches/%3Cscript%3E",
        "/explorer/batches/batch_" + "f" * 24,
        "/explorer/no-such-page",
    ):
        answer = httpx.get(base + path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("text/html")
        assert "<script>" not in answer.text.replace(
            '<script src="/explorer/static/live.js" defer></script>', ""
        )
    assert httpx.get(f"{base}/explorer/api/tasks/99999").json()["error"]["code"] == "not_found"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/explorer", f"/explorer/batches/{batch.id}", "/explorer/api/market"):
            assert httpx.request(method, base + path).status_code == 405, (method, path)
    pages = [
        f"/explorer/batches/{batch.id}",
        f"/explorer/api/batches/{batch.id}",
        "/explorer",
        "/explorer/api/market",
    ]
    results = system.client().batches.results(batch.id)
    outputs = [
        str(line.line["response"]["body"]["choices"][0]["message"]["content"]) for line in results.output
    ]
    secrets = [line.line["custom_id"] for line in results.output] + ["count from", batch.input_file_id]
    secrets += [batch.output_file_id or "file-"] + [html.escape(o) for o in outputs if len(o) >= 12]
    for path in pages:
        answer = httpx.get(base + path)
        assert answer.status_code == 200
        assert answer.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")
        assert answer.headers["x-frame-options"] == "DENY"
        leaked = [s for s in secrets if s and s in answer.text]
        assert leaked == [], path
    assert httpx.get(f"{base}/v1/batches/{batch.id}").status_code == 401  # the content stays the owner's


def test_a_hostile_miner_s_region_and_endpoint_render_as_text(system: LocalSystem, page: Page) -> None:
    joined = join_hostile(system, HOSTILE)
    assert joined.status_code == 200, joined.text
    key = f"miner.{HOSTILE.address}"
    page.goto(f"{system.api_url}/explorer")
    reloaded_until(page, f"{key}.endpoint")
    assert figure(page, f"{key}.endpoint") == HOSTILE_ENDPOINT
    header = page.locator("tr.region", has_text=HOSTILE_REGION)  # the region the miner joined with, as text
    assert header.inner_text().startswith(f"region {HOSTILE_REGION} · 1 miner")
    assert page.evaluate("window.owned") is None
    assert page.locator("main script, main img").count() == 0


def join_hostile(system: LocalSystem, account: LocalAccount) -> httpx.Response:
    """`account` registers on-chain with an endpoint made to break out of HTML and joins the coordinator
    naming a script as its region: both are the miner's own words, which the explorer shows."""
    config = system.config
    market = system.market
    market.token.mint(account.address, config.miner_stake)
    as_miner = market.as_account(account)
    as_miner.token.approve(as_miner.registry.address, config.miner_stake)
    profile = MinerProfile(
        signer=account.address,
        gpu_class=short_string("cpu"),
        vram_gb=1,
        gpu_count=1,
        region=short_string("hostile"),
        price_floor=0,
        endpoint=HOSTILE_ENDPOINT,
        model_ids=(served_model_hash(system.model_dir),),
    )
    as_miner.registry.register(profile, config.miner_stake)
    device = {"gpu": "cpu", "memory_gb": 1, "tflops": 1, "mem_bandwidth_gb_s": 1, "layer_latency_ms": 1}
    body = {
        "model": config.model,
        "endpoint": HOSTILE_ENDPOINT,
        "link_key": LinkKeys.generate().public.decode(),
        "region": HOSTILE_REGION,
        "device": device,
    }
    return system.client(account).http.post("/v1/miners/join", json=body)
