"""The client's copy of the gateway's error codes is the registry the running gateway was built
from (api/shared/errors.ts ``ERROR_CODES``, sent by the system fixture), in its order."""

from __future__ import annotations

from agent_payment_gateway import CLIENT_ERROR_CODES, GATEWAY_ERROR_CODES

from .support.system import Ready


def test_the_clients_gateway_codes_are_exactly_the_registrys(ready: Ready) -> None:
    assert list(GATEWAY_ERROR_CODES) == ready.error_codes


def test_the_clients_own_codes_shadow_no_registry_code(ready: Ready) -> None:
    assert not set(CLIENT_ERROR_CODES) & set(ready.error_codes)
