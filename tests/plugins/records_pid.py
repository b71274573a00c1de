"""The reference writer, which also appends the id of the process it runs in to $FP8CHECK_TEST_PID_FILE:
where a writer from a file runs (a child process, or fp8check's own with --in-process) is then visible."""

import os

from fp8check.core.reference import aiter_writer


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, **kwargs):
    with open(os.environ["FP8CHECK_TEST_PID_FILE"], "a") as f:
        f.write(f"{os.getpid()}\n")
    return aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, **kwargs)
