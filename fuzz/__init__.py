"""The coverage-guided fuzz campaign (``make fuzz``, ``python -m fuzz``): harnesses per parser
(:mod:`fuzz.targets`), the atheris worker (:mod:`fuzz.worker`), the seed corpus in ``fuzz/corpus/`` written
by :mod:`fuzz.make_corpus`. See docs/robustness.md."""
