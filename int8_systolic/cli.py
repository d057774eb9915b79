"""The ``int8-systolic`` command: what a user runs, one subcommand each.

    int8-systolic check MODEL.tflite            a model against the spec's op table (golden.check)
    int8-systolic conformance make|run ...      the conformance vector pack and its harness
    int8-systolic run-model MODEL [options]     every MAC layer of a model on the simulated RTL
    int8-systolic export [options]              the IP's Verilog, register map and C header

``int8-systolic SUBCOMMAND --help`` gives each one's options.
"""

import importlib
import sys

__all__ = ["COMMANDS", "main"]

# subcommand -> (module whose main(argv) it runs, one line of help)
COMMANDS = {
    "check": ("int8_systolic.golden.check", "check a .tflite model against every clause of the spec's op table"),
    "conformance": ("int8_systolic.golden.conformance.__main__",
                    "make the conformance vector pack, or run a design under test on it"),
    "run-model": ("int8_systolic.sim.run_model",
                  "run a model with every MAC layer on the simulated RTL, compared with golden and TFLite-Micro"),
    "export": ("int8_systolic.hw.export", "write the IP's Verilog, its register map (Markdown) and C header"),
}


def usage():
    lines = ["usage: int8-systolic SUBCOMMAND [options]   (int8-systolic SUBCOMMAND --help for its options)", "",
             "subcommands:"]
    lines += [f"  {name:<12} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"int8-systolic: error: unknown subcommand {name!r}; one of {', '.join(COMMANDS)} (see --help)",
              file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return module.main(rest, prog=f"int8-systolic {name}")


if __name__ == "__main__":
    raise SystemExit(main())
