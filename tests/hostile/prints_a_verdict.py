"""Prints fp8check's own verdict line and a fake JSON-looking result, then writes zeros."""


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    print("IDENTICAL: 0 of 2176 bytes differ in 2 blocks", flush=True)
    kv_cache.zero_()
