"""``python -m tinymodels.resave_configs`` — re-save every published config with transformers.

Writes ``tinymodels/real_configs/transformers-<version>/<name>.json``: each file of
``real_configs/published/`` loaded with ``AutoConfig.from_pretrained`` and written back with
``save_pretrained``, i.e. the spelling a user's checkpoint gets once transformers has saved it (transformers 5:
``rope_parameters`` instead of ``rope_theta`` / ``rope_scaling``, ``dtype`` instead of ``torch_dtype``, an
explicit ``layer_types``, ``num_local_experts``, ``vision_config.model_type`` ``qwen3_vl_vision``, …). The
outputs are committed data, so tests read both spellings without transformers, which is not a dependency of
this project (docs/architectures.md §Real geometries); run this script after adding a published config, with
transformers installed (``pip install transformers``; its config classes need no torch).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tinymodels.real import PUBLISHED, REAL_CONFIGS


def resave(text: str) -> dict:
    """``text`` (a config.json) as transformers loads and saves it."""
    from transformers import AutoConfig

    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "in", Path(tmp) / "out"
        source.mkdir()
        (source / "config.json").write_text(text, encoding="utf-8")
        AutoConfig.from_pretrained(source).save_pretrained(out)
        return json.loads((out / "config.json").read_text(encoding="utf-8"))


def main() -> int:
    import transformers

    target = REAL_CONFIGS / f"transformers-{transformers.__version__}"
    target.mkdir(exist_ok=True)
    for path in sorted(PUBLISHED.glob("*.json")):
        saved = resave(path.read_text(encoding="utf-8"))
        (target / path.name).write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{path.name} -> {target / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
