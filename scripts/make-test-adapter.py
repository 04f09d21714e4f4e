#!/usr/bin/env python3
"""Writes a deterministic PEFT LoRA adapter for SmolLM2-135M-Instruct, for the tests (never committed).

    python scripts/make-test-adapter.py OUT_DIR [--seed 35] [--rank 8] [--alpha 16] [--b-std 0.1]

OUT_DIR gets adapter_config.json and adapter_model.safetensors, as PEFT writes them: every linear
layer of every block (q, k, v, o, gate, up, down), lora_A [r, in] and lora_B [out, r] in float32,
drawn from numpy's PCG64 with the given seed. PEFT initialises lora_B to zero (an adapter that
changes nothing); these are random on both sides, large enough to change greedy output. The
safetensors file is written by hand (an 8-byte header length, a JSON header, the raw tensors).
"""
import argparse
import json
import os
import struct

# One BLAS thread: numpy's OpenBLAS otherwise starts a thread per core, and on a 2-core machine
# running two test files those threads spin waiting for each other (bert_reference.py over the 71
# fidelity sentences: 33 s of CPU with them, 6.5 s with one).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS = 576, 1536, 30, 9, 3
HEAD_DIM = HIDDEN // HEADS
SHAPES = {  # (in, out) of each linear layer, as Hugging Face's LlamaForCausalLM names them
    "self_attn.q_proj": (HIDDEN, HEADS * HEAD_DIM),
    "self_attn.k_proj": (HIDDEN, KV_HEADS * HEAD_DIM),
    "self_attn.v_proj": (HIDDEN, KV_HEADS * HEAD_DIM),
    "self_attn.o_proj": (HEADS * HEAD_DIM, HIDDEN),
    "mlp.gate_proj": (HIDDEN, INTERMEDIATE),
    "mlp.up_proj": (HIDDEN, INTERMEDIATE),
    "mlp.down_proj": (INTERMEDIATE, HIDDEN),
}


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=float, default=16)
    parser.add_argument("--b-std", type=float, default=0.1)
    parser.add_argument("--base", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    args = parser.parse_args()
    rng = np.random.Generator(np.random.PCG64(args.seed))
    tensors = {}
    for layer in range(LAYERS):
        for module, (n_in, n_out) in SHAPES.items():
            stem = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{stem}.lora_A.weight"] = rng.standard_normal((args.rank, n_in), dtype=np.float32) / np.float32(np.sqrt(n_in))
            tensors[f"{stem}.lora_B.weight"] = rng.standard_normal((n_out, args.rank), dtype=np.float32) * np.float32(args.b_std)
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "adapter_model.safetensors"), tensors)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": args.base,
        "r": args.rank,
        "lora_alpha": args.alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "target_modules": sorted(name.split(".")[-1] for name in SHAPES),
        "inference_mode": True,
    }
    with open(os.path.join(args.out, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
