"""core/admission.py: beyond max_in_flight a model request is refused at once, with a 529."""

from __future__ import annotations

from ezat_edge.core.admission import OVERLOAD_RETRY_AFTER, Admission, overloaded


def test_admits_up_to_the_limit_then_refuses_without_counting() -> None:
    gate = Admission(max_in_flight=2)
    assert gate.admit() and gate.admit()
    assert not gate.admit()
    assert gate.in_flight == 2
    gate.release()
    assert gate.admit() and gate.in_flight == 2


def test_overloaded_is_a_529_with_retry_after() -> None:
    err = overloaded()
    assert (err.status, err.retry_after) == (529, OVERLOAD_RETRY_AFTER)
    assert err.message == "the gateway is overloaded; retry shortly"
