"""Ternary Bonsai sources of every ternary/binary GGML type (docs/ternary.md): a qwen35-shaped GGUF per type
converted with recipes ``ternary`` / ``ternary-q2`` and compared with the generator — decoded values against
its float reference, and the t2/q2 planes against the source blocks' codes and multipliers (read with
``tinymodels.ternary_blocks`` and the layout spec, not with the converter)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from converters.errors import ConversionError
from converters.model.engine import logical_array
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from ninfer_core.errors import ArtifactExistsError, EncodingError
from tinymodels import bonsai, qwen35
from tinymodels.ternary_blocks import block_format

# value heads of 128: llama.cpp's tiled ssm_out columns then move in whole 128-column groups (real models)
CFG = bonsai.config(linear_value_head_dim=128)
TYPES = ("PTQ1_0", "PQ2_0", "Q2_0_LEGACY", "Q1_0", "TQ1_0", "TQ2_0")
TWO_BIT = ("PQ2_0", "Q2_0_LEGACY", "Q2_0")
NOT_EXACT = ("/gdn/a_log",)  # log(-ssm_a) in float64 -> fp32: within one float32 ulp, not bit-exact


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bonsai")
    for t in (*TYPES, "Q2_0"):
        bonsai.write_gguf(d / f"{t}.gguf", CFG, ternary_type=t)
    return d


@pytest.fixture(scope="module")
def converted(files):
    """(type, recipe) → (artifact path, Result), converted once."""
    out = {}

    def get(t: str, recipe: str = "ternary"):
        if (t, recipe) not in out:
            path = files / f"{t}.{recipe}.ninfer"
            out[(t, recipe)] = (path, convert(files / f"{t}.gguf", path, recipe=recipe, workers=1))
        return out[(t, recipe)]

    return get


# --- independent readers --------------------------------------------------------------------------------

def row_split_planes(data: bytes, n: int, k: int, group: int) -> tuple[np.ndarray, np.ndarray]:
    """storage-layouts §1 for 2-bit formats: low plane [N, Kp/4] (element k at bits 2(k%4) of byte k/4),
    scale plane FP16 [N, Kp/G] at the next multiple of 256."""
    kp = -(-k // 128) * 128
    low_size = n * kp // 4
    buf = np.frombuffer(data, dtype=np.uint8)
    low = buf[:low_size].reshape(n, kp // 4)
    fields = (low[:, :, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3
    scale_at = -(-low_size // 256) * 256
    scale = buf[scale_at:scale_at + n * kp // group * 2].view("<u2").reshape(n, kp // group)
    return fields.reshape(n, kp)[:, :k], scale


def source_blocks(gguf_name: str, shape, t: str):
    """The generator's codes ``(n, k)`` and FP16 words ``(n, k // B)`` of one stored tensor."""
    fmt = block_format(t)
    values = bonsai.ternary_rows(gguf_name, shape, fmt, 0, 0, shape[0])
    codes, d = fmt.unpack(fmt.encode(values))
    return codes.reshape(shape[0], -1), d.view("<u2").reshape(shape[0], -1), fmt.block_elements


def gguf_shapes() -> dict:
    return {t.name: t.shape for t in qwen35.gguf_tensors(CFG)}


# --- values ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", TYPES)
def test_every_type_decodes_to_the_generator_reference(converted, t):
    path, result = converted(t)
    ref = bonsai.logical_parameters(CFG, ternary_type=t)
    assert not [f for f in validate(path) if f.severity == "ERROR"]
    with open_artifact(path) as art:
        assert art.metadata["identity"]["architecture"] == "qwen35"  # no rotation: llama.cpp's own layout
        for name, want in ref.items():
            got = logical_array(art, name, want.shape)
            if name.endswith(NOT_EXACT):
                np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
            else:
                assert np.array_equal(got, want), name
    s = result.summary()
    # embedding, head, and per layer five ternary objects (2 projection groups, output, gate_up, down)
    assert s["exactness_check"]["codes_and_multipliers_equal"] and s["exactness_check"]["objects"] == 2 + 4 * 5
    formats = {r["id"]: r.get("format") for r in result.object_rows()}
    assert formats["text/layers/3/attention/query_key"] == formats["text/token_embedding"] == "t2_g128_fp16"
    assert formats["text/layers/0/gdn/a"] == "bf16" and formats["text/layers/0/gdn/a_log"] == "fp32"


@pytest.mark.parametrize("t", TYPES)
def test_ternary_objects_keep_the_source_codes_and_multipliers(converted, t):
    """t2 of a single-piece object: every code equals the source block's code and every 128-group's FP16
    multiplier is the source block's ``d`` word (a 256-element block feeds two groups)."""
    path, result = converted(t)
    shapes = gguf_shapes()
    objects = {"text/output_head": "output.weight", "text/layers/1/mlp/down": "blk.1.ffn_down.weight",
               "text/layers/3/attention/output": "blk.3.attn_output.weight"}
    with open_artifact(path) as art:
        for oid, tensor in objects.items():
            rec = art.object(oid)
            assert rec.format == "t2_g128_fp16"
            n, k = rec.shape
            codes, words = row_split_planes(art.object_bytes(oid), n, k, 128)
            want_codes, want_d, block = source_blocks(tensor, shapes[tensor], t)
            assert np.array_equal(np.where(codes >= 2, codes.astype(np.int8) - 4, codes), want_codes), oid
            groups = np.arange(k // 128) * 128 // block
            assert np.array_equal(words, want_d[:, groups]), oid
    prov = result.summary()
    assert prov["exactness_check"]["elements"] > 0


def test_gdn_output_columns_move_as_whole_groups(converted):
    """TQ1_0 blocks hold 256 columns, value heads 128: the tiled ssm_out columns are moved as t2 groups
    after the exact transcode (both halves of a block keep its d)."""
    path, result = converted("TQ1_0")
    with open_artifact(path) as art:
        prov = art.provenance["objects"]["text/layers/0/gdn/output"]
        assert "moved as whole 128-column groups" in prov["pieces"][0]["columns"]
        assert prov["exactness"] == "value-exact" and prov["exactness_check"][0]["codes_equal"]


@pytest.mark.parametrize("t", TWO_BIT)
def test_q2_recipe_copies_two_bit_blocks_bit_exact(converted, t):
    path, result = converted(t, "ternary-q2")
    shapes = gguf_shapes()
    with open_artifact(path) as art:
        rec = art.object("text/output_head")
        assert rec.format == "q2_g64_fp16"
        n, k = rec.shape
        u, words = row_split_planes(art.object_bytes("text/output_head"), n, k, 64)
        want_codes, want_d, block = source_blocks("output.weight", shapes["output.weight"], t)
        assert np.array_equal(u.astype(np.int8) - 1, want_codes)
        assert np.array_equal(words, want_d[:, np.arange(k // 64) * 64 // block])
        assert art.provenance["objects"]["text/output_head"]["exactness"] == "bit-exact"
        ref = bonsai.logical_parameters(CFG, ternary_type=t)
        for name in ("text/layers/0/gdn/value", "text/layers/3/attention/gate", "text/token_embedding"):
            assert np.array_equal(logical_array(art, name, ref[name].shape), ref[name]), name


# --- refusals -------------------------------------------------------------------------------------------

def test_official_q2_0_with_unequal_halves_is_not_forced_into_t2(files, tmp_path):
    """Q2_0 (64/18): two 64-blocks of one t2 group with different |d| cannot share a multiplier."""
    with pytest.raises(EncodingError, match=r"token_embd.weight.*same t2 group") as err:
        convert(files / "Q2_0.gguf", tmp_path / "x.ninfer", recipe="ternary", workers=1)
    assert err.value.rule == "unrepresentable_block"
    assert list(tmp_path.iterdir()) == []


def test_trit_types_have_no_exact_path_into_q2(files, tmp_path):
    with pytest.raises(ConversionError, match=r"PTQ1_0 has no exact path into q2_g64_fp16 \(its exact targets: "
                                              r"t2_g128_fp16\).*when_inexact: refuse") as err:
        convert(files / "PTQ1_0.gguf", tmp_path / "x.ninfer", recipe="ternary-q2")
    assert err.value.rule == "inexact_refused"
    assert list(tmp_path.iterdir()) == []


def test_columns_that_split_groups_are_refused_not_requantized(tmp_path):
    """Value heads of 64 (the fixture's default): ssm_out columns move in 64-column pieces, which no
    t2 group of 128 can follow exactly; the recipe refuses instead of requantizing."""
    g = bonsai.write_gguf(tmp_path / "h64.gguf", ternary_type="PTQ1_0")
    with pytest.raises(ConversionError, match=r"text/layers/0/gdn/output: blk.0.ssm_out.weight cannot be "
                                              r"transcoded exactly into t2_g128_fp16: the mapping moves its input "
                                              r"columns in pieces that split PTQ1_0 blocks of 128"):
        convert(g, tmp_path / "x.ninfer", recipe="ternary")
    assert not (tmp_path / "x.ninfer").exists()
    # the same file under a recipe without when_inexact is requantized, and says so
    r = convert(g, tmp_path / "y.ninfer", recipe="groupwise-int", workers=1)
    assert r.summary()["exactness"].get("requantized")


def test_existing_output_is_never_overwritten(files, converted):
    path, _ = converted("PTQ1_0")
    before = path.read_bytes()
    with pytest.raises(ArtifactExistsError):
        convert(files / "PTQ1_0.gguf", path, recipe="ternary")
    assert path.read_bytes() == before


def test_norms_that_bf16_cannot_hold_are_measured(files, tmp_path):
    """A trained model's norms are arbitrary F32 (the generator's are bf16-exact): patch one, convert, and
    find ``w = g - 1`` rounded once to bf16 and its cosine in provenance (not bit-exact, docs/ternary.md §3)."""
    import ml_dtypes

    from converters.sources import open_source

    path = tmp_path / "norms.gguf"
    shutil.copy(files / "PTQ1_0.gguf", path)
    with open_source(path) as src:
        t = src.tensors["blk.0.attn_norm.weight"]
        offset, n = t.file_offset, t.elements
    g = (1 + np.random.default_rng(5).normal(0, 0.05, n)).astype(np.float32)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(g.tobytes())
    result = convert(path, tmp_path / "n.ninfer", recipe="ternary", workers=1)
    want = (g.astype(np.float64) - 1).astype(ml_dtypes.bfloat16).astype(np.float32)
    with open_artifact(tmp_path / "n.ninfer") as art:
        assert np.array_equal(logical_array(art, "text/layers/0/input_norm"), want)
        err = art.provenance["objects"]["text/layers/0/input_norm"]
        assert err["exactness"] == "requantized" and 0.9999 < err["measured_error"]["cosine"] < 1
    assert result.summary()["worst_cosine"]["object"] == "text/layers/0/input_norm"
