"""Where the package's own files are, and where generated files go.

``PACKAGE`` is the installed package's folder (its data files: Verilator waivers, the mutation tool's
table), ``SOURCE`` the folder that holds it (a checkout's root, or site-packages), which simulator
processes put on their Python path. Generated files go under :func:`build_root`: ``build/`` in the
current directory (the checkout's root for ``make``), or ``$INT8_SYSTOLIC_BUILD``.
"""

import os
import pathlib

__all__ = ["PACKAGE", "SOURCE", "build_root"]

PACKAGE = pathlib.Path(__file__).resolve().parent
SOURCE = PACKAGE.parent


def build_root():
    """The folder generated files go under (``$INT8_SYSTOLIC_BUILD``, else ``build/`` here)."""
    return pathlib.Path(os.environ.get("INT8_SYSTOLIC_BUILD") or pathlib.Path.cwd() / "build").resolve()
