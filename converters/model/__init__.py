"""The model side of a source: its config normalised to HF field names (``config_*``), the architecture
modules (``architectures/``), the components an architecture can carry (``components/``), and
``engine`` (open a source, find its architecture, bind its mappings)."""
