"""The ``agnostophobia`` command line (also ``python -m agnostophobia``).

Each concept folder contributes its sub-commands through an ``add_commands(subparsers)``
function, so this file only wires them together. A sub-command parser sets
``func(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import traceback
import warnings

from agnostophobia import __version__
from agnostophobia._log import print_lines
from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning

# Modules that add sub-commands; each has add_commands(subparsers).
COMMAND_MODULES = (
    "agnostophobia.data.cli",
    "agnostophobia.experiments.cli",
    "agnostophobia.plotting.cli",
    "agnostophobia.deploy.cli",
)


class OneLineErrorParser(argparse.ArgumentParser):
    """Argument errors as one line naming the flag, pointing at ``--help`` (exit code 2),
    instead of argparse's multi-line usage block. Sub-command parsers inherit the class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            if action.option_strings:
                self._check_given_once(action, getattr(namespace, action.dest, None))
        return namespace, extras

    def _check_given_once(self, action: argparse.Action, values) -> None:
        """A flag that takes several values (repeatable, or ``nargs``) given one value twice is a
        typo or a script's bug, not a request to do one thing twice: refused in one line."""
        if not isinstance(values, list):
            return
        repeated = next((value for i, value in enumerate(values) if value in values[:i]), None)
        if repeated is not None:
            # a --set KEY=VALUE is parsed into (KEY, VALUE): shown as given
            shown = "=".join(map(str, repeated)) if isinstance(repeated, tuple) else str(repeated)
            self.error(f"{'/'.join(action.option_strings)} {shown}: given twice; give each value once")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="agnostophobia",
        description="Open-set recognition after 'Reducing Network Agnostophobia' (NeurIPS 2018).",
    )
    parser.add_argument("--version", action="version", version=f"agnostophobia {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_commands(sub)
    return parser


def _one_line_warning(show):
    """The library's own warnings as the CLI's one line, ``agnostophobia: warning: ...`` on
    stderr; every other warning as Python shows it (``show``)."""
    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, AgnostophobiaWarning):
            print(f"agnostophobia: warning: {' '.join(str(message).split())}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)
    return showwarning


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "before_loading", None):  # checks that need no library, model or image: at once
            args.before_loading(args)
        from agnostophobia.training.allocator import keep_freed_memory

        keep_freed_memory()  # training steps reuse their buffers instead of faulting pages in again
        with warnings.catch_warnings(), print_lines():  # the library logs; the command prints its lines
            warnings.showwarning = _one_line_warning(warnings.showwarning)
            warnings.simplefilter("always", AgnostophobiaWarning)  # each run of a command says it again
            return int(args.func(args) or 0)
    except (AgnostophobiaError, ValueError, OSError) as exc:  # OSError: permissions, a full disk
        if os.environ.get("AGNOSTOPHOBIA_DEBUG"):
            traceback.print_exc()
        # one line, whatever a library underneath put into the message
        message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"agnostophobia: error: {message}", file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as exc:
        if not out_of_memory(exc):
            raise
        if os.environ.get("AGNOSTOPHOBIA_DEBUG"):
            traceback.print_exc()
        # what no declared size foretold (a network's activations on huge images): one line, not a traceback
        print(f"agnostophobia: error: out of memory ({type(exc).__name__}: {_first_line(exc)}); what this command "
              f"holds at once did not fit: use smaller images (image_size), a smaller batch_size or fewer images "
              f"at a time", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"agnostophobia: interrupted (checkpoints written so far are kept; to continue, run "
              f"`{continuing_command(args, sys.argv[1:] if argv is None else argv)}`)", file=sys.stderr)
        return 130


class CommandFailed(AgnostophobiaError):
    """A command run with :func:`run_command` ended with a non-zero exit status."""


def run_command(*argv) -> None:
    """Run one ``agnostophobia`` command in this process, as the shell would, from a script or notebook.

    Parameters
    ----------
    *argv : str or os.PathLike
        The command and its arguments, e.g. ``run_command("train", "experiment.yaml", "--out", run)``;
        paths are converted with :class:`str`.

    Raises
    ------
    CommandFailed
        The command failed; what went wrong is already printed, as on the command line.

    Examples
    --------
    >>> from agnostophobia.cli import CommandFailed, run_command
    >>> run_command("--version")  # doctest: +ELLIPSIS
    agnostophobia ...
    >>> try:  # the reason goes to standard error, as on the command line
    ...     run_command("compare", "no-such-run")
    ... except CommandFailed as failed:
    ...     print(failed)
    agnostophobia compare no-such-run failed with exit status 1
    """
    argv = [str(arg) for arg in argv]
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's exits: --help, --version (0) and a bad argument (2)
        status = exc.code if isinstance(exc.code, int) else 1
    if status != 0:
        raise CommandFailed(f"{shlex.join(['agnostophobia', *argv])} failed with exit status {status}")


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says an allocation failed: a MemoryError, torch's OutOfMemoryError, or the
    RuntimeError torch's CPU allocator raises."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or (
        "can't allocate memory" in str(exc) or "not enough memory" in str(exc))


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")[:200]


#: Commands that continue an interrupted run only when told to (the others continue by themselves).
RESUMED_WITH_FLAG = ("train", "tune")


def continuing_command(args, argv) -> str:
    """The command line that continues an interrupted command: the same one, with ``--resume``
    where the command needs it to continue a run it started."""
    argv = [str(a) for a in argv]
    if getattr(args, "command", None) in RESUMED_WITH_FLAG and not getattr(args, "resume", False):
        argv.append("--resume")
    return shlex.join(["agnostophobia", *argv])


if __name__ == "__main__":
    raise SystemExit(main())
