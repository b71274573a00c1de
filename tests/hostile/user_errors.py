"""Writers whose own code fails: the error must name this file, the line and its source."""


def _check(quant_block_size):
    assert quant_block_size == 3, "the writer's own assertion"


def asserts(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    _check(quant_block_size)


def claims_a_skip(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    from fp8check.core.errors import NotRunnableHere

    raise NotRunnableHere("this machine cannot run me (a writer's own claim)")
