"""A plugin whose function cannot take the de-facto writer arguments."""


def writer(k, kv_cache):
    pass


unreadable = min  # a builtin whose signature Python cannot read
