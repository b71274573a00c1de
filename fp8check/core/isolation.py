"""Run code the user gave (a writer or a reader from a file) in a child process, so that nothing it does
except writing the bytes it was handed can reach the verdict.

The parent allocates every tensor the child may write (the poisoned cache, clones of the inputs, an
output buffer) and hands them over: on the CPU in shared memory to a fork of the warmed-up parent
(fast: no re-import, also where the parent has initialised CUDA); with CUDA by CUDA IPC to a fork of
fp8check's start server, a fresh interpreter that never touched CUDA (`_ServedChild`: never the user's
`__main__` again, as multiprocessing's spawn would run a script without a main guard). The child
imports `target` ("package.module:function", fp8check's own code), which loads the user's code by
name, runs it on the shared tensors and returns a small JSON-able dict, reported in frames (a marker, a
length, JSON; never a pickle a child could forge). The parent never blocks on the pipe and stops reading
once the direct child has ended (a grandchild that keeps the pipe open or floods it holds nothing); it
then kills the child's whole process group and re-points every tensor argument at a private copy of its
bytes, so that nothing left running can change them while they are judged. Everything the child can do
ends as a result (its bytes) or one line: exit, crash, kill, hang, out of memory. The golden-file key
(FP8CHECK_GOLDEN_KEY) is removed from the child's environment before any of the user's code is loaded.

Not a sandbox: the child runs as the same user and could reach the parent through the OS (signals,
/proc/PID/mem). It contains accidents and in-language tampering (sys.exit, monkeypatching fp8check,
freeing or re-pointing the tensors it was given, crashes); a hostile pull request needs a container.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import importlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass

from .errors import NotRunnableHere, UserError, first_line, one_line, raised_at

MAX_DRAIN_BYTES = 2 << 20  # read after the child ended: its last frame; a grandchild's flood is cut here
FRAME_MARK = b"\x00fp8check-report\x00"
MAX_FRAME_BYTES = 1 << 20  # a report is a few hundred bytes (a vllm-file writer's provenance a few KB)
POLL_S = 0.005  # how often the parent looks whether the child has ended
GOLDEN_KEY_VARIABLE = "FP8CHECK_GOLDEN_KEY"  # signs and verifies golden files (golden.trusted_key)
SECRETS = (GOLDEN_KEY_VARIABLE,)  # never in a child's environment: its code could sign a golden file
DEFAULT_TIMEOUT_S = 600.0  # generous: the Triton interpreter writes ~400 tokens/s on a 2-core CPU
START_LIMIT_S = 120.0  # the child's own start, before it reports its first phase
# What the child was doing, for the one line that says how it failed.
PHASES = {"starting": "while starting", "loading": "while loading its code", "writing": "while writing",
          "reading": "while reading"}

_CONN = None  # the file descriptor of the child's end of the pipe (set in the child only)


@dataclass(frozen=True)
class Limits:
    """How long a child may run, and how much memory it may add to what it inherits (None: what the
    machine has available when it starts). The memory limit is RLIMIT_AS, not applied to CUDA children,
    whose driver reserves huge address ranges."""

    timeout_s: float = DEFAULT_TIMEOUT_S  # run/options.py offers it as --timeout
    memory_bytes: int | None = None


class IsolatedError(UserError, RuntimeError):
    """A child that did not return normally: one line naming it and what it did. Exit 2, never a verdict.
    `child_traceback`: the user's traceback as the child formatted it ("" when there is none), for --debug."""

    def __init__(self, message: str, child_traceback: str = "", not_here: bool = False):
        super().__init__(message)
        self.child_traceback = child_traceback
        self.not_here = not_here  # the child says it raised NotRunnableHere: a claim the parent must verify


def phase(name: str) -> None:
    """Called by a child target: from now on, failures are reported as happening `PHASES[name]`."""
    if _CONN is not None:
        _send(_CONN, {"phase": name})


def _send(fd: int, message: dict) -> None:
    """One frame: marker, 8 hex digits of length, JSON, in one write. Text fields are cut (the message
    and where to 1000 characters, the traceback to its last 8000) so that an error's frame stays small;
    a frame of at most PIPE_BUF bytes (4096 on Linux) arrives whole even while others write the pipe."""
    cut = {"message": lambda t: t[:1000], "where": lambda t: t[:1000], "traceback": lambda t: t[-8000:]}
    message = {key: cut[key](str(value)) if key in cut else value for key, value in message.items()}
    payload = json.dumps(message).encode()
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"a report of {len(payload)} bytes; at most {MAX_FRAME_BYTES}")
    data = FRAME_MARK + b"%08x" % len(payload) + payload
    while data:
        data = data[os.write(fd, data):]


def parse_frames(data: bytes) -> tuple[list[dict], bytes]:
    """(the whole frames in `data`, the unparsed rest to keep). Bytes outside frames are dropped; so is a
    frame cut short by another marker (half a frame, then someone else's) or whose JSON is not a dict;
    the rest holds at most an unfinished frame."""
    messages = []
    while True:
        start = data.find(FRAME_MARK)
        if start < 0:  # keep a tail that may be the start of a marker
            return messages, data[-(len(FRAME_MARK) - 1):]
        body = data[start + len(FRAME_MARK):]
        if len(body) < 8:
            return messages, data[start:]
        try:
            length = int(body[:8], 16)
        except ValueError:
            data = body
            continue
        inner = body.find(FRAME_MARK, 8)  # JSON never holds a NUL: a marker inside means this frame was cut short
        if length > MAX_FRAME_BYTES or 0 <= inner < 8 + length:
            data = body if inner < 0 else body[inner:]
            continue
        if len(body) < 8 + length:
            return messages, data[start:]
        try:
            message = json.loads(body[8:8 + length])
        except ValueError:
            message = None
        if isinstance(message, dict):
            messages.append(message)
        data = body[8 + length:]


class _ServedChild:
    """A child the start server forked, answering what the parent asks of a multiprocessing.Process.

    The server (`python -m fp8check.core.isolated_child --serve`, one per parent process) imported torch
    once and never touches CUDA: a CUDA child costs a fork, not an interpreter's start (importing torch
    alone takes about 4 s on an H200 machine). Arguments go pickled with torch's reductions (CUDA tensors by
    IPC, CPU tensors by fd through multiprocessing's resource sharer, hence the authkey), with the parent's
    stderr; the server answers the pid, then the exit code."""

    _server: tuple | None = None  # (the server process, the parent's end of its socket)
    _last: "_ServedChild | None" = None  # the latest child: its exit code is read before the next request

    def __init__(self, pid: int, channel):
        self.pid, self._channel, self._code = pid, channel, None

    @property
    def exitcode(self) -> int | None:
        self._answer(0)
        return self._code

    def _answer(self, timeout: float | None) -> None:
        if self._code is None and select.select([self._channel], [], [], timeout)[0]:
            data = self._channel.recv(64)  # b"": the server itself ended; the child is reported killed
            self._code = int(data) if data else -signal.SIGKILL

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    def join(self, timeout: float) -> None:
        self._answer(timeout)

    @classmethod
    def channel(cls):
        """The parent's end of the running server's socket, starting the server when there is none."""
        if cls._server is not None and cls._server[0].poll() is None:
            return cls._server[1]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {key: value for key, value in os.environ.items() if key not in SECRETS}
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the modules this process imports
        cls._server = (subprocess.Popen([sys.executable, "-m", "fp8check.core.isolated_child", "--serve",
                                         str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env,
                                        stdin=subprocess.DEVNULL, start_new_session=True), ours)
        theirs.close()
        return ours

    @classmethod
    def start(cls, target: str, args: tuple, memory: int | None, send_fd: int) -> "_ServedChild":
        import multiprocessing
        from multiprocessing.reduction import ForkingPickler

        import torch.multiprocessing  # noqa: F401 - registers torch's tensor reductions with ForkingPickler

        payload = ForkingPickler.dumps((target, args, memory))
        env = {key: value for key, value in os.environ.items() if key not in SECRETS}
        head = json.dumps({"authkey": bytes(multiprocessing.current_process().authkey).hex(), "cwd": os.getcwd(),
                           "env": env}).encode()
        if cls._last is not None:  # answers come in order: pid, exit code
            cls._last._answer(None)
        channel = cls.channel()
        socket.send_fds(channel, [b"%08x" % len(head) + head + payload], [send_fd, 2])
        if not select.select([channel], [], [], START_LIMIT_S)[0]:
            raise IsolatedError(f"fp8check's start server did not fork a child within {START_LIMIT_S:g} s")
        pid = channel.recv(64)
        if not pid:
            cls._server = None
            raise IsolatedError("fp8check's start server ended before forking a child (run with --debug)")
        cls._last = cls(int(pid), channel)
        return cls._last


def serve(fd: int) -> None:
    """The start server's life (`python -m fp8check.core.isolated_child --serve FD`): for each request on
    socket FD, fork a child that runs it, answer its pid, wait for it, answer its exit code; end when the
    parent closes its end. It imports torch and Triton but never touches CUDA, so its forks can."""
    import multiprocessing
    import pickle

    import torch.multiprocessing  # noqa: F401 - torch's rebuild functions for the tensors in the pickle
    import triton  # noqa: F401 - what every child loads; importing it initialises no GPU

    channel = socket.socket(fileno=fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 1 << 24, 2)
        except OSError:
            return
        if not message or len(fds) != 2:
            return
        pid = os.fork()
        if pid == 0:  # the child: never returns into this loop
            code = 1
            try:
                channel.close()
                os.dup2(fds[1], 2)  # its output goes where the parent's stderr goes now, not the server's
                os.close(fds[1])
                size = int(message[:8], 16)
                head = json.loads(message[8:8 + size])
                os.chdir(head["cwd"])
                os.environ.clear()
                os.environ.update(head["env"])
                multiprocessing.current_process().authkey = bytes.fromhex(head["authkey"])
                target, args, memory = pickle.loads(message[8 + size:])
                _child_main(fds[0], target, args, memory, False)
                del args  # CUDA IPC: what a child still holds at its exit, its parent warns about at its own
                gc.collect()
                code = 0
            finally:
                os._exit(code)  # a forked child leaves as multiprocessing's do: no cleanup of the server's state
        for fd in fds:
            os.close(fd)
        channel.send(b"%d" % pid)
        _, status = os.waitpid(pid, 0)
        channel.send(b"%d" % os.waitstatus_to_exitcode(status))


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
    cuda = any(t.is_cuda for t in tensors)
    for tensor in tensors:
        if tensor.device.type == "cpu":
            tensor.share_memory_()
    # CUDA reserves far more address space than it uses
    memory = None if cuda else limits.memory_bytes or available_memory("cpu")
    for stream in (sys.stdout, sys.stderr):  # a fork would print the parent's pending output twice
        stream.flush()
    receive, send = os.pipe()
    try:
        if (start_method or ("server" if cuda else "fork")) == "fork":  # CUDA tensors cannot cross a fork
            ctx = torch.multiprocessing.get_context("fork")
            child = ctx.Process(target=_child_main, args=(send, target, args, memory, True), daemon=True)
            child.start()
        else:
            child = _ServedChild.start(target, args, memory, send)
    finally:
        os.close(send)
    try:
        status, where, snapshot = _collect(child, receive, limits.timeout_s, label,
                                           lambda: [t.clone() for t in tensors])
    finally:
        _end(child)
        os.close(receive)
    # the bytes judged are the ones there when the child reported: nothing it left running changes them later
    for i, tensor in enumerate(tensors):
        tensor.set_(snapshot[i] if snapshot is not None else tensor.clone())
    return _outcome(status, where, child.exitcode, label, limits)


def _collect(child, fd: int, timeout_s: float, label: str, snapshot) -> tuple[dict | None, str, list | None]:
    """(the child's final status or None, its last phase, `snapshot()` taken when the status came) once the
    child has ended; a hang is killed here. The child's end is seen by polling its exit status: its pipe
    and its sentinel stay open as long as anything it forked lives."""
    # The timeout counts from the child's first phase (loading the user's code): its start (the start
    # server's too, importing torch and Triton: seconds on a GPU machine) is fp8check's, with its own limit.
    deadline, started = time.monotonic() + max(timeout_s, START_LIMIT_S), False
    status, where, rest, taken, eof = None, "starting", b"", None, False
    while True:
        if where != "starting" and not started:
            started, deadline = True, time.monotonic() + timeout_s
        remaining = deadline - time.monotonic()
        if remaining <= 0 and not started:
            raise IsolatedError(f"{label}: its child process did not start within"
                                f" {max(timeout_s, START_LIMIT_S):g} s: killed")
        if remaining <= 0:
            raise IsolatedError(f"{label} did not finish within the {timeout_s:g} s timeout (--timeout)"
                                f" {PHASES.get(where, '')}: killed")
        alive, drained = child.exitcode is None, 0
        wait = min(remaining, POLL_S) if alive else 0  # alive: one read; ended: what is already there
        while not eof and drained < MAX_DRAIN_BYTES and select.select([fd], [], [], wait)[0]:
            data = os.read(fd, 1 << 16)
            eof, drained = not data, drained + len(data)
            messages, rest = parse_frames(rest + data)
            for message in messages:
                if "phase" in message:
                    where = str(message["phase"])
                elif "status" in message:
                    status, taken = message, snapshot()
            if alive:
                break
        if not alive:
            return status, where, taken
        if eof:
            time.sleep(min(remaining, POLL_S))


def _end(child) -> None:
    """Kill the child and everything it started (its process group), then reap it."""
    for kill in (lambda: os.killpg(child.pid, signal.SIGKILL), child.kill):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            kill()
    child.join(5)


def exited(label: str, code: object, where: str) -> str:
    """The line for code under test that called sys.exit(code) in phase `where`: from a child's report, and
    for --in-process runs, where the SystemExit is caught as it is raised."""
    returning = ", before returning" if where in ("writing", "reading") else ""
    return f"{label} called sys.exit({one_line(code)}) {PHASES.get(where, '')}{returning}"


def _outcome(status: dict | None, where: str, exitcode: int | None, label: str, limits: Limits) -> dict:
    during = PHASES.get(where, "")
    status = status or {}
    kind = status.get("status")
    if kind == "ok" and exitcode == 0:
        report = status.get("report")
        return report if isinstance(report, dict) else {}
    if kind == "exit":
        raise IsolatedError(exited(label, status.get("code"), where))
    text, where_raised = one_line(status.get("message", "")), one_line(status.get("where", ""))
    child_traceback = str(status.get("traceback", ""))
    if kind == "error":  # a ProducerError's line already says where
        raise IsolatedError(text or label, child_traceback, not_here=status.get("not_here") is True)
    if kind == "memory":
        what = (f"exceeded its memory limit of {limits.memory_bytes:,} bytes (--memory-limit)" if limits.memory_bytes
                else "ran out of memory")
        raise IsolatedError(f"{label} {what} {during}: {text}", child_traceback)
    if kind == "raised":
        at = f" at {where_raised}" if where_raised else ""
        raise IsolatedError(f"{label} raised {text} {during}{at}", child_traceback)
    if exitcode is not None and exitcode < 0:
        raise IsolatedError(f"{label} {_signal_words(-exitcode)} {during}")
    raise IsolatedError(f"{label} ended its process with exit code {exitcode} {during}, without returning")


def _signal_words(number: int) -> str:
    if number == signal.SIGKILL:
        return "was killed (SIGKILL: out of memory, or killed from outside)"
    if number == signal.SIGABRT:
        return "aborted (SIGABRT)"
    try:
        return f"crashed ({signal.Signals(number).name})"
    except ValueError:
        return f"crashed (signal {number})"


# ---- the child -----------------------------------------------------------------------------------------


def _child_main(fd: int, target: str, args: tuple, memory_bytes: int | None, forked: bool) -> None:
    """The child's whole life: own process group, limits, the target, one JSON status on pipe `fd`."""
    global _CONN
    _CONN = fd
    for name in SECRETS:
        os.environ.pop(name, None)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # so that the parent can kill whatever this child starts
    # what the user's code prints goes to stderr: stdout carries only fp8check's own report
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        os.dup2(2, 1)
    sys.stdout = sys.stderr
    # A crash of the code under test is reported by the parent from the exit signal, in one line; a
    # fault handler inherited from the parent (pytest enables one) would print a raw trace as well.
    faulthandler.disable()
    if forked:
        if _ServedChild._server is not None:  # the start server's socket is the parent's alone
            _ServedChild._server[1].close()
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
        keep = exc.code is None or isinstance(exc.code, int)
        status = {"status": "exit", "code": exc.code if keep else one_line(repr(str(exc.code)[:80]))}
    except UserError as exc:
        cause = exc.__cause__
        status = ({"status": "memory", "message": first_line(cause)} if _out_of_memory(cause)
                  else {"status": "error", "message": str(exc), "not_here": isinstance(exc, NotRunnableHere),
                        **_origin(cause)})
    except BaseException as exc:  # noqa: BLE001 - whatever the user's code raised, reported as one line
        status = {"status": "memory" if _out_of_memory(exc) else "raised", "message": first_line(exc), **_origin(exc)}
    _send(fd, status)
    os.close(fd)
    sys.stdout.flush()
    sys.stderr.flush()
    # returning ends the child as multiprocessing ends its workers; the parent judged the bytes as they were
    # at the report, and kills whatever the code under test left running


def _origin(exc: BaseException | None) -> dict:
    """Where the user's code raised `exc` (FILE:LINE: source) and its traceback, for the parent's line and --debug."""
    if exc is None:
        return {}
    where = raised_at(exc)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {**({"where": where} if where else {}), "traceback": text}


def _out_of_memory(exc: BaseException | None) -> bool:
    """MemoryError, or torch's allocator failing (a RuntimeError "can't allocate memory" / "out of memory")."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text


def _limit_address_space(extra: int) -> None:
    """RLIMIT_AS = what the child inherited + `extra` bytes: a runaway allocation fails as MemoryError
    in the child instead of waking the machine's OOM killer."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + extra, resource.RLIM_INFINITY))
