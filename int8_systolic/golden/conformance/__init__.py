"""The spec-compliance kit's conformance vectors: a pack any hardware can run, and the harness that runs it.

* :mod:`.pack` writes the pack (``make conformance``): single-op models of every op of the
  golden op table with inputs, expected outputs checked against TFLite-Micro, the integer
  parameters each op's Prepare derives, and each MAC case's output under every
  requantization variant (:mod:`golden.variants`).
* :mod:`.harness` loads a pack and runs a design under test on it: per op and tag, how many
  cases match; each mismatch with its first element and golden stages; which variant the
  design's arithmetic is (:mod:`.report` renders it as Markdown, HTML and JSON).
* :mod:`.op_cases` and :mod:`.mac_cases` generate the cases (the test suite uses them too).
"""
