"""``python -m tinymodels --help`` is plain text that names every model and component and the ``--set`` keys;
``--show-config`` prints the config a ``--set`` gives (README.md "Your first conversion")."""

from __future__ import annotations

import json

import pytest

from tinymodels.__main__ import COMPONENTS, MODELS, main


def test_help_is_plain_text_naming_models_components_and_set_keys(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":data:" not in text  # no reST markup
    for name in (*MODELS, *COMPONENTS):
        assert name in text.split("positional arguments")[0], name
    for alias, field in (("layers", "num_hidden_layers"), ("kv_heads", "num_key_value_heads"), ("vocab", "vocab_size")):
        assert f"{alias} ({field})" in text


def test_show_config_applies_the_overrides_and_writes_nothing(tmp_path, capsys):
    assert main(["qwen3", "--show-config", "--set", "layers=3", "--set", "max_window_layers=2",
                 "--gguf", str(tmp_path / "m.gguf")]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["num_hidden_layers"] == 3 and cfg["max_window_layers"] == 2 and cfg["model_type"] == "qwen3"
    assert not (tmp_path / "m.gguf").exists()
