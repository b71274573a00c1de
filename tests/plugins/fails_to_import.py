"""A plugin whose module body raises: loading it must be a one-line producer error."""

raise ImportError("this plugin is deliberately broken")


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    pass
