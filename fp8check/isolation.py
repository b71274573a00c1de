"""Run code the user gave (a writer or a reader from a file) in a child process, so that nothing it does
except writing the bytes it was handed can reach the verdict.

The parent allocates every tensor the child may write (the poisoned cache, clones of the inputs, an
output buffer) and hands them over: on the CPU in shared memory to a fork of the warmed-up parent
(fast: no re-import); with CUDA by CUDA IPC to a spawned process (CUDA cannot be forked). The child
imports `target` ("package.module:function", fp8check's own code), which loads the user's code by
name, runs it on the shared tensors and returns a small JSON-able dict. The parent reads only JSON from
the pipe (never a pickle a child could forge), waits at most `Limits.timeout_s`, kills the child's
whole process group afterwards, and re-points every tensor argument at a private copy of its bytes,
so that nothing left running can change them while they are judged. Everything the child can do
ends as a result (its bytes) or one line: exit, crash, kill, hang, out of memory.

Not a sandbox: the child runs as the same user and could reach the parent through the OS (signals,
/proc/PID/mem). It contains accidents and in-language tampering (sys.exit, monkeypatching fp8check,
freeing or re-pointing the tensors it was given, crashes); a hostile pull request needs a container.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass

from .errors import UserError, first_line

DEFAULT_TIMEOUT_S = 600.0  # generous: the Triton interpreter writes ~400 tokens/s on a 2-core CPU
MAX_REPORT_BYTES = 1 << 20  # a child's report is a few hundred bytes; more is refused unread
POLL_S = 0.005  # how often the parent looks whether the child has ended

# What the child was doing, for the one line that says how it failed.
PHASES = {
    "starting": "while starting",
    "loading": "while loading its code",
    "writing": "while writing",
    "reading": "while reading",
}

_CONN = None  # the child's end of the pipe (set in the child only)


@dataclass(frozen=True)
class Limits:
    """How long a child may run, and how much memory it may add to what it inherits (None: what the
    machine has available when it starts). The memory limit is RLIMIT_AS, not applied to CUDA children,
    whose driver reserves huge address ranges."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int | None = None


class IsolatedError(UserError, RuntimeError):
    """A child that did not return normally: one line naming it and what it did. Exit 2, never a verdict."""


def phase(name: str) -> None:
    """Called by a child target: from now on, failures are reported as happening `PHASES[name]`."""
    if _CONN is not None:
        _CONN.send_bytes(json.dumps({"phase": name}).encode())


def _start_method(tensors: list[torch.Tensor]) -> str:
    import torch

    cuda = any(t.is_cuda for t in tensors) or (torch.cuda.is_available() and torch.cuda.is_initialized())
    return "spawn" if cuda else "fork"


def run_isolated(target: str, args: tuple, *, limits: Limits, label: str, start_method: str | None = None) -> dict:
    """Call `target(*args)` in a child process and return the dict it returned.

    Tensors among `args` are shared with the child (CPU: moved to shared memory; CUDA: IPC) and written
    in place; after the child ends each is re-pointed (Tensor.set_) at a private copy of its bytes.
    Pass base tensors, not views you keep elsewhere. Any failure raises IsolatedError with one line
    starting with `label` (e.g. "producer 'file:w.py:f'"), or the child's own UserError message.
    """
    import torch  # here, not at the top: the CLI imports DEFAULT_TIMEOUT_S at startup

    from .cache import available_memory

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    method = start_method or _start_method(tensors)
    for tensor in tensors:
        if tensor.device.type == "cpu":
            tensor.share_memory_()
    memory = None
    if not any(t.is_cuda for t in tensors):  # CUDA reserves far more address space than it uses
        memory = limits.memory_bytes or available_memory("cpu")
    ctx = torch.multiprocessing.get_context(method)
    receive, send = ctx.Pipe(duplex=False)
    for stream in (sys.stdout, sys.stderr):  # a fork would print the parent's pending output twice
        stream.flush()
    child = ctx.Process(target=_child_main, args=(send, target, args, memory, method == "fork"), daemon=True)
    child.start()
    send.close()
    try:
        status, where = _collect(child, receive, limits.timeout_s, label)
    finally:
        _end(child)
        receive.close()
    for tensor in tensors:
        tensor.set_(tensor.clone())
    return _outcome(status, where, child.exitcode, label, limits)


def _collect(child, receive, timeout_s: float, label: str) -> tuple[dict | None, str]:
    """(the child's final status or None, its last phase) once it has ended; a hang is killed here.

    The child's end is seen by polling its exit status: its pipe and its sentinel stay open as long as
    anything it forked lives, so neither says when the child itself is gone."""
    deadline = time.monotonic() + timeout_s
    status, where, eof = None, "starting", False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise IsolatedError(f"{label} did not finish within the {timeout_s:g} s timeout (--timeout)"
                                f" {PHASES.get(where, '')}: killed")
        if not eof and receive.poll(min(remaining, POLL_S)):
            try:
                message = _read(receive, label)
            except EOFError:  # every writer of the pipe is gone
                eof = True
                continue
            where, status = (str(message["phase"]), status) if "phase" in message else (where, message)
            continue
        if not child.is_alive():
            while not eof and receive.poll(0):  # what it sent just before it ended
                try:
                    message = _read(receive, label)
                except EOFError:
                    break
                where, status = (str(message["phase"]), status) if "phase" in message else (where, message)
            return status, where
        if eof:
            time.sleep(min(remaining, POLL_S))


def _read(receive, label: str) -> dict:
    try:
        data = receive.recv_bytes(MAX_REPORT_BYTES)
    except OSError:
        raise IsolatedError(f"{label} sent more than {MAX_REPORT_BYTES} bytes of report; refused") from None
    try:
        message = json.loads(data)
    except ValueError:
        raise IsolatedError(f"{label} sent an unreadable report") from None
    if not isinstance(message, dict):
        raise IsolatedError(f"{label} sent an unreadable report")
    return message


def _end(child) -> None:
    """Kill the child and everything it started (its process group), then reap it."""
    for kill in (lambda: os.killpg(child.pid, signal.SIGKILL), child.kill):
        try:
            kill()
        except (OSError, ValueError, AttributeError):
            pass
    child.join(5)


def _outcome(status: dict | None, where: str, exitcode: int | None, label: str, limits: Limits) -> dict:
    during = PHASES.get(where, "")
    if status is not None and status.get("status") == "ok" and exitcode == 0:
        report = status.get("report")
        return report if isinstance(report, dict) else {}
    kind = status.get("status") if status else None
    if kind == "exit":
        returning = ", before returning" if where in ("writing", "reading") else ""
        raise IsolatedError(f"{label} called sys.exit({status.get('code')}) {during}{returning}")
    if kind == "error":
        raise IsolatedError(str(status.get("message", "")).splitlines()[0] if status.get("message") else label)
    if kind == "memory":
        what = (f"exceeded its memory limit of {limits.memory_bytes:,} bytes (--memory-limit)" if limits.memory_bytes
                else "ran out of memory")
        raise IsolatedError(f"{label} {what} {during}: {status.get('message', '')}")
    if kind == "raised":
        raise IsolatedError(f"{label} raised {status.get('message', '')} {during}")
    if exitcode is not None and exitcode < 0:
        raise IsolatedError(f"{label} {_signal_words(-exitcode)} {during}")
    raise IsolatedError(f"{label} ended its process with exit code {exitcode} {during}, without returning")


def _signal_words(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    if number == signal.SIGKILL:
        return "was killed (SIGKILL: out of memory, or killed from outside)"
    if number == signal.SIGABRT:
        return "aborted (SIGABRT)"
    return f"crashed ({name})"


# ---- the child -----------------------------------------------------------------------------------------


def _child_main(conn, target: str, args: tuple, memory_bytes: int | None, forked: bool) -> None:
    """The child's whole life: own process group, limits, the target, one JSON status, then _exit."""
    global _CONN
    _CONN = conn
    try:
        os.setpgid(0, 0)  # so that the parent can kill whatever this child starts
    except OSError:
        pass
    try:  # what the user's code prints goes to stderr: stdout carries only fp8check's own report
        sys.stdout.flush()
        os.dup2(2, 1)
    except (OSError, ValueError):
        pass
    sys.stdout = sys.stderr
    if forked:
        # libgomp is not fork-safe: measured, a forked child's first parallel torch op hangs forever
        # when the parent had used its OpenMP threads. One thread avoids the pool.
        import torch

        torch.set_num_threads(1)
    if memory_bytes:
        _limit_address_space(memory_bytes)
    try:
        module_name, _, function = target.partition(":")
        status = {"status": "ok", "report": getattr(importlib.import_module(module_name), function)(*args)}
        json.dumps(status)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) or exc.code is None else repr(str(exc.code)[:80])
        status = {"status": "exit", "code": code}
    except UserError as exc:
        cause = exc.__cause__
        status = ({"status": "memory", "message": first_line(cause)} if _out_of_memory(cause)
                  else {"status": "error", "message": str(exc)})
    except BaseException as exc:  # noqa: BLE001 - whatever the user's code raised, reported as one line
        status = {"status": "memory" if _out_of_memory(exc) else "raised", "message": first_line(exc)}
    try:
        conn.send_bytes(json.dumps(status).encode())
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def _out_of_memory(exc: BaseException | None) -> bool:
    """MemoryError, or torch's allocator failing (a RuntimeError "can't allocate memory" / "out of memory")."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text


def _limit_address_space(extra: int) -> None:
    """RLIMIT_AS = what the child inherited + `extra` bytes: a runaway allocation fails as MemoryError
    in the child instead of waking the machine's OOM killer."""
    try:
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + extra, resource.RLIM_INFINITY))
    except (OSError, ValueError, StopIteration):
        pass
