"""Calls sys.exit(0) while being imported: before any writer could run."""

import sys

sys.exit(0)


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    pass
