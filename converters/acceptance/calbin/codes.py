"""Finding codes of calbin package validation, each with its fixed severity and gate (docs/calbin.md §9–§10).

This table is the single source: validators build findings from it (``CODES.finding(code, evidence,
...)``), and ``docs/validation-codes.md`` documents the same rows (a test compares the two).

Severity policy (docs/calbin.md §10, and where it is silent, the reading stated in the summary):
ERROR rejects the package; BLOCKED_REPRODUCIBILITY lets an old package run but forbids calling it
reproducible; WARNING_VENDOR needs a vendor fix (C3 fields, diagnostics); WARNING_SERVICE constrains the
serving layer; INFO is reported, not judged (aliases, coverage, unconfirmed units).
"""

from __future__ import annotations

from converters.acceptance.report import CodeSpec, CodeTable

E, B, V, S, INFO = "ERROR", "BLOCKED_REPRODUCIBILITY", "WARNING_VENDOR", "WARNING_SERVICE", "INFO"

CODES = CodeTable(
    [
        # Gate A: filesystem (§9 Gate A, §4.3 step 1)
        CodeSpec("FS_UNREADABLE", E, "A", "The package directory or a file in it cannot be read."),
        CodeSpec("FS_REQUIRED_MISSING", E, "A", "A production-required file (§2) is missing."),
        CodeSpec("FS_REQUIRED_EMPTY", E, "A", "A required or declared file is empty (size 0)."),
        CodeSpec("FS_NOT_REGULAR", E, "A", "A path that must be a regular file is a directory, FIFO, device or socket."),
        CodeSpec("FS_SYMLINK_ESCAPE", E, "A", "A symlink resolves outside the package, or is dangling."),
        CodeSpec("FS_PATH_ESCAPE", E, "A", "A declared path is absolute or contains '..'."),
        CodeSpec("FS_EXPECTED_MISSING", V, "A", "A diagnostic/test file the vendor delivers (hparam.yaml, command text, version.py) is missing."),
        CodeSpec("FS_SYMLINK_INTERNAL", INFO, "A", "A symlink that stays inside the package (reported, allowed)."),
        CodeSpec("FS_UNKNOWN_FILE", INFO, "A", "A file not in the §2 inventory (reported, not judged)."),
        CodeSpec("FS_HASH_SKIPPED", INFO, "A", "Fast mode: parameter blocks were not hashed; size/mtime are no integrity proof."),
        CodeSpec("TOKENIZER_FILE_MISSING", S, "A", "A §8 tokenizer/config file that serving must hash and freeze is missing."),
        # Gate B: schema (§9 Gate B)
        CodeSpec("YAML_PARSE", E, "B", "A YAML file does not parse (safe loader), or its top level is not a mapping."),
        CodeSpec("YAML_DUPLICATE_KEY", E, "B", "A YAML mapping repeats a key (the later value would silently win)."),
        CodeSpec("MANIFEST_AMBIGUOUS", E, "B", "The root <model>.yaml cannot be told apart from other root YAML files."),
        CodeSpec("MANIFEST_SCHEMA", E, "B", "A root manifest key is missing or has the wrong type (§3)."),
        CodeSpec("META_GRAMMAR", E, "B", "A metadata .txt line matches none of the line forms (§4, §5)."),
        CodeSpec("META_REQUIRED", E, "B", "A required metadata field is missing, repeated or empty."),
        CodeSpec("META_UNKNOWN_FIELD", V, "B", "A metadata 'key value' line with a key outside the field dictionary."),
        CodeSpec("META_MODEL_TYPE", E, "B", "model_memory_reserved_info.txt model_type is not 'llm' (§4.1)."),
        CodeSpec("META_SMODEL_TYPE", V, "B", "The prefill submodel declares smodel_type llm_decode (§5.1 known defect, §10)."),
        CodeSpec("META_MEMORY_UNIT", V, "B", "device_memory_required is implausible in its unit; never used for capacity (§4.1, §10)."),
        CodeSpec("SUBMODEL_ROLES", E, "B", "Not exactly one prefill and one decode submodel, or their roles disagree (§10)."),
        CodeSpec("OP_YAML_SCHEMA", E, "B", "An op I/O YAML entry is not an args_N/outs_N 4-tuple (§6)."),
        CodeSpec("PROFPARTS_GRAMMAR", E, "B", "A profparts line is not one op instance name (§7.1)."),
        CodeSpec("CMD_TEXT_GRAMMAR", V, "B", "A command text line breaks the comment/field-line grammar (§7.2)."),
        CodeSpec("TOKENIZER_FILE_INVALID", S, "B", "A tokenizer/config JSON file does not parse or lacks a needed field."),
        # Gate C: cross-reference (§9 Gate C)
        CodeSpec("XREF_MODEL_NAME", E, "C", "model_name, manifest file name and model_arch lines disagree (§3.4, §10)."),
        CodeSpec("XREF_BATCH", E, "C", "batch_num, n_batch and tensor batch dimensions disagree (§10)."),
        CodeSpec("XREF_CONTEXT", E, "C", "seq_len, max_seq_len, input lengths and past lengths disagree (§10)."),
        CodeSpec("XREF_CHIPS", E, "C", "chip_nums, calcore_num and the declared CCU programs/commands disagree."),
        CodeSpec("XREF_SUBMODEL", E, "C", "one_model_cfg keys and submodel directories do not match one to one."),
        CodeSpec("XREF_KV_PAIRING", E, "C", "past_key_i/past_value_i are not paired with consecutive indices from 0 (§3.1)."),
        CodeSpec("XREF_LAYERS", E, "C", "The past_key count differs from the HF config's num_hidden_layers (§3.1)."),
        CodeSpec("XREF_HEADS", E, "C", "Q/KV head counts or head_dim disagree between model_info, past shapes and config (§3.2)."),
        CodeSpec("XREF_ROPE_THETA", E, "C", "model_info.theta_base differs from the config's rope_theta (§3.2)."),
        CodeSpec("XREF_ARCH", E, "C", "is_encoder or alibi conflicts with a decoder-only RoPE model (§3.2)."),
        CodeSpec("XREF_IO_SHAPE", E, "C", "An ibuf/obuf shape differs from the manifest input shape or the logits contract (§5.3)."),
        CodeSpec("XREF_VOCAB", E, "C", "Logits last dimension, config vocab_size and tokenizer vocabulary disagree (§8)."),
        CodeSpec("XREF_GRAPH_INPUTS", E, "C", "An op YAML input_N entry names no manifest input, or its shape differs."),
        CodeSpec("XREF_GRAPH_INPUTS_CHIP_SPLIT", INFO, "C", "Per-chip past_key/past_value inputs read against the chip split: kv_heads / chip_nums heads, the declared past or the full context."),
        CodeSpec("XREF_DEVICE", E, "C", "The declared runtime chip is not among the metadata's compatible devices (§4.1)."),
        CodeSpec("XREF_FILE_MISSING", E, "C", "A file declared in metadata (parameter block, command, ELF, helper) does not exist."),
        CodeSpec("XREF_FILE_UNDECLARED", V, "C", "A command/ELF/helper file exists but no metadata line declares it."),
        CodeSpec("CHIP_MASK_INVALID", E, "C", "A chip mask is zero, names a chip >= chip_nums, or contradicts the file name's chip (§4.3, §5.2)."),
        CodeSpec("CMD_PINGPONG_INCOMPLETE", E, "C", "A submodel lacks the ping or pong command of some engine and chip (§5.2)."),
        CodeSpec("IO_SIZE_MISMATCH", E, "C", "product(shape) * dtype bytes != size on an ibuf/obuf line (§5.3, §10)."),
        CodeSpec("IO_DTYPE_UNKNOWN", E, "C", "An ibuf/obuf dtype is not in the dtype table, so its size cannot be checked."),
        CodeSpec("IO_PINGPONG_SAME_VADDR", V, "C", "An ibuf/obuf uses the same address for ping and pong (§5.3 expects different)."),
        CodeSpec("PARAM_MAP_RANGE", E, "C", "A parameter map range is outside its file: offset > size or size > size-offset (§4.3, §10)."),
        CodeSpec("PROFPART_UNKNOWN_OP", E, "C", "A profparts line names an op absent from the op I/O YAML; partition report refused (§7.1, §10)."),
        CodeSpec("PROFPART_DUPLICATE", V, "C", "An op instance appears twice in one chip's profparts (§7.1)."),
        CodeSpec("CMD_CHIP_MASK", V, "C", "A command text record's chip mask does not include the file's chip."),
        CodeSpec("TOKENIZER_CONTEXT", S, "C", "Tokenizer/config context exceeds the calbin max_seq_len; serving must cap at calbin (§8, §10)."),
        CodeSpec("TOKENIZER_SPECIAL_TOKENS", S, "C", "BOS/EOS/PAD ids disagree between tokenizer_config, generation_config and tokenizer.json (§8)."),
        CodeSpec("PACKAGE_DIR_NAME", S, "C", "The package directory name differs from model_name; aliases must not come from directory names (§8)."),
        # Gate D: capacity (§9 Gate D, §4.2, §6)
        CodeSpec("OP_DTYPE_UNKNOWN", E, "D", "An op I/O YAML PrimitiveType is not in the dtype table; capacity report refused (§6, §10)."),
        CodeSpec("CAP_CONTEXT_EXCEEDED", E, "D", "The requested --context exceeds the calbin max_seq_len."),
        CodeSpec("CAP_BATCH_EXCEEDED", E, "D", "The requested --batch exceeds the calbin n_batch."),
        CodeSpec("PARAM_MAP_OUTSIDE_RESERVATION", V, "D", "A parameter mapping lies in no DRAM/SRAM reservation range."),
        CodeSpec("CAP_VADDR_OVERLAP", INFO, "D", "Overlapping address ranges (aliases or lifetime reuse): reported, not judged (§4.3 rule 5, §6)."),
        CodeSpec("PARAM_MAP_COVERAGE", INFO, "D", "Parameter file bytes not covered, or covered more than once, by the map (§4.3 rule 6)."),
        CodeSpec("CAP_KV_PER_CHIP_UNKNOWN", INFO, "D", "KV heads do not divide evenly over chips; per-chip KV bytes not derived."),
        CodeSpec("FIELD_C3_UNCONFIRMED", INFO, "D", "Fields whose unit/scope is vendor-confirmable only (C3): reported, not used for decisions."),
        # Gate E: supply chain (§3.4, §9 Gate E)
        CodeSpec("SUPPLY_ONNX_MISSING", B, "E", "No ONNX is delivered in the package, so onnx_hash cannot be recomputed (§3.4)."),
        CodeSpec("SUPPLY_ONNX_HASH_MISSING", B, "E", "onnx_hash is absent, empty or not SHA-256 hex (§3.4)."),
        CodeSpec("SUPPLY_ONNX_HASH_MISMATCH", E, "E", "A delivered ONNX file's SHA-256 is not the declared onnx_hash."),
        CodeSpec("SUPPLY_COMPILER_COMMIT_MISSING", B, "E", "git_commit_id.calcc or git_commit_id.lib/tvm is missing (§3.4)."),
        CodeSpec("SUPPLY_CONTAINER_MISSING", B, "E", "compiler_oci_digest (the compiler container) is missing (§9 Gate E)."),
        CodeSpec("SUPPLY_FIELD_MISSING", B, "E", "Another §9 Gate E field (quant, calibration, oplib, schema version, runtime compat) is missing."),
        CodeSpec("SUPPLY_GOLDEN_UNMAPPED", V, "E", "golden_hash entries are bare hashes with no tensor/layer/file mapping (§3.4)."),
        # Gate F: pre-run checks possible without the device (§5.2, §9 Gate F)
        CodeSpec("ELF_HEADER_INVALID", E, "F", "A CCU program or helper SO has no valid ELF header (readelf -h would fail)."),
        CodeSpec("ELF_DYNAMIC_INVALID", E, "F", "A helper SO's dynamic section is unreadable (readelf -d would fail)."),
        CodeSpec("ELF_MACHINE_NAME_CONFLICT", V, "F", "A helper SO's file name names another ISA than its ELF e_machine."),
        CodeSpec("RUNTIME_RUN_REQUIRED", INFO, "F", "Static acceptance done; the runner (CreateCalbin -> configure -> golden) must still run, carrying these findings."),
    ]
)
