"""The pieces behind the Ternary Bonsai conversion: the ternary type table (scale columns for the offset
probe, CHECK 1 geometry against hand-computed sizes), the code/multiplier proof catching a flipped code
or multiplier, the mapping's ``counts`` cross-check, and the recipes' ``when_inexact``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from converters.errors import MappingError, RecipeError
from converters.mapping import MAPPINGS_DIR, load_mapping
from converters.mapping.recipes import load_recipe
from converters.sources import ternary
from ninfer_core import codecs
from tinymodels.ternary_blocks import block_format


def test_scale_columns_follow_each_block_layout():
    """qwen-gguf-conventions.md: d first for Q1_0/Q2_0/PQ2_0, last for TQ1_0/TQ2_0/PTQ1_0 (docs/ternary.md §5:
    PTQ1_0 is slice(26, 28), PQ2_0 slice(0, 2); a hard-coded 34 / slice(0, 2) misreads PTQ1_0)."""
    want = {"PTQ1_0": (28, slice(26, 28)), "PQ2_0": (34, slice(0, 2)), "Q2_0_G128": (34, slice(0, 2)),
            "Q2_0_G64": (18, slice(0, 2)), "Q1_0": (18, slice(0, 2)), "TQ1_0": (54, slice(52, 54)),
            "TQ2_0": (66, slice(64, 66))}
    assert set(ternary.TYPES) == set(want)
    for name, (nbytes, cols) in want.items():
        assert ternary.TYPES[name].block_bytes == nbytes and ternary.scale_columns(name) == cols, name
    # the generator puts d exactly there
    for name, gen in (("PTQ1_0", "PTQ1_0"), ("PQ2_0", "PQ2_0"), ("TQ1_0", "TQ1_0"), ("Q1_0", "Q1_0")):
        fmt = block_format(gen)
        blocks = fmt.pack(np.ones((1, fmt.block_elements), np.int8), np.array([0.375], np.float16))
        assert blocks[0, ternary.scale_columns(name)].view(np.float16)[0] == np.float16(0.375), name


def test_geometry_against_hand_computed_sizes():
    """[5120, 17408] (Bonsai's ffn_down): t2 low plane 5120·17408/4 = 22,282,240 bytes, scale plane
    5120·136·2 = 1,392,640 → 23,674,880; PQ2_0 holds the same rows in 5120·136·34 = 23,674,880 (pad 0),
    PTQ1_0 in 5120·136·28 = 19,496,960 (t2 is 4,177,920 bytes larger: trits pack 1.6 bits)."""
    g = ternary.geometry("PQ2_0", 5120, 17408, "t2_g128_fp16")
    assert (g["blocks_per_row"], g["groups_per_row"], g["source_bytes"], g["payload_bytes"], g["pad"]) == (
        136, 136, 23_674_880, 23_674_880, 0)
    g = ternary.geometry("PTQ1_0", 5120, 17408, "t2_g128_fp16")
    assert (g["source_bytes"], g["pad"]) == (19_496_960, 4_177_920)
    g = ternary.geometry("Q2_0_G64", 5120, 17408, "q2_g64_fp16")  # 64/18 → q2: 16 + 2 bytes per 64, pad 0
    assert (g["blocks_per_row"], g["groups_per_row"], g["pad"]) == (272, 272, 0)
    assert ternary.exact_targets("PTQ1_0") == {"t2_g128_fp16": "value_exact"}
    assert ternary.exact_targets("PQ2_0") == {"q2_g64_fp16": "bit_exact", "t2_g128_fp16": "value_exact"}


@pytest.mark.parametrize("name", ["PTQ1_0", "TQ1_0", "Q1_0", "PQ2_0"])
def test_proof_catches_a_changed_code_or_multiplier(name):
    fmt = block_format({"PQ2_0": "PQ2_0"}.get(name, name))
    rng = np.random.default_rng(1)
    n, k = 4, 512
    ternary_codes = np.array([c for c in fmt.codes if c in (-1, 0, 1)], np.int8)  # t2 holds -1..1
    codes = rng.choice(ternary_codes, size=(n * k // fmt.block_elements, fmt.block_elements))
    d = (rng.random(n * k // fmt.block_elements) + 0.5).astype(np.float16)
    d[3] = -d[3]  # a negative multiplier: t2 folds the sign into the codes
    raw = fmt.pack(codes, d).reshape(n, -1)
    data = codecs.transcode_ggml(name, raw.reshape(-1), (n, k), "t2_g128_fp16")
    ok = ternary.compare_codes(name, raw, "t2_g128_fp16", data, (n, k))
    assert ok["codes_equal"] and ok["multipliers_equal"] and ok["values_equal"] and ok["sign_folded_blocks"] == 1
    flipped = bytearray(data)
    flipped[5] ^= 0b01 << 2  # one 2-bit code of row 0
    assert not ternary.compare_codes(name, raw, "t2_g128_fp16", bytes(flipped), (n, k))["codes_equal"]
    scaled = bytearray(data)
    at = -(-n * k // 4 // 256) * 256  # the scale plane (storage-layouts §1)
    scaled[at] ^= 1
    r = ternary.compare_codes(name, raw, "t2_g128_fp16", bytes(scaled), (n, k))
    assert r["codes_equal"] and not r["multipliers_equal"] and not r["values_equal"]


def test_declared_counts_are_checked_against_the_rules(tmp_path):
    m = load_mapping(MAPPINGS_DIR / "bonsai.yaml")
    assert m.counts == m.derived_counts() == {"global": {"parameters": 3, "gguf_tensors": 3},
                                              "linear_attention": {"parameters": 16, "gguf_tensors": 14},
                                              "full_attention": {"parameters": 12, "gguf_tensors": 11}}
    # docs/ternary.md §2 counts: 48 x 14 + 16 x 11 + 3 = 851 source tensors for the 64-layer model
    assert 48 * m.counts["linear_attention"]["gguf_tensors"] + 16 * m.counts["full_attention"]["gguf_tensors"] \
        + m.counts["global"]["gguf_tensors"] == 851
    bad = tmp_path / "bonsai.yaml"
    shutil.copy(MAPPINGS_DIR / "bonsai.yaml", bad)
    bad.write_text(bad.read_text().replace("full_attention: {parameters: 12, gguf_tensors: 11}",
                                           "full_attention: {parameters: 12, gguf_tensors: 10}"))
    with pytest.raises(MappingError, match=r"declares 10 gguf tensors for full_attention, but the rules define 11") \
            as err:
        load_mapping(bad)
    assert err.value.rule == "counts_mismatch" and "bonsai.yaml:" in err.value.file


def test_bonsai_rules_keep_the_seed_inferred_marks():
    m = load_mapping(MAPPINGS_DIR / "bonsai.yaml")
    inferred = {r.name for r in m.rules.values() if r.inferred}
    assert {"gdn_value_z", "attn_q_per_head_interleave"} <= inferred
    assert m.rules["gdn_qkv_split"].inferred is False
    assert not m.groups["per_layer_gdn"][-1].sources["gguf"].transforms  # ssm_out: grouped columns, no transform
    raw = next(p for p in m.parameters() if p.name == "text/layers/{l}/gdn/norm")
    assert not raw.sources["gguf"].transforms  # ssm_norm copied raw, not w - 1
    assert len(m.unresolved) == 4


def test_when_inexact_is_validated(tmp_path):
    t = load_recipe("ternary")
    assert t.role("mlp.down").when_inexact == "refuse" and t.role("embedding").when_inexact == "q8_g32_fp16"
    assert t.role("norm").when_inexact is None
    base = "name: t\ndescription: d\nroles:\n"
    for body, message in (('  "*": {format: exact, when_inexact: refuse}\n', "'exact' never requantizes"),
                          ('  "*": {format: t2_g128_fp16, when_inexact: q3}\n', "unknown format 'q3'"),
                          ('  "*": {format: bf16, when_inexact: exact}\n', "unknown format 'exact'")):
        path = tmp_path / "r.yaml"
        path.write_text(base + body)
        with pytest.raises(RecipeError, match=message):
            load_recipe(path)
