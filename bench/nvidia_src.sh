#!/usr/bin/env bash
# vLLM's CUDA op (vllm-src:) and DeepGEMM's paged MQA logits (deepgemm-src:) built from source on an NVIDIA
# GPU, then compared and read: the figures of docs/nvidia.md. Usage: bench/nvidia_src.sh OUT [SOURCES]
# SOURCES (default .sources) holds vllm-0.33.0/ (the unpacked sdist) and DeepGEMM/ (a checkout with its
# cutlass and fmt submodules). Each step's output goes to OUT/<step>.txt; build times are in the logs.
# DeepGEMM's host library needs a compiler that links the shared libstdc++: run with CXX=c++ CC=gcc where
# the default CXX links it statically (fp8check refuses such a build, naming the fix).
set -u
out=${1:?usage: bench/nvidia_src.sh OUT [SOURCES]}
src=${2:-.sources}
mkdir -p "$out"
vllm="vllm-src:$src/vllm-0.33.0"
deepgemm="deepgemm-src:$src/DeepGEMM"
fp8check() { python3 -m fp8check "$@"; }
step() {  # step NAME COMMAND...: time it, keep its output and exit code
    local name=$1; shift
    local start=$SECONDS
    "$@" > "$out/$name.txt" 2>&1
    echo "$name: exit $? in $((SECONDS - start)) s" | tee -a "$out/steps.txt"
}

{ nvidia-smi -L; nvcc --version | tail -2; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } > "$out/env.txt" 2>&1
step doctor fp8check doctor

# DeepGEMM's extension builds while vLLM's op is compared (16 cores; each build is one translation unit).
step deepgemm-n1 fp8check parity --reader "$deepgemm" --layout linear --block 64 --next-n 1 --ctx 1024,4096 \
    --topk 512 --heads 64 --writers "reference,triton,$vllm" --device cuda &
deepgemm_build=$!

step vllm-ue8m0-reference fp8check compare --baseline reference --candidate "$vllm" --layout linear \
    --scale-fmt ue8m0 --device cuda --json "$out/vllm-ue8m0-reference.json"
step vllm-fp32-reference fp8check compare --baseline reference --candidate "$vllm" --layout linear \
    --scale-fmt fp32 --device cuda --json "$out/vllm-fp32-reference.json"
step vllm-fp32-triton fp8check compare --baseline triton --candidate "$vllm" --layout linear --scale-fmt fp32 --device cuda
step vllm-shuffle fp8check compare --baseline reference --candidate "$vllm" --layout shuffle --device cuda
step gate-vllm fp8check gate configs/gpu.toml -k "vllm-src and compare" --junit "$out/gate-vllm.xml"

wait $deepgemm_build
step deepgemm-n2 fp8check parity --reader "$deepgemm" --layout linear --block 64 --next-n 2 --ctx 1024,4096 \
    --topk 512 --heads 64 --writers "reference,triton,$vllm" --device cuda
step deepgemm-shuffle fp8check parity --reader "$deepgemm" --layout shuffle --block 64 --next-n 1 \
    --ctx 1024,4096 --topk 512 --heads 64 --writers reference --device cuda
