"""Fixtures shared across test folders: ``made``, a template artifact with extra MTP / vision objects,
to produce or borrow from (``--template``); ``calbin_package``, a clean calbin package of the test's own."""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import TYPE_CHECKING

# One BLAS thread per test process, set before numpy loads OpenBLAS (it reads the variable then; an explicit
# setting wins): pytest-xdist already runs one worker per core, and OpenBLAS's own threads on top of that
# spin-wait for cores the other workers hold — about a third of the suite's CPU time (docs/testing.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pytest

if TYPE_CHECKING:
    from tinymodels.calbin import CalbinFixture

# The package is imported inside the fixtures, not here: the xdist controller loads this file before it starts
# the workers, and needs none of it (each worker imports it anyway, collecting the test modules).


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from converters.pipeline.convert import convert
    from ninfer_core import ArtifactWriter, Binding, Component, Use, codecs, open_artifact
    from tinymodels import qwen35

    cfg = qwen35.config()
    d = tmp_path_factory.mktemp("tpl")
    qwen35.write_gguf(d / "m.gguf", cfg, matrix_type="Q8_0")
    qwen35.write_hf_dir(d / "hf", cfg)
    convert(d / "hf", d / "base.ninfer", recipe="groupwise-int")
    convert(d / "hf", d / "fused.ninfer", recipe="nvfp4")
    extra = {"mtp/fc": np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),
             "vision/patch_embed": np.random.default_rng(1).standard_normal((64, 48)).astype(np.float32)}
    processor = b'{"patch_size": 16}\n'
    with open_artifact(d / "base.ninfer") as base:
        comps = {k: c for k, c in base.components.items()}
        comps["mtp"] = Component({"architectures": ["Qwen3_5MTP"]}, target="text")
        comps["vision"] = Component({"model_type": "qwen3_vl"},
                                    resources={"preprocessor_config.json": "frontend/vision/preprocessor_config.json"})
        bindings = dict(base.bindings)
        bindings["mtp/fc"] = Binding.whole("mtp/fc")
        bindings["mtp/token_embedding"] = base.bindings["text/token_embedding"]  # shared with text, not copied
        bindings["vision/patch_embed"] = Binding.whole("vision/patch_embed")
        uses = [*base.uses, Use("mtp/fc", "mtp/fc_input", "A16Only")]
        with ArtifactWriter(d / "template.ninfer", components=comps, bindings=bindings, uses=uses,
                            metadata=dict(base.metadata), provenance={"made_by": "test"}) as w:
            records = list(base.objects)
            order = records[:5] + [("mtp/fc",)] + records[5:] + [("vision/patch_embed",), ("proc",)]
            for rec in order:
                if rec == ("mtp/fc",) or rec == ("vision/patch_embed",):
                    w.add_tensor(rec[0], extra[rec[0]].shape, "bf16", "contiguous_le_v1")
                elif rec == ("proc",):
                    w.add_resource("frontend/vision/preprocessor_config.json", len(processor))
                elif rec.kind == "tensor":
                    w.add_tensor(rec.id, rec.shape, rec.format, rec.layout, divisors=rec.divisors)
                else:
                    w.add_resource(rec.id, rec.bytes)
            w.plan()
            for rec in records:
                w.write_object(rec.id, bytes(base.read_range(rec.offset, rec.bytes)))
            for oid, arr in extra.items():
                w.write_object(oid, codecs.encode("bf16", "contiguous_le_v1", arr))
            w.write_object("frontend/vision/preprocessor_config.json", processor)
    return d


@pytest.fixture(scope="session")
def _pristine_calbin(tmp_path_factory) -> CalbinFixture:
    from tinymodels.calbin import write_calbin_package

    return write_calbin_package(tmp_path_factory.mktemp("calbin"))


@pytest.fixture
def calbin_package(_pristine_calbin, tmp_path) -> CalbinFixture:
    """What ``write_calbin_package(tmp_path)`` makes, as a copy of one package written once per worker: the
    test may seed any defect in it (its own files under ``tmp_path``) without writing the package again."""
    clean = _pristine_calbin
    root = tmp_path / clean.root.name
    shutil.copytree(clean.root, root, symlinks=True)
    return dataclasses.replace(clean, root=root, vaddrs=set(clean.vaddrs), command_addrs=set(clean.command_addrs))


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    """Every test runs in its own empty working directory: commands that write to the working directory by
    default (``convert validate``'s validation.json) never write into the repository."""
    monkeypatch.chdir(tmp_path)
