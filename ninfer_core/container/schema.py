"""Field tables of the JSON directory: member sets, types, integer ranges, ID and Shape rules.

Container spec §1 (U64, PositiveU64, ID, Shape, unique members, unknown fields), §3.3 (files),
§4.1 (root), §4.2 (components), §5.1/§5.2 (objects), §7.1 (bindings, parts), §8 (uses), §9.2 (proposal),
§10 (metadata, provenance). Every generic record must have exactly the members of its table; ``config``,
``metadata`` and ``provenance`` stay open. Each violation is reported (never raised) so that ``validate``
sees all of them; a record that cannot be built is left out and its object ID remembered, so that
references to it do not add follow-on noise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ninfer_core.container import jsontext
from ninfer_core.container.framing import U64_MAX, elements
from ninfer_core.container.problems import Problems
from ninfer_core.container.records import (
    ACTIVATION_POLICIES,
    PROPOSAL_DOMAINS,
    Binding,
    Component,
    Directory,
    Part,
    Proposal,
    ResourceObject,
    TensorObject,
    Use,
    file_table,
)
from ninfer_core.errors import DirectoryReferenceError, SchemaError

MAX_RANK = 16
DIVISOR_FORMAT = ("nvfp4", "block_scale_k16_m128x4_v1")  # the one (format, layout) allowing divisors > 1

ROOT = ({"components", "objects", "bindings", "uses", "files"}, {"metadata", "provenance"})
COMPONENT = ({"config"}, {"target", "resources", "proposal"})
TENSOR = ({"id", "kind", "shape", "format", "layout", "offset", "bytes"}, {"divisors"})
RESOURCE = ({"id", "kind", "encoding", "offset", "bytes"}, set())
BINDING = (set(), {"object", "parts"})
PART = ({"object", "range"}, set())
USE = ({"parameter", "input"}, {"activation_policy", "auxiliaries"})
FILE = ({"path", "payload_bytes"}, set())
PROPOSAL = ({"domain"}, {"rows"})

_key = jsontext.member_path


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array"}.get(type(value), "object" if isinstance(value, dict) else "value")


class DirectoryParser:
    """Builds a :class:`Directory` from decoded JSON, reporting every field-table violation."""

    def __init__(self, problems: Problems, *, entry_payload_start: int, entry_name: str | None,
                 entry_dir: Path | None = None) -> None:
        self.p = problems
        self.entry_payload_start = entry_payload_start
        self.entry_name = entry_name
        self.entry_dir = entry_dir
        self.invalid_object_ids: set[str] = set()
        self.object_positions: list[int] = []  # JSON index of each parsed object record

    # ---- primitive rules (§1) -------------------------------------------------------------------

    def _error(self, message: str, path: str, rule: str, section: str = "§1") -> None:
        self.p.add(SchemaError, message, json_path=path, section=section, rule=rule)

    def record(self, value: Any, path: str, table: tuple[set[str], set[str]], what: str, section: str) -> bool:
        """Check a generic record's member set; True when it is an object with every required member."""
        if not isinstance(value, dict):
            self._error(f"{what} must be a JSON object, not {_type_name(value)}", path, "field_type", section)
            return False
        required, optional = table
        for name in sorted(required - value.keys()):
            self._error(f"{what} lacks required member {name!r}", path, "missing_field", section)
        for name in [k for k in value if k not in required and k not in optional]:
            self._error(f"{what} has unknown member {name!r} (allowed: {', '.join(sorted(required | optional))})",
                        _key(path, name), "unknown_field", section)
        return required <= value.keys()

    def u64(self, value: Any, path: str, *, positive: bool = False, section: str = "§1") -> int | None:
        kind = "PositiveU64" if positive else "U64"
        if isinstance(value, bool) or not isinstance(value, int):
            self._error(f"must be a JSON integer ({kind}), not {_type_name(value)}", path, "field_type", section)
            return None
        if value < (1 if positive else 0) or value > U64_MAX:
            self._error(f"{value} is outside {kind}", path, "u64_range", section)
            return None
        return value

    def ident(self, value: Any, path: str, *, section: str = "§1", what: str = "ID") -> str | None:
        """ID (§1): a non-empty UTF-8 string without U+0000."""
        if not isinstance(value, str):
            self._error(f"{what} must be a string, not {_type_name(value)}", path, "field_type", section)
            return None
        if not is_valid_id(value):
            self._error(f"{what} {value!r} breaks the ID rule (non-empty UTF-8 without U+0000)", path,
                        "id_rule", section)
            return None
        return value

    def shape(self, value: Any, path: str) -> tuple[int, ...] | None:
        """Shape (§1): 0..16 positive integers; ``elements(shape)`` must stay in U64."""
        if not isinstance(value, list):
            self._error(f"shape must be an array, not {_type_name(value)}", path, "field_type", "§1")
            return None
        if len(value) > MAX_RANK:
            self._error(f"shape has rank {len(value)}; at most {MAX_RANK} dimensions", path, "shape_rule")
            return None
        dims = []
        for i, d in enumerate(value):
            if isinstance(d, bool) or not isinstance(d, int) or not 0 < d <= U64_MAX:
                self._error(f"dimension {d!r} is not a positive U64 integer", f"{path}[{i}]", "shape_rule")
                return None
            dims.append(d)
        if elements(dims) > U64_MAX:
            self._error(f"elements({dims}) leaves U64", path, "u64_overflow")
            return None
        return tuple(dims)

    def id_keyed(self, value: Any, path: str, what: str, section: str, *, non_empty: bool = False) -> dict:
        """An object whose member names are IDs; returns it (possibly empty) or {} when not an object."""
        if not isinstance(value, dict):
            self._error(f"{what} must be a JSON object, not {_type_name(value)}", path, "field_type", section)
            return {}
        if non_empty and not value:
            self._error(f"{what} must not be empty", path, "empty_collection", section)
        for name in value:
            if not is_valid_id(name):
                self._error(f"{what} key {name!r} breaks the ID rule", _key(path, name), "id_rule", section)
        return value

    # ---- records --------------------------------------------------------------------------------

    def parse(self, root: Any) -> Directory | None:
        for path, name in jsontext.duplicate_members(root):
            self._error(f"member {name!r} occurs more than once in one JSON object", _key(path, name),
                        "json_duplicate_key")
        if not self.record(root, "$", ROOT, "the directory root", "§4.1"):
            return None
        files = self.files(root["files"])
        objects = self.objects(root["objects"])
        components = self.components(root["components"])
        bindings = {}
        for name, value in self.id_keyed(root["bindings"], "$.bindings", "bindings", "§7.1").items():
            b = self.binding(value, _key("$.bindings", name))
            if b is not None and is_valid_id(name):
                bindings[name] = b
        uses = self.uses(root["uses"])
        metadata = self.open_object(root, "metadata", "§10")
        if isinstance(metadata, dict) and "name" in metadata:
            name = metadata["name"]
            if not isinstance(name, str) or not name:
                self._error("metadata.name must be a non-empty string", "$.metadata.name", "metadata_name", "§10")
        provenance = self.open_object(root, "provenance", "§10")
        if files is None:
            return None
        return Directory(components, tuple(objects), bindings, tuple(uses), files, metadata, provenance)

    def open_object(self, root: dict, name: str, section: str) -> dict | None:
        if name not in root:
            return None
        value = root[name]
        if not isinstance(value, dict):
            self._error(f"{name} must be a JSON object, not {_type_name(value)}", f"$.{name}", "field_type",
                        section)
            return None
        return value

    def files(self, value: Any):
        """``files`` (§3.3): entry path null, part names, positive sizes, prefix sums within U64."""
        path = "$.files"
        if not isinstance(value, list) or not value:
            rule = "field_type" if not isinstance(value, list) else "empty_collection"
            self._error("files must be a non-empty array", path, rule, "§3.3")
            return None
        sizes, names, ok, seen = [], [], True, {}
        for i, entry in enumerate(value):
            p = f"{path}[{i}]"
            if not self.record(entry, p, FILE, "a file entry", "§3.3"):
                ok = False
                continue
            size = self.u64(entry["payload_bytes"], f"{p}.payload_bytes", positive=True, section="§3.3")
            name = entry["path"]
            if i == 0:
                if name is not None:
                    self._error("files[0] describes the entry; its path must be null", f"{p}.path",
                                "entry_path", "§3.3")
                    ok = False
            elif not isinstance(name, str):
                self._error(f"a part path must be a string, not {_type_name(name)}", f"{p}.path", "field_type",
                            "§3.3")
                ok = False
                name = None
            else:
                reason = part_name_problem(name, self.entry_name)
                if reason:
                    self._error(f"part path {name!r} {reason}", f"{p}.path", "part_name", "§3.3")
                    ok = False
                elif name in seen:
                    self._error(f"part path {name!r} repeats files[{seen[name]}]", f"{p}.path",
                                "part_name_duplicate", "§3.3")
                    ok = False
                else:
                    seen[name] = i
            if size is None:
                ok = False
            sizes.append(size)
            names.append(name)
        if not ok:
            return None
        if sum(sizes) > U64_MAX:
            self._error(f"payload_bytes sum {sum(sizes)} leaves U64", path, "u64_overflow", "§2.2")
            return None
        locations = None
        if self.entry_dir is not None and self.entry_name is not None:
            locations = [self.entry_dir / (self.entry_name if n is None else n) for n in names]
        return file_table(sizes, names, self.entry_payload_start, locations)

    def objects(self, value: Any) -> list:
        path = "$.objects"
        if not isinstance(value, list) or not value:
            rule = "field_type" if not isinstance(value, list) else "empty_collection"
            self._error("objects must be a non-empty array", path, rule, "§4.1")
            return []
        out = []
        for i, entry in enumerate(value):
            obj = self.object(entry, f"{path}[{i}]")
            if obj is not None:
                out.append(obj)
                self.object_positions.append(i)
        return out

    def object(self, entry: Any, p: str):
        if not isinstance(entry, dict):
            self._error(f"an object record must be a JSON object, not {_type_name(entry)}", p, "field_type", "§5")
            return None
        oid = entry.get("id")
        kind = entry.get("kind")
        if kind == "tensor":
            table, section = TENSOR, "§5.1"
        elif kind == "resource":
            table, section = RESOURCE, "§5.2"
        else:
            self._error(f"object kind {kind!r} is neither 'tensor' nor 'resource'", _key(p, "kind"),
                        "object_kind", "§5")
            self._remember_invalid(oid)
            return None
        complete = self.record(entry, p, table, f"a {kind} object", section)
        if not complete:
            self._remember_invalid(oid)
            return None
        ident = self.ident(oid, f"{p}.id", section=section)
        offset = self.u64(entry["offset"], f"{p}.offset", section=section)
        nbytes = self.u64(entry["bytes"], f"{p}.bytes", positive=True, section=section)
        if offset is not None and nbytes is not None and offset + nbytes > U64_MAX:
            self._error(f"offset + bytes = {offset + nbytes} leaves U64", p, "u64_overflow", section)
            offset = None
        if kind == "resource":
            encoding = self.ident(entry["encoding"], f"{p}.encoding", section=section, what="encoding")
            if None in (ident, offset, nbytes, encoding):
                self._remember_invalid(oid)
                return None
            return ResourceObject(ident, offset, nbytes, encoding)
        shape = self.shape(entry["shape"], f"{p}.shape")
        fmt = self.ident(entry["format"], f"{p}.format", section=section, what="format")
        layout = self.ident(entry["layout"], f"{p}.layout", section=section, what="layout")
        divisors = 1
        if "divisors" in entry:
            divisors = self.u64(entry["divisors"], f"{p}.divisors", positive=True, section=section)
            if divisors is not None and divisors > 1 and (fmt, layout) != DIVISOR_FORMAT:
                self._error(f"divisors = {divisors} > 1 is allowed only for nvfp4 / block_scale_k16_m128x4_v1",
                            f"{p}.divisors", "divisors_not_allowed", section)
                divisors = None
        if None in (ident, offset, nbytes, shape, fmt, layout, divisors):
            self._remember_invalid(oid)
            return None
        return TensorObject(ident, shape, fmt, layout, offset, nbytes, divisors)

    def _remember_invalid(self, oid: Any) -> None:
        if isinstance(oid, str):
            self.invalid_object_ids.add(oid)

    def components(self, value: Any) -> dict[str, Component]:
        path = "$.components"
        out = {}
        for cid, entry in self.id_keyed(value, path, "components", "§4.2", non_empty=True).items():
            p = _key(path, cid)
            if not self.record(entry, p, COMPONENT, "a component", "§4.2"):
                continue
            ok = is_valid_id(cid)
            config = entry["config"]
            if not isinstance(config, dict):
                self._error(f"config must be a JSON object, not {_type_name(config)}", f"{p}.config",
                            "field_type", "§4.2")
                ok = False
            target = None
            if "target" in entry:
                target = self.ident(entry["target"], f"{p}.target", section="§4.2", what="target")
                ok = ok and target is not None
            resources = {}
            if "resources" in entry:
                rp = f"{p}.resources"
                for role, rid in self.id_keyed(entry["resources"], rp, "resources", "§4.2").items():
                    checked = self.ident(rid, _key(rp, role), section="§4.2", what="resource object ID")
                    if checked is not None and is_valid_id(role):
                        resources[role] = checked
                    else:
                        ok = False
            proposal = None
            if "proposal" in entry:
                proposal = self.proposal(entry["proposal"], f"{p}.proposal", cid)
                ok = ok and proposal is not None
            if ok:
                out[cid] = Component(config, target, resources, proposal)
        return out

    def proposal(self, value: Any, p: str, component_id: str) -> Proposal | None:
        """``proposal`` (§9.2): only on ``text``; ``rows`` present exactly when the domain is indexed."""
        if component_id != "text":
            self._error(f"proposal is allowed only on the text component, not on {component_id!r}", p,
                        "proposal_placement", "§4.2")
            return None
        if not self.record(value, p, PROPOSAL, "a proposal", "§9.2"):
            return None
        domain = value["domain"]
        if domain not in PROPOSAL_DOMAINS:
            self._error(f"proposal domain {domain!r} is not one of {', '.join(PROPOSAL_DOMAINS)}",
                        f"{p}.domain", "enum_value", "§9.2")
            return None
        rows = None
        if domain == "indexed":
            if "rows" not in value:
                self._error("an indexed proposal needs rows", p, "proposal_rows", "§9.2")
                return None
            rows = self.u64(value["rows"], f"{p}.rows", positive=True, section="§9.2")
            if rows is None:
                return None
        elif "rows" in value:
            self._error("rows is allowed only for an indexed proposal", f"{p}.rows", "proposal_rows", "§9.2")
            return None
        return Proposal(domain, rows)

    def binding(self, value: Any, p: str) -> Binding | None:
        """A Binding (§7.1): exactly one of ``object`` (ID) and ``parts`` (non-empty array of Part)."""
        if not self.record(value, p, BINDING, "a binding", "§7.1"):
            return None
        has_object, has_parts = "object" in value, "parts" in value
        if has_object == has_parts:
            self._error("a binding has exactly one of 'object' and 'parts'", p, "binding_form", "§7.1")
            return None
        if has_object:
            oid = self.ident(value["object"], f"{p}.object", section="§7.1", what="object ID")
            return None if oid is None else Binding(object=oid)
        parts_value = value["parts"]
        if not isinstance(parts_value, list) or not parts_value:
            self._error("parts must be a non-empty array", f"{p}.parts", "binding_form", "§7.1")
            return None
        parts = []
        for i, pv in enumerate(parts_value):
            part = self.part(pv, f"{p}.parts[{i}]")
            if part is None:
                return None
            parts.append(part)
        return Binding(parts=tuple(parts))

    def part(self, value: Any, p: str) -> Part | None:
        if not self.record(value, p, PART, "a part", "§7.1"):
            return None
        oid = self.ident(value["object"], f"{p}.object", section="§7.1", what="object ID")
        rng = value["range"]
        if not isinstance(rng, list) or len(rng) != 2:
            self._error("range must be an array [begin, end] of two U64", f"{p}.range", "field_type", "§7.1")
            return None
        begin = self.u64(rng[0], f"{p}.range[0]", section="§7.1")
        end = self.u64(rng[1], f"{p}.range[1]", section="§7.1")
        if begin is None or end is None or oid is None:
            return None
        if not begin < end:
            self.p.add(DirectoryReferenceError, f"part range [{begin}, {end}) is empty or reversed (begin < end)",
                       json_path=f"{p}.range", section="§7.1", rule="part_range")
            return None
        return Part(oid, (begin, end))

    def uses(self, value: Any) -> list[Use]:
        path = "$.uses"
        if not isinstance(value, list):
            self._error(f"uses must be an array, not {_type_name(value)}", path, "field_type", "§8")
            return []
        out = []
        for i, entry in enumerate(value):
            p = f"{path}[{i}]"
            if not self.record(entry, p, USE, "a use", "§8"):
                continue
            parameter = self.ident(entry["parameter"], f"{p}.parameter", section="§8", what="parameter")
            input_ = self.ident(entry["input"], f"{p}.input", section="§8", what="input")
            ok = parameter is not None and input_ is not None
            policy = entry.get("activation_policy")
            if "activation_policy" in entry and policy not in ACTIVATION_POLICIES:
                self._error(f"activation_policy {policy!r} is not one of {', '.join(ACTIVATION_POLICIES)}",
                            f"{p}.activation_policy", "enum_value", "§8")
                ok = False
            auxiliaries = {}
            if "auxiliaries" in entry:
                ap = f"{p}.auxiliaries"
                for role, bv in self.id_keyed(entry["auxiliaries"], ap, "auxiliaries", "§8").items():
                    b = self.binding(bv, _key(ap, role))
                    if b is None or not is_valid_id(role):
                        ok = False
                    else:
                        auxiliaries[role] = b
            if ok:
                out.append(Use(parameter, input_, policy, auxiliaries))
        return out


def is_valid_id(value: Any) -> bool:
    """The ID rule (§1): a non-empty string without U+0000 that is valid UTF-8 (no lone surrogates)."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def part_name_problem(name: str, entry_name: str | None) -> str | None:
    """Why a continuation path breaks §3.3, or None: a non-empty file name without ``/``, ``\\``,
    U+0000, not ``.``/``..`` and not the entry's own name."""
    if not name:
        return "is empty"
    for ch, label in (("/", "'/'"), ("\\", "'\\'"), ("\x00", "U+0000")):
        if ch in name:
            return f"contains {label}"
    if name in (".", ".."):
        return "is '.' or '..'"
    if not is_valid_id(name):
        return "is not valid UTF-8"
    if entry_name is not None and name == entry_name:
        return "names the entry file itself"
    return None
