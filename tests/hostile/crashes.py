"""Writers that crash the process: abort, a segmentation fault, a kill of itself."""

import ctypes
import os
import signal


def abort(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    os.abort()


def segfault(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    ctypes.string_at(0)  # reads address 0


def kill_self(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    os.kill(os.getpid(), signal.SIGKILL)
