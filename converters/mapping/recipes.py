"""Recipes (``recipes/*.yaml``): how each role of a mapping is stored, as data.

A recipe maps the *roles* of the mapping files (``mlp.gate``, ``attention.query``, ``norm`` …) to a
storage choice; it never names tensors. Fields:

``name``, ``description``  the recipe id (recorded with the file's sha256 in every artifact) and one
                     paragraph.
``encoder``          default encoder of requantized objects (``absmax`` | ``mse``, codecs).
``activation_policy``  default ``uses[].activation_policy`` (``A16Only`` | ``AllowA8`` | ``AllowA4``, §8).
``exact_transcoding``  ``prefer`` (default): when the source type converts exactly into the chosen
                     format (layout spec §6: Q8_0 → q8_g32_fp16, BF16 → bf16 …) and no value transform
                     applies, transcode instead of decoding and re-encoding; ``never``: always re-encode.
``hadamard_seed``    seed of the ±1 sign vectors, required when a role sets ``hadamard``.
``roles``            role or pattern (``attention.*``; ``*`` is the default) → ``format`` (a codec
                     format, or ``exact``: keep every source value — transcode, or pass ``gguf_*``
                     blocks through; value transforms are computed in float64 and stored ``fp32``),
                     optional ``encoder``, ``fallback`` (the format used when the shape does not allow
                     ``format``, e.g. nvfp4 needs N % 128 == 0 and K % 64 == 0; recorded in provenance),
                     ``activation_policy``, ``hadamard`` (store ``W·D·H``, storage-layouts §7; only
                     where K % 1024 == 0, else recorded as not rotated), ``activation_input_divisor``
                     (a positive constant bound as the use's auxiliary, container §8; or ``source``: the
                     static input scale of a prequantized source, docs/recipes.md §Prequantized sources) and
                     ``when_inexact``: what happens to a tensor that cannot be transcoded exactly into
                     ``format`` — absent: it is requantized into ``format`` (error measured); ``refuse``:
                     the conversion stops before writing, naming the tensor and why; a format: that
                     format is used instead (transcoded when exact, else requantized) — e.g. a ternary
                     recipe keeps every ternary matrix bit for bit and refuses anything else.
                     Or ``same_as: <role>`` (with at most ``activation_policy``): no object of its own —
                     the parameter binds the same parts as the parameter of that role in the same scope,
                     which must read the same source tensor through the same transforms (container
                     §12.5: a DFlash ``attention/context_key`` sharing ``attention/key``'s representation;
                     without ``same_as`` it is an object of its own, possibly in another format). Its use
                     keeps its own activation policy.
                     The most specific entry wins: the exact role, then the longest pattern.
``prequantized``     ``requantize`` (default: a prequantized source tensor is stored as its role says —
                     transcoded when that format holds its values exactly, else requantized) or ``keep``:
                     it keeps its own quantized form whatever its role's format (docs/recipes.md
                     §Prequantized sources); ``prequantized_fallback`` the format of a kept tensor
                     whose only exact forms are float widenings (block FP8, per-channel INT8): one
                     format, or source kind (``CT_INT8`` …; ``*`` the default) → format.
``golden_budget``    ``{cosine, top1_agreement}``: how far the artifact's golden-forward logits may lie from the
                     source's — gate 7's cost question (docs/acceptance.md §Golden: two questions); recorded
                     in provenance; without it (or with ``--tensor-type`` overrides) the precision class's
                     default applies.
``groups``           group key (the object id under the members' common scope, e.g.
                     ``attention/query_key`` → ``text/layers/3/attention/query_key``) → ``members``
                     (roles, stacked by rows in this order; repeated parameters of one role, such as
                     experts, in mapping order), ``format``, optional ``encoder``, ``fallback``,
                     ``divisors`` (``one`` | ``per_member``: nvfp4 weight divisors, container §5.1),
                     ``when_inexact`` (as for roles, for the whole group).
                     Groups are tried in order; one forms in a scope only when all its member roles
                     are present there and none is already grouped. Expert banks are not recipe
                     groups: the mapping stacks a layer's experts (``bank``) and the role entry of the
                     experts chooses the bank's format — ``nvfp4`` with one divisor per expert
                     (``converters/pipeline/expert_bank.py``).

The file is validated completely (keys, formats, encoders, policies, roles known to some mapping)
before any checkpoint is opened; errors name ``file:line``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from converters import ROOT
from converters.errors import RecipeError
from converters.mapping.located import MAX_FILE_BYTES, Located, LocatedError, load_located
from ninfer_core import codecs

RECIPES_DIR = ROOT / "recipes"
POLICIES = ("A16Only", "AllowA8", "AllowA4")
EXACT = "exact"
REFUSE = "refuse"
SOURCE = "source"  # activation_input_divisor: the prequantized source's static input scale
PREQUANTIZED = ("requantize", "keep")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
ROLE_PATTERN_RE = re.compile(r"^(\*|[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?)$")
KIND_RE = re.compile(r"^(\*|[A-Z][A-Z0-9_]*)$")  # a prequantized source kind (docs/prequantized.md)
GROUP_KEY_RE = re.compile(r"^[a-z0-9_]+(/[a-z0-9_]+)+$")


@dataclass(frozen=True)
class RoleSpec:
    """The resolved storage choice of one role."""

    pattern: str
    format: str
    encoder: str
    fallback: str | None
    activation_policy: str
    hadamard: bool
    activation_input_divisor: float | str | None  # a constant, or SOURCE
    when_inexact: str | None = None
    same_as: str | None = None  # bind the same parts as this role's parameter (then ``format`` is "")

    def to_json(self) -> dict:
        if self.same_as:
            return {"same_as": self.same_as, "activation_policy": self.activation_policy}
        out = {"format": self.format, "encoder": self.encoder, "activation_policy": self.activation_policy}
        if self.fallback:
            out["fallback"] = self.fallback
        if self.when_inexact:
            out["when_inexact"] = self.when_inexact
        if self.hadamard:
            out["hadamard"] = True
        if self.activation_input_divisor is not None:
            out["activation_input_divisor"] = self.activation_input_divisor
        return out


@dataclass(frozen=True)
class GroupSpec:
    key: str
    members: tuple[str, ...]
    format: str
    encoder: str
    fallback: str | None
    divisors: str
    when_inexact: str | None = None

    def to_json(self) -> dict:
        out = {"members": list(self.members), "format": self.format, "encoder": self.encoder,
               "divisors": self.divisors}
        if self.fallback:
            out["fallback"] = self.fallback
        if self.when_inexact:
            out["when_inexact"] = self.when_inexact
        return out


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    file: str
    sha256: str
    encoder: str
    activation_policy: str
    exact_transcoding: str
    hadamard_seed: int | None
    roles: tuple[RoleSpec, ...]
    groups: tuple[GroupSpec, ...]
    overrides: tuple = ()  # converters.mapping.overrides.FormatOverride, from the command line (docs/recipes.md §Overrides)
    prequantized: str = "requantize"  # or "keep" (docs/recipes.md §Prequantized sources)
    prequantized_fallback: tuple[tuple[str, str], ...] = ()  # (source kind or "*", format): no quantized exact form
    golden_budget: tuple[float, float] | None = None  # (cosine, top-1): gate 7's cost budget (docs/recipes.md §Top level)

    def fallback_for(self, kind: str) -> str | None:
        """The ``prequantized_fallback`` format for a source ``kind`` (its own entry, else ``*``), or None."""
        table = dict(self.prequantized_fallback)
        return table.get(kind, table.get("*"))

    def with_overrides(self, overrides) -> Recipe:
        """This recipe with per-tensor format ``overrides`` applied on top."""
        from dataclasses import replace

        return replace(self, overrides=tuple(overrides))

    def role(self, role: str, stored_like: str | None = None) -> RoleSpec:
        """The most specific role entry for ``role``: exact, then longest pattern, then (for a role a mapping
        declares ``stored_like`` another) that role's entry, then ``*`` (docs/recipes.md §Roles)."""
        best, rank = None, -1
        for spec in self.roles:
            p = spec.pattern
            if p == role:
                return spec
            if p == "*":
                r = 0
            elif p.endswith(".*") and role.startswith(p[:-1]):
                r = len(p)
            else:
                continue
            if r > rank:
                best, rank = spec, r
        if stored_like is not None and rank <= 0:
            return self.role(stored_like)
        if best is None:
            raise RecipeError(f"recipe {self.name} has no entry for role {role!r}", file=self.file,
                              json_path="roles", rule="role_unresolved")
        return best

    def budget_json(self) -> dict | None:
        """``{"cosine", "top1_agreement"}`` of :attr:`golden_budget`, or None when the recipe states none."""
        if self.golden_budget is None:
            return None
        return {"cosine": self.golden_budget[0], "top1_agreement": self.golden_budget[1]}

    def to_json(self) -> dict:
        """What provenance records: name, file hash, and the resolved table."""
        return {"name": self.name, "sha256": self.sha256, "file": Path(self.file).name,
                "encoder": self.encoder, "activation_policy": self.activation_policy,
                "exact_transcoding": self.exact_transcoding, "hadamard_seed": self.hadamard_seed,
                "roles": {s.pattern: s.to_json() for s in self.roles},
                "groups": {g.key: g.to_json() for g in self.groups},
                **({"prequantized": self.prequantized, "prequantized_fallback": dict(self.prequantized_fallback)}
                   if self.prequantized != "requantize" else {}),
                **({"golden_budget": self.budget_json()} if self.golden_budget else {}),
                **({"overrides": [o.to_json() for o in self.overrides]} if self.overrides else {})}


# the recipe regression case list (``convert regress``) lives beside the recipes but is not one
REGRESSION_CASES = RECIPES_DIR / "regression.yaml"


def list_recipes() -> list[str]:
    """Names of the shipped recipes (every ``recipes/*.yaml`` but the regression case list)."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml") if p != REGRESSION_CASES)


def recipe_path(name_or_path: str | Path) -> Path:
    """A shipped recipe by name (``groupwise-int``) or a recipe file by path."""
    text = str(name_or_path)
    if "/" in text or text.endswith((".yaml", ".yml")):
        return Path(text)
    if text not in list_recipes():
        from converters.mapping.llamacpp_names import recipe_hint

        raise RecipeError(f"no recipe named {text!r} (shipped: {', '.join(list_recipes())}); pass a path to use "
                          f"your own file{recipe_hint(text)}", rule="recipe_unknown")
    return RECIPES_DIR / f"{text}.yaml"


def load_recipe(name_or_path: str | Path, *, known_roles: set[str] | None = None) -> Recipe:
    """Load and validate a recipe; ``known_roles`` defaults to the roles of every shipped mapping."""
    from converters.sources.fileio import read_bounded, resolved

    path = resolved(recipe_path(name_or_path))
    data = read_bounded(path, MAX_FILE_BYTES, what="recipe")
    roles = frozenset(known_roles) if known_roles is not None else None
    return _load(str(path), hashlib.sha256(data).hexdigest(), roles)


def _shipped_mappings() -> Iterator[Path]:
    """Every mapping file of every registered architecture, in architecture order."""
    from converters.mapping.schema import MAPPINGS_DIR
    from converters.model.architectures import ARCHITECTURE_MODULES, module

    for arch in ARCHITECTURE_MODULES:
        for file in module(arch).MAPPINGS.values():
            yield MAPPINGS_DIR / file


def all_mapping_roles() -> set[str]:
    """Roles named by every mapping file of every registered architecture (their parameters' ``role``, read
    without validating each whole file: :func:`converters.mapping.loader.parameter_roles`)."""
    from converters.mapping.loader import parameter_roles

    return set().union(*(parameter_roles(path) for path in _shipped_mappings()))


class KnownRoles:
    """The roles a recipe may name: ``roles`` when given, else those of every shipped mapping, read one
    mapping file at a time only until a check is answered — a recipe whose roles are all found early reads
    no further (docs/io-speed.md §Fixed costs); a role no mapping names reads them all, as before."""

    def __init__(self, roles: Iterable[str] | None = None) -> None:
        self._roles = set(roles) if roles is not None else set()
        self._unread: Iterator[Path] = iter(()) if roles is not None else _shipped_mappings()

    def any(self, test: Callable[[str], bool]) -> bool:
        """Whether some known role passes ``test``."""
        from converters.mapping.loader import parameter_roles

        if any(test(r) for r in self._roles):
            return True
        for path in self._unread:
            found = parameter_roles(path)
            self._roles |= found
            if any(test(r) for r in found):
                return True
        return False

    def __contains__(self, role: object) -> bool:
        return self.any(lambda r: r == role)


@cache
def _load(path: str, sha256: str, known_roles: frozenset[str] | None) -> Recipe:
    try:
        doc = load_located(path)
    except LocatedError as exc:
        raise RecipeError(str(exc), file=f"{path}:{exc.line}", rule="yaml") from None
    except UnicodeDecodeError:
        raise RecipeError("not UTF-8", file=path, rule="yaml") from None
    return _Validator(doc, sha256, KnownRoles(known_roles)).recipe()


class _Validator:
    TOP = {"name": True, "description": True, "roles": True, "encoder": False, "activation_policy": False,
           "exact_transcoding": False, "hadamard_seed": False, "groups": False, "prequantized": False,
           "prequantized_fallback": False, "golden_budget": False}
    ROLE = {"format": True, "encoder": False, "fallback": False, "activation_policy": False, "hadamard": False,
            "activation_input_divisor": False, "when_inexact": False, "same_as": False}
    GROUP = {"members": True, "format": True, "encoder": False, "fallback": False, "divisors": False,
             "when_inexact": False}

    def __init__(self, doc: Located, sha256: str, known_roles: KnownRoles) -> None:
        self.doc, self.sha256, self.known = doc, sha256, known_roles

    def fail(self, path: tuple, message: str, rule: str = "recipe_schema") -> RecipeError:
        return RecipeError(message, file=self.doc.where(path), json_path=".".join(map(str, path)) or None, rule=rule)

    def fields(self, value, path: tuple, spec: dict[str, bool], what: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"{what} must be a mapping")
        for k in value:
            if k not in spec:
                raise self.fail((*path, k), f"unknown key {k!r} in {what} (allowed: {', '.join(spec)})",
                                rule="unknown_key")
        for k, required in spec.items():
            if required and k not in value:
                raise self.fail(path, f"{what} lacks the required field {k!r}", rule="missing_field")
        return value

    def choice(self, value, path: tuple, allowed: tuple[str, ...], what: str) -> str:
        if value not in allowed:
            raise self.fail(path, f"{what} {value!r} is not one of {', '.join(allowed)}", rule=f"unknown_{what}")
        return value

    def fmt(self, value, path: tuple, *, allow_exact: bool) -> str:
        if allow_exact and value == EXACT:
            return value
        if not isinstance(value, str) or value not in codecs.FORMATS:
            extra = " or 'exact'" if allow_exact else ""
            raise self.fail(path, f"unknown format {value!r} (a codec format{extra})", rule="unknown_format")
        return value

    def when_inexact(self, spec: dict, path: tuple, fmt: str) -> str | None:
        value = spec.get("when_inexact")
        if value is None:
            return None
        if fmt == EXACT:
            raise self.fail((*path, "when_inexact"), "'exact' never requantizes; when_inexact does not apply")
        if value == REFUSE:
            return value
        return self.fmt(value, (*path, "when_inexact"), allow_exact=False)

    def recipe(self) -> Recipe:
        top = self.fields(self.doc.data, (), self.TOP, "the recipe")
        name = top["name"]
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise self.fail(("name",), f"recipe name {name!r} must be lower-case letters, digits, '.', '_', '-'")
        desc = top["description"]
        if not isinstance(desc, str) or not desc.strip():
            raise self.fail(("description",), "description must be a non-empty string")
        encoder = self.choice(top.get("encoder", "absmax"), ("encoder",), codecs.ENCODERS, "encoder")
        policy = self.choice(top.get("activation_policy", "A16Only"), ("activation_policy",), POLICIES,
                             "activation_policy")
        exact_tc = self.choice(top.get("exact_transcoding", "prefer"), ("exact_transcoding",), ("prefer", "never"),
                               "exact_transcoding")
        seed = top.get("hadamard_seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise self.fail(("hadamard_seed",), "hadamard_seed must be a non-negative integer")
        roles = self.roles(top["roles"], encoder, policy)
        if any(r.hadamard for r in roles) and seed is None:
            raise self.fail(("hadamard_seed",), "a role sets hadamard: true, so hadamard_seed is required",
                            rule="missing_field")
        groups = self.groups(top.get("groups", {}), encoder)
        prequantized = self.choice(top.get("prequantized", "requantize"), ("prequantized",), PREQUANTIZED,
                                   "prequantized")
        fallback = self.prequantized_fallback(top.get("prequantized_fallback"), prequantized)
        return Recipe(name, desc.strip(), self.doc.file, self.sha256, encoder, policy, exact_tc, seed, roles, groups,
                      prequantized=prequantized, prequantized_fallback=fallback,
                      golden_budget=self.golden_budget(top.get("golden_budget")))

    def golden_budget(self, value) -> tuple[float, float] | None:
        """``{cosine: c, top1_agreement: t}`` with ``0 < c <= 1`` and ``0 <= t <= 1`` (docs/recipes.md §Top level)."""
        if value is None:
            return None
        path = ("golden_budget",)
        spec = self.fields(value, path, {"cosine": True, "top1_agreement": True}, "golden_budget")
        out = []
        for key, low_open in (("cosine", True), ("top1_agreement", False)):
            v = spec[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or not (0 < v <= 1 if low_open else 0 <= v <= 1):
                raise self.fail((*path, key), f"golden_budget.{key} must be a number in "
                                f"{'(0, 1]' if low_open else '[0, 1]'}, got {v!r}", rule="golden_budget")
            out.append(float(v))
        return out[0], out[1]

    def prequantized_fallback(self, value, prequantized: str) -> tuple[tuple[str, str], ...]:
        """A format, or ``{source kind | "*": format}`` (docs/recipes.md §Top level)."""
        path = ("prequantized_fallback",)
        if value is None:
            return ()
        if prequantized != "keep":
            raise self.fail(path, "prequantized_fallback applies to prequantized: keep")
        if not isinstance(value, dict):
            return (("*", self.fmt(value, path, allow_exact=False)),)
        if not value:
            raise self.fail(path, "prequantized_fallback must name a format, or map source kinds to formats")
        out = []
        for kind, fmt in value.items():
            if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
                raise self.fail((*path, kind), f"{kind!r} is not a source kind (CT_INT8, FP8_BLOCK …) or '*'")
            out.append((kind, self.fmt(fmt, (*path, kind), allow_exact=False)))
        return tuple(out)

    def roles(self, value, encoder: str, policy: str) -> tuple[RoleSpec, ...]:
        if not isinstance(value, dict) or not value:
            raise self.fail(("roles",), "roles must be a non-empty mapping of role (or pattern): choice")
        out = []
        for pattern, spec in value.items():
            path = ("roles", pattern)
            if not isinstance(pattern, str) or not ROLE_PATTERN_RE.fullmatch(pattern):
                raise self.fail(path, f"{pattern!r} is not a role (mlp.gate) or pattern (mlp.*, *)")
            if pattern != "*" and not self.known.any(
                    lambda r, p=pattern: r == p or (p.endswith(".*") and r.startswith(p[:-1]))):
                raise self.fail(path, f"{pattern!r} matches no role of any mapping", rule="unknown_role")
            if isinstance(spec, dict) and "same_as" in spec:
                out.append(self.shared_role(pattern, spec, path, policy))
                continue
            spec = self.fields(spec, path, self.ROLE, f"role {pattern}")
            fmt = self.fmt(spec["format"], (*path, "format"), allow_exact=True)
            fallback = spec.get("fallback")
            if fallback is not None:
                if fmt == EXACT:
                    raise self.fail((*path, "fallback"), "'exact' has no fallback: it never requantizes")
                fallback = self.fmt(fallback, (*path, "fallback"), allow_exact=False)
            hadamard = spec.get("hadamard", False)
            if not isinstance(hadamard, bool):
                raise self.fail((*path, "hadamard"), "hadamard must be true or false")
            if hadamard and fmt == EXACT:
                raise self.fail((*path, "hadamard"), "'exact' keeps source values; it cannot rotate them")
            div = spec.get("activation_input_divisor")
            if div is not None and div != SOURCE and (isinstance(div, bool) or not isinstance(div, int | float)
                                                      or not math.isfinite(div) or div <= 0):
                raise self.fail((*path, "activation_input_divisor"), "activation_input_divisor must be a positive "
                                f"finite number or {SOURCE!r} (the prequantized source's static input scale)")
            out.append(RoleSpec(
                pattern=pattern, format=fmt,
                encoder=self.choice(spec.get("encoder", encoder), (*path, "encoder"), codecs.ENCODERS, "encoder"),
                fallback=fallback,
                activation_policy=self.choice(spec.get("activation_policy", policy), (*path, "activation_policy"),
                                              POLICIES, "activation_policy"),
                hadamard=hadamard, activation_input_divisor=div if div in (None, SOURCE) else float(div),
                when_inexact=self.when_inexact(spec, path, fmt)))
        return tuple(out)

    def shared_role(self, pattern: str, spec: dict, path: tuple, policy: str) -> RoleSpec:
        """``{same_as: role, activation_policy?}``: a role bound to another role's representation."""
        spec = self.fields(spec, path, {"same_as": True, "activation_policy": False}, f"role {pattern} (same_as)")
        target = spec["same_as"]
        if pattern.endswith("*") or target not in self.known or target == pattern:
            raise self.fail((*path, "same_as"), f"same_as {target!r}: a role ({pattern}, not a pattern) shares the "
                            "representation of another role of a mapping", rule="same_as")
        return RoleSpec(pattern=pattern, format="", encoder="", fallback=None,
                        activation_policy=self.choice(spec.get("activation_policy", policy),
                                                      (*path, "activation_policy"), POLICIES, "activation_policy"),
                        hadamard=False, activation_input_divisor=None, same_as=target)

    def groups(self, value, encoder: str) -> tuple[GroupSpec, ...]:
        if not isinstance(value, dict):
            raise self.fail(("groups",), "groups must be a mapping of group key: group")
        out = []
        for key, spec in value.items():
            path = ("groups", key)
            if not isinstance(key, str) or not GROUP_KEY_RE.fullmatch(key):
                raise self.fail(path, f"group key {key!r} must be a path like attention/query_key")
            spec = self.fields(spec, path, self.GROUP, f"group {key}")
            members = spec["members"]
            if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members) \
                    or len(set(members)) != len(members):
                raise self.fail((*path, "members"), "members must be a non-empty list of distinct roles")
            for m in members:
                if m not in self.known:
                    raise self.fail((*path, "members"), f"member {m!r} is not a role of any mapping",
                                    rule="unknown_role")
            fmt = self.fmt(spec["format"], (*path, "format"), allow_exact=False)
            fallback = spec.get("fallback")
            if fallback is not None:
                fallback = self.fmt(fallback, (*path, "fallback"), allow_exact=False)
            divisors = self.choice(spec.get("divisors", "one"), (*path, "divisors"), ("one", "per_member"), "divisors")
            if divisors == "per_member" and not codecs.codec_traits(fmt).divisors_per_member:
                allowed = ", ".join(codecs.formats_with(divisors_per_member=True))
                raise self.fail((*path, "divisors"), f"divisors: per_member is only meaningful for {allowed} (§5.1)")
            out.append(GroupSpec(key, tuple(members), fmt,
                                 self.choice(spec.get("encoder", encoder), (*path, "encoder"), codecs.ENCODERS,
                                             "encoder"),
                                 fallback, divisors, self.when_inexact(spec, path, fmt)))
        return tuple(out)
