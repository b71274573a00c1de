"""A plugin whose writer raises while running (a two-line message: only the first is reported)."""


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    raise RuntimeError("deliberate failure inside the writer\nsecond line of detail")
