"""What every component resolver shares (container §4.2): the :class:`Component` it returns, the
:class:`Context` it reads, the :class:`ComponentMissingError` it raises and the mapping file it binds with.
Kept apart from :mod:`converters.model.components` so the resolvers (:mod:`.mtp`, :mod:`.vision`,
:mod:`.drafter`) and the package that calls them do not import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from converters.errors import ConversionError
from converters.mapping import Mapping as MappingFile

SECTION = "§4.2"
TEXT = "text"


class ComponentMissingError(ConversionError):
    """A selected component that the given inputs do not provide (container §12.6: 所选组件缺失)."""


@dataclass
class Component:
    """One selected component, ready to bind: its mapping, ``Args``, and the record the artifact gets."""

    id: str
    architecture: ModuleType
    mapping: MappingFile
    args: object
    config: dict
    target: str | None = TEXT
    resources: list[tuple[str, bytes, dict]] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)

    def record(self) -> dict:
        """``components.<id>`` without resources (the planner adds the resource references)."""
        out = {"config": self.config}
        if self.target is not None:
            out["target"] = self.target
        return out


@dataclass
class Context:
    """What a component resolver may read: the text architecture and config, and every opened input."""

    text_architecture: ModuleType
    text_config: dict
    sources: Mapping[str, object]

    @property
    def main(self):
        return self.sources["main"]


def missing(component: str, message: str, *, file: str | None = None) -> ComponentMissingError:
    return ComponentMissingError(f"component {component} is not available: {message}", file=file,
                                 section=SECTION, rule="component_missing")


def mapping_for(architecture: ModuleType, component: str) -> MappingFile:
    from converters.mapping import load_mapping
    from converters.mapping.schema import MAPPINGS_DIR

    return load_mapping(Path(MAPPINGS_DIR) / architecture.MAPPINGS[component])
