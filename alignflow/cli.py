"""The `alignflow` command line.

Each command lives in the package that owns it and exposes `configure(parser)` and
`run(args) -> int`; this module only dispatches, importing a command's module when that
command is used so `alignflow --help` stays fast. Errors of ours print one line
(`error: ...`); `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (module, one-line help). Keep sorted by workflow: run things, look at them, admin.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("alignflow.flows.cli.commands", "run a flow (built-in name or path/to/file.py:function)"),
    "resume": ("alignflow.flows.cli.commands", "resume a run (or --all resumable runs) with the current code"),
    "status": ("alignflow.flows.cli.commands", "show a run's tasks: state, attempts, duration, outputs"),
    "ls": ("alignflow.flows.cli.commands", "list runs with flow, status, start, end and progress"),
    "cancel": ("alignflow.flows.cli.commands", "cancel a run"),
    "delete": ("alignflow.flows.cli.commands", "delete a run and its data from the store"),
    "logs": ("alignflow.flows.cli.commands", "print a run's logs, or one task's"),
    "tick": ("alignflow.flows.cli.commands", "advance scheduled runs whose wake time has passed (for cron)"),
    "campaign": ("alignflow.flows.cli.campaign", "scheduled, gated training rounds: start | tick | status | pause | resume | stop"),
    "translate": ("alignflow.flows.cli.translate", "print the alignflow command (and YAML) for an OpenRLHF launch script"),
    "sql": ("alignflow.catalog.cli", "query the store with SQL (DuckDB); no query opens a shell"),
    "report": ("alignflow.catalog.cli", "write a run's HTML report: curves, samples, step times"),
    "gc": ("alignflow.artifacts.cli", "list (and with --delete remove) orphaned files in the store"),
    "models": ("alignflow.tasks.zoo.cli", "prepare offline models (e.g. smollm2-135m) and list them"),
    "export": ("alignflow.tasks.steps.export_cli", "copy a run's final model to a folder; --merge-lora folds a LoRA adapter into its base"),
    "demo": ("alignflow.flows.cli.demo", "the main job: a short GRPO run on the embedded defaults"),
}


def build_parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="alignflow",
        description="Train and align language models as durable flows on Ray.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks on errors")  # SUPPRESS: keeps a global --debug
        if name == command:
            _command_module(name).configure(name, sp)
    return parser


def _command_module(name: str):
    return importlib.import_module(COMMANDS[name][0])


# Commands that may load torch and start Ray: from the shell they end with a quick exit.
QUICK_EXIT = {"run", "resume", "tick", "demo"}
# Commands that load no model: no GPU probe (it imports the store, hence pyarrow: issue 46).
NO_MODELS = {"sql", "report"}


def _cpu_deepspeed() -> None:
    """DeepSpeed picks its accelerator once, at import, and without a GPU must be told
    "cpu" (else it warns on every model load); Ray workers started here inherit it."""
    from alignflow.tasks.plan.cluster import visible_gpus

    if not visible_gpus():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


def main(argv: list[str] | None = None) -> int:
    from alignflow.timeline import mark

    mark("cli start")
    from_shell = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), None)
    if command not in NO_MODELS:
        _cpu_deepspeed()
    if from_shell and command == "run":  # Ray's start overlaps the command's imports
        from alignflow.flows.cli.early import start_ray_if_asked

        start_ray_if_asked(argv[argv.index("run") + 1:])
    args = build_parser(command).parse_args(argv)
    if args.command is None:
        build_parser(None).print_help()
        return 0
    args.from_shell = from_shell  # a person (or script) at a shell: `run` says hello at once
    code = _dispatch(args)
    if from_shell and args.command in QUICK_EXIT:
        _quick_exit(code)
    return code


def _quick_exit(code: int) -> None:
    """Stop Ray and leave without the interpreter's teardown of torch and Ray's threads
    (seconds, for nothing: every result is committed and every file closed by now)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    from alignflow.timeline import mark

    mark("shutdown start")
    ray_local, ray = sys.modules.get("alignflow.flows.ray.local"), sys.modules.get("ray")
    if ray_local is not None:
        ray_local.stop(exiting=True)  # waits for an early start still under way
    elif ray is not None and getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()
    mark("exit")
    os._exit(code)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return int(_command_module(args.command).run(args.command, args) or 0)
    except KeyboardInterrupt:
        watch = sys.modules.get("alignflow.flows.ray.watch")  # Ray's node died: say which
        said = watch.line() if watch is not None else ""
        print(said or "interrupted", file=sys.stderr)
        return watch.EXIT_CODE if watch is not None and said else 130
    except Exception as exc:  # the one place that turns errors into exit codes
        from alignflow.artifacts.redact import redact
        from alignflow.errors import AlignflowError

        if args.debug:
            raise
        if isinstance(exc, AlignflowError):
            print(redact(f"error: {exc}"), file=sys.stderr)
            return 2 if exc.kind == "user" else 1
        print(redact(f"error: {type(exc).__name__}: {exc} (run with --debug for the "
                     "traceback)"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
