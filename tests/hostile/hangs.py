"""Writers that never finish."""

import time


def sleeps(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    time.sleep(3600)


def spins(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    while True:
        pass
