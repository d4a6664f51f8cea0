"""Wrong secrets per address (finspace.wall.throttle): the bound, the window, other addresses, internal calls."""

from __future__ import annotations

import pytest

from finspace.errors import Busy
from finspace.settings import Limits
from finspace.wall.throttle import Throttle


def test_the_bound_holds_per_address_for_the_window_then_lifts():
    now = [1000.0]
    t = Throttle(Limits(token_failures=3, token_window_s=60.0), clock=lambda: now[0])
    for _ in range(3):
        t.check("1.2.3.4")
        t.failed("1.2.3.4")
    with pytest.raises(
        Busy,
        match=r"too many wrong admin tokens or API keys from this address \(3 in 60 s\); "
        r"wait 61 s",
    ) as info:
        t.check("1.2.3.4")
    assert info.value.retry_after_s == 61  # 60 s window from the first failure, rounded up
    t.check("5.6.7.8")  # another address is not affected
    t.check(None)  # an internal call never is
    now[0] += 61  # the first failure leaves the window
    t.check("1.2.3.4")
