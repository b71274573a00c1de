"""A writer file that is not valid Python: the error names the line."""
def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    return (
