"""Gate 4's comparison with a prequantized source's library rule (docs/acceptance.md §Prequantized sources):
values rounded once to the library's dtype, at most ``max_ulp`` units in its last place apart."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from converters.acceptance.gates.library_rule import LibraryRule, library_rule

BF16 = ml_dtypes.bfloat16


def bf16_step(x: np.ndarray, steps: int) -> np.ndarray:
    """``x`` (bf16-representable) moved ``steps`` bf16 ulps away from zero."""
    bits = np.asarray(x, dtype=np.float32).astype(BF16).view(np.uint16).astype(np.int32) + steps
    return bits.astype(np.uint16).view(BF16).astype(np.float32)


def test_values_within_the_bound_pass_and_beyond_it_fail():
    want = np.array([0.5, -1.25, 3.0e-3, 0.0, 6.0], dtype=np.float32)  # library values (bf16)
    exact, one, two = (LibraryRule("bfloat16", n) for n in (0, 1, 2))
    # the artifact's float32 decode, rounded to bf16, is the library's value: equal under every bound
    decode = want + np.float32(2.0 ** -12) * want  # below half a bf16 ulp
    assert not exact.beyond(exact.rounded(decode), want).any()
    moved = bf16_step(want, 1)
    assert exact.beyond(moved, want)[want != 0].all() and not one.beyond(moved, want).any()
    assert one.beyond(bf16_step(want, 2), want)[want != 0].all() and not two.beyond(bf16_step(want, 2), want).any()
    # -0.0 against +0.0 is no distance (ModelOpt decodes the code -0 as +0.0); NaN against a number is
    assert not exact.beyond(np.array([-0.0], np.float32), np.array([0.0], np.float32)).any()
    assert exact.beyond(np.array([np.nan], np.float32), np.array([1.0], np.float32)).all()
    assert exact.row_limit < one.row_limit < 1e-7 + 2 ** -7 + 1e-9


class _Art:
    def __init__(self, objects: dict) -> None:
        self.provenance = {"objects": objects}


def test_the_rule_comes_from_provenance_only_when_every_object_records_one():
    kept = {"source_quantization": {"library_dtype": "bfloat16"}, "max_ulp": 1}
    bank = {"source_quantization": [{"library_dtype": "bfloat16"}, {"library_dtype": "bfloat16"}], "max_ulp": 0}
    plain = {"exactness": "bit-exact"}
    art = _Art({"a": kept, "b": bank, "c": plain, "d": {**kept, "max_ulp": True}})
    assert library_rule(art, ["a", "b"]) == LibraryRule("bfloat16", 1)
    assert library_rule(art, ["a", "c"]) is None  # an ordinary object: exact equality
    assert library_rule(art, ["d"]) is None  # a malformed bound is no bound
