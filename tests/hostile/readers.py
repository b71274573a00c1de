"""Readers (vLLM's reader signature) that end, crash or hang the process instead of returning logits, and
one that says in which process it ran."""

import os
import sys
import time

import torch


def exit0(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    sys.exit(0)  # in-process this ended fp8check itself with exit code 0, no verdict printed


def hard_exit0(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    os._exit(0)


def abort(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    os.abort()


def sleeps(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    time.sleep(3600)


def spins(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    while True:
        pass


def pid(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    """float64 logits holding the id of the process it ran in."""
    rows = q_fp8.shape[0] * q_fp8.shape[1]
    return torch.full((rows, max_model_len), float(os.getpid()), dtype=torch.float64)


def claims_a_skip(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    from fp8check.core.errors import NotRunnableHere

    raise NotRunnableHere("this machine cannot run me (a reader's own claim)")
