"""Frontend resources of an HF directory: copied byte-for-byte (sha256 in provenance), a chat template
extracted from tokenizer_config.json, a generation config derived from config.json, typed refusals."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from converters.sources import open_hf_dir
from converters.sources.frontend import TEXT_ROLES, VISION_ROLES, FrontendError, frontend_resources
from tinymodels import qwen35


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    return qwen35.write_hf_dir(tmp_path_factory.mktemp("fe") / "hf")


def copy_dir(src, dst):
    shutil.copytree(src, dst)
    return dst


def resources(path, **kw):
    with open_hf_dir(path) as src:
        return frontend_resources(src, **kw)


def test_text_roles_copied_byte_for_byte(hf_dir):
    res = resources(hf_dir)
    assert set(res.files) == set(TEXT_ROLES)
    for role in TEXT_ROLES:
        on_disk = (hf_dir / role).read_bytes()
        assert res.files[role] == on_disk
        assert res.provenance[role] == {"origin": "copied", "file": str(hf_dir / role),
                                        "sha256": hashlib.sha256(on_disk).hexdigest(), "size": len(on_disk)}
    for role in VISION_ROLES:
        assert res.provenance[role] == {"origin": "absent"}
    assert res.for_roles(VISION_ROLES) == {}


def test_vision_processor_files_copied(hf_dir, tmp_path):
    d = copy_dir(hf_dir, tmp_path / "vl")
    (d / "preprocessor_config.json").write_bytes(b'{"image_mean": [0.5, 0.5, 0.5], "patch_size": 16}\n')
    (d / "video_preprocessor_config.json").write_bytes(b'{"fps": 2}')
    res = resources(d)
    assert res.for_roles(VISION_ROLES) == {"preprocessor_config.json": (d / "preprocessor_config.json").read_bytes(),
                                           "video_preprocessor_config.json": b'{"fps": 2}'}
    assert res.provenance["video_preprocessor_config.json"]["sha256"] == hashlib.sha256(b'{"fps": 2}').hexdigest()


def test_chat_template_extracted_from_tokenizer_config(hf_dir, tmp_path):
    d = copy_dir(hf_dir, tmp_path / "old")
    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}\u4f60\u597d"
    (d / "chat_template.jinja").unlink()
    tc = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**tc, "chat_template": template}))
    res = resources(d)
    assert res.files["chat_template.jinja"] == template.encode("utf-8")
    assert res.provenance["chat_template.jinja"]["origin"] == "extracted"
    assert res.provenance["chat_template.jinja"]["field"] == "chat_template"
    assert res.files["tokenizer_config.json"] == (d / "tokenizer_config.json").read_bytes()


def test_generation_config_derived_from_config(hf_dir, tmp_path):
    d = copy_dir(hf_dir, tmp_path / "nogen")
    (d / "generation_config.json").unlink()
    config = json.loads((d / "config.json").read_text())
    res = resources(d)
    assert json.loads(res.files["generation_config.json"]) == {
        "bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}
    assert res.provenance["generation_config.json"]["origin"] == "derived"


def test_missing_tokenizer_json_is_refused(hf_dir, tmp_path):
    d = copy_dir(hf_dir, tmp_path / "notok")
    (d / "tokenizer.json").unlink()
    with pytest.raises(FrontendError) as info:
        resources(d)
    assert info.value.rule == "tokenizer_json_required" and info.value.file == str(d / "tokenizer.json")


def test_oversized_file_is_refused_before_reading(hf_dir, tmp_path):
    from converters.sources.frontend import RULES_FILE

    rules = tmp_path / "small.yaml"
    rules.write_text(RULES_FILE.read_text().replace("max_hf_file_bytes: 268435456", "max_hf_file_bytes: 1000"))
    with pytest.raises(FrontendError) as info:
        resources(hf_dir, rules_file=rules)
    assert info.value.rule == "resource_size" and info.value.file == str(hf_dir / "tokenizer.json")


@pytest.mark.parametrize("case, rule, file", [
    ("bad_eos", "token_id_type", "config.json"),
    ("bad_tokenizer_config", "resource_json", "tokenizer_config.json"),
])
def test_derivations_from_bad_side_files_are_typed_errors(hf_dir, tmp_path, case, rule, file):
    d = copy_dir(hf_dir, tmp_path / case)
    if case == "bad_eos":
        (d / "generation_config.json").unlink()
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, "eos_token_id": ["<|im_end|>"]}))
    else:
        (d / "chat_template.jinja").unlink()
        (d / "tokenizer_config.json").write_bytes(b'{"chat_template": "x",')
    with pytest.raises(FrontendError) as info:
        resources(d)
    assert info.value.rule == rule and info.value.file == str(d / file)
