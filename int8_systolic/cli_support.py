"""What every command-line tool of the project shares: one-line errors, exit status 2, ``--debug``.

A tool's ``main(argv)`` is wrapped by :func:`command`: bad arguments, an unreadable or
invalid model, pack or file, or any other error ends the run with one line on stderr,
``<prog>: error: <what, naming the file, operator or parameter>``, and exit status 2; the
traceback is printed only when ``--debug`` is on the command line (then the exception
propagates). Its parser is :class:`ArgumentParser`, which reports a bad argument in that
same one line (argparse's own prints the usage block first) and accepts ``--debug``.
"""

import argparse
import functools
import inspect
import pathlib
import sys

__all__ = ["ArgumentParser", "command", "write_outputs"]

# Errors that describe the user's input or set-up (a file, a model, an argument, a missing tool); anything else
# is also reported in one line, but as an internal error to report.
_INPUT_ERRORS = (ValueError, OSError, RuntimeError)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with ``--debug`` and one-line errors (exit status 2)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true", help="show the full traceback of an error")

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def command(prog=None):
    """Decorate ``main(argv=None, ...)`` so that any exception becomes one line and exit status 2. ``prog`` names
    the tool in that line; by default, the default of ``main``'s own ``prog`` parameter."""
    def wrap(main):
        name_default = prog if prog is not None else inspect.signature(main).parameters["prog"].default

        @functools.wraps(main)
        def wrapper(argv=None, *args, **kwargs):
            argv = sys.argv[1:] if argv is None else list(argv)
            name = kwargs.get("prog", name_default)
            try:
                return main(argv, *args, **kwargs)
            except SystemExit as exc:   # argparse's --help and errors: their status, returned like any other
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
                    return 2
                return 0 if exc.code is None else exc.code
            except KeyboardInterrupt:
                if "--debug" in argv:
                    raise
                print(f"{name}: interrupted", file=sys.stderr)
                return 130
            except Exception as exc:
                if "--debug" in argv:
                    raise
                text = " ".join(str(exc).split()) or type(exc).__name__
                if not isinstance(exc, _INPUT_ERRORS):
                    text = f"internal error ({type(exc).__name__}: {text}); rerun with --debug and report it"
                print(f"{name}: error: {text}", file=sys.stderr)
                return 2
        return wrapper
    return wrap


def write_outputs(outputs):
    """Write each (path, text) of a generator tool (docs, C headers), making folders; print each path."""
    for path, text in outputs:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)
