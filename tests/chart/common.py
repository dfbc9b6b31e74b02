"""Paths, names and the check bookkeeping shared by the chart tests."""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "egress-proxy-operator"
RELEASE = "egress-proxy-operator"
NAMESPACE = "egress-proxy-system"

RESULTS = {"passed": 0, "failed": 0}


class CheckFailed(AssertionError):
    pass


def expect(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def fails(fn: Callable[[], object], error: type[BaseException], what: str) -> None:
    try:
        fn()
    except error:
        return
    raise CheckFailed(f"accepted, should be refused: {what}")


def check(name: str, fn: Callable[[], object]) -> bool:
    started = time.monotonic()
    try:
        fn()
    except Exception as e:  # every failure is reported, then counted
        RESULTS["failed"] += 1
        print(f"FAIL {name}: {e}")
        if not isinstance(e, CheckFailed):
            traceback.print_exc()
        return False
    RESULTS["passed"] += 1
    print(f"ok   {name} ({time.monotonic() - started:.1f} s)")
    return True


def wait_for(what: str, fn: Callable[[], object], timeout: float = 60.0) -> object:
    """Polls fn until it returns something truthy; fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)
