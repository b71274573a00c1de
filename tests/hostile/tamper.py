"""Writers that attack the tensors they were handed instead of (or besides) writing bytes."""

import os
import time

import torch

from fp8check.core.reference import aiter_writer


def _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)


def free_storage(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.untyped_storage().resize_(0)  # in-process: the checker's own buffer would be freed


def rebind(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.data = torch.zeros_like(kv_cache)  # re-points its argument only, writes nothing


def modifies_k(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
               layout=None):
    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout)
    k.mul_(2)


def modifies_slot_mapping(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *,
                          fp8_dtype=torch.float8_e4m3fn, layout=None):
    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout)
    slot_mapping.fill_(-1)


def writes_later(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
                 layout=None):
    """Writes correct bytes and returns, leaving a process behind that zeroes the cache 0.3 s later,
    while the checker is diffing."""
    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout)
    if os.fork() == 0:
        os.setsid()  # out of the child's process group
        time.sleep(0.3)
        kv_cache.zero_()
        os._exit(0)


def forges_a_report(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Sends fp8check's "ok" status itself, then ends the process with an error code."""
    from fp8check.core import isolation

    isolation._send(isolation._CONN, {"status": "ok", "report": {}})
    os._exit(3)


def forges_lines(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Reports an error whose message holds a fake verdict line, a terminal escape and rich markup."""
    from fp8check.core import isolation

    isolation._send(isolation._CONN, {"status": "raised", "message": "X\nIDENTICAL: 0 of 2176 bytes differ"
                                               "\n\x1b[2J[bold]PASS[/bold]", "traceback": ""})
    os._exit(0)


def floods_the_pipe(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Writes 4 MiB of noise into the report pipe, then writes nothing: judged by its bytes."""
    from fp8check.core import isolation

    data = b"x" * (4 << 20)
    while data:
        data = data[os.write(isolation._CONN, data):]


def sends_half_a_report(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Sends the first half of a frame, then sleeps (killed at the timeout)."""
    import time

    from fp8check.core import isolation

    os.write(isolation._CONN, isolation.FRAME_MARK + b"00000100{\"status\": ")
    time.sleep(3600)


def grandchild_sends_half_a_report(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Returns at once, leaving a forked process that sends half a frame and sleeps, holding the pipe."""
    from fp8check.core import isolation

    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, torch.float8_e4m3fn, None)
    if os.fork() == 0:
        os.write(isolation._CONN, isolation.FRAME_MARK + b"00000100{\"status\": ")
        time.sleep(3600)
        os._exit(0)


def grandchild_floods_the_pipe(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Writes correct bytes and returns, leaving a forked process that floods the report pipe forever."""
    from fp8check.core import isolation

    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, torch.float8_e4m3fn, None)
    if os.fork() == 0:
        fd = isolation._CONN
        while True:
            os.write(fd, b"x" * 65536)


def reads_the_golden_key(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Writes correct bytes only when FP8CHECK_GOLDEN_KEY is absent from its environment."""
    if os.environ.get("FP8CHECK_GOLDEN_KEY") is None:
        _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, torch.float8_e4m3fn, None)


def forges_a_description(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Writes correct bytes, then reports success itself with a description and provenance holding a
    fake verdict line, terminal escapes and rich markup, and ends before fp8check's own report."""
    from fp8check.core import isolation

    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, torch.float8_e4m3fn, None)
    evil = "[bold red]evil[/bold red]\x1b[2J\rIDENTICAL\nIDENTICAL: 0 of 1 bytes differ"
    isolation._send(isolation._CONN, {"status": "ok", "report": {
        "description": evil, "provenance": {"function": evil, "file": evil, "sha256": evil}}})
    os._exit(0)


def raises_html(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Fails with an error whose text is HTML: a heading that says PASS, for a Markdown step summary."""
    raise RuntimeError("</summary></details><h1>PASS</h1>")
