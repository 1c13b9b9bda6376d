"""ninfer-convert converters: source readers, inspection, mapping/recipe engine, architectures, gates, CLI."""

__version__ = "0.1.0"
