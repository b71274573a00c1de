"""A progress bar for long interpreter runs: one step per Triton program (the CLI owns the console)."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

MIN_PROGRAMS = 64  # smaller grids finish in well under a second (about 2.4 ms per program, PERFORMANCE.md)


@contextlib.contextmanager
def interpreter_progress(console: Console):
    """Within the block, each interpreted kernel launch of more than MIN_PROGRAMS programs shows a bar."""
    from ..triton_cpu.interpreter import program_listener

    with Progress(TextColumn("Triton interpreter"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as progress:
        state = {"task": None}

        def listener(done: int, total: int) -> None:
            if total <= MIN_PROGRAMS:
                return
            if done == 1 or state["task"] is None:
                if state["task"] is not None:
                    progress.remove_task(state["task"])
                state["task"] = progress.add_task("programs", total=total)
            progress.update(state["task"], completed=done)

        with program_listener(listener):
            yield
