"""Backoff with full jitter, Retry-After, explorer links: pure rules."""

from __future__ import annotations

from email.utils import formatdate

from agent_payment_gateway import explorer_url
from agent_payment_gateway.retry import RetryOptions, backoff_delay, parse_retry_after

OPTIONS = RetryOptions(max_retries=3, base_delay=0.5, max_delay=20.0)


def test_full_jitter_stays_below_a_doubling_ceiling_capped_by_the_maximum() -> None:
    assert backoff_delay(0, OPTIONS, uniform=0.999) < 0.5
    assert backoff_delay(3, OPTIONS, uniform=0.999) < 4.0
    assert backoff_delay(3, OPTIONS, uniform=0.999) > 3.9
    assert backoff_delay(40, OPTIONS, uniform=0.999) <= 20.0
    assert backoff_delay(5, OPTIONS, uniform=0.0) == 0.0


def test_the_servers_retry_after_is_honoured_up_to_the_maximum() -> None:
    assert backoff_delay(0, OPTIONS, retry_after=3.0) == 3.0
    assert backoff_delay(0, OPTIONS, retry_after=300.0) == 20.0
    assert backoff_delay(0, OPTIONS, retry_after=-1.0) == 0.0


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = 1_700_000_000.0
    later = parse_retry_after(formatdate(now + 30, usegmt=True), now=now)
    assert later is not None
    assert 29.0 <= later <= 31.0
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0


def test_explorer_links_name_the_cluster() -> None:
    assert explorer_url("abc", "solana-mainnet") == "https://explorer.solana.com/tx/abc"
    assert explorer_url("abc", "solana-devnet") == "https://explorer.solana.com/tx/abc?cluster=devnet"
    assert explorer_url("abc", "solana-localnet", "http://127.0.0.1:8899") == (
        "https://explorer.solana.com/tx/abc?cluster=custom&customUrl=http%3A%2F%2F127.0.0.1%3A8899"
    )
    assert explorer_url("abc", None) == "https://explorer.solana.com/tx/abc?cluster=custom"
