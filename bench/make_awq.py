#!/usr/bin/python3
"""Writes a synthetic AWQ (GEMM, 4-bit, group 128) checkpoint shaped like llama-2-7b: 32 decoder
layers of q/k/v/o [4096, 4096], gate/up [11008, 4096], down [4096, 11008] as qweight/qzeros/
scales, F16 embeddings, lm_head and norms, a config.json saying quant_method "awq".

The packed words are random (every 4-bit field is a valid code), the scales random f16 in
[0.001, 0.02]: a checkpoint with AWQ's exact layout and sizes, for timing conversions.

usage: bench/make_awq.py OUT_DIR [LAYERS]   (LAYERS: 32 by default; fewer for a quick run)

Then, e.g.:  time build/qtk convert OUT_DIR out.gguf --preset q4_k_m --threads 2
"""
import json
import os
import sys

import numpy as np

H, I, V, G = 4096, 11008, 32000, 128


def tensors(layers, rng):
    yield "model.embed_tokens.weight", (rng.standard_normal((V, H), np.float32) * 0.02).astype(np.float16)
    for l in range(layers):
        p = "model.layers.%d." % l
        for name, n, k in (("self_attn.q_proj", H, H), ("self_attn.k_proj", H, H), ("self_attn.v_proj", H, H),
                           ("self_attn.o_proj", H, H), ("mlp.gate_proj", I, H), ("mlp.up_proj", I, H),
                           ("mlp.down_proj", H, I)):
            yield p + name + ".qweight", rng.integers(-2**31, 2**31, (k, n // 8), dtype=np.int64).astype(np.int32)
            yield p + name + ".qzeros", rng.integers(-2**31, 2**31, (k // G, n // 8), dtype=np.int64).astype(np.int32)
            yield p + name + ".scales", rng.uniform(0.001, 0.02, (k // G, n)).astype(np.float16)
        yield p + "input_layernorm.weight", np.ones(H, np.float16)
        yield p + "post_attention_layernorm.weight", np.ones(H, np.float16)
    yield "model.norm.weight", np.ones(H, np.float16)
    yield "lm_head.weight", (rng.standard_normal((V, H), np.float32) * 0.02).astype(np.float16)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out, layers = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 32
    os.makedirs(out, exist_ok=True)
    # the header first: names, dtypes, shapes and offsets need only the shapes
    rng = np.random.default_rng(0)
    kinds = {np.dtype(np.int32): "I32", np.dtype(np.float16): "F16"}
    meta, off = {"__metadata__": {"format": "pt"}}, 0
    specs = []
    for l_name, shape, dt in shape_list(layers):
        n = int(np.prod(shape)) * np.dtype(dt).itemsize
        meta[l_name] = {"dtype": kinds[np.dtype(dt)], "shape": list(shape), "data_offsets": [off, off + n]}
        specs.append((l_name, n))
        off += n
    head = json.dumps(meta, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for (name, a), (sname, n) in zip(tensors(layers, rng), specs):
            assert name == sname and a.nbytes == n
            f.write(a.tobytes())
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": I, "num_hidden_layers": layers,
           "vocab_size": V, "torch_dtype": "float16",
           "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": G, "zero_point": True,
                                   "version": "gemm", "modules_to_not_convert": None}}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print("%s: %d layers, %.2f GB" % (out, layers, off / 1e9))


def shape_list(layers):
    out = [("model.embed_tokens.weight", (V, H), np.float16)]
    for l in range(layers):
        p = "model.layers.%d." % l
        for name, n, k in (("self_attn.q_proj", H, H), ("self_attn.k_proj", H, H), ("self_attn.v_proj", H, H),
                           ("self_attn.o_proj", H, H), ("mlp.gate_proj", I, H), ("mlp.up_proj", I, H),
                           ("mlp.down_proj", H, I)):
            out += [(p + name + ".qweight", (k, n // 8), np.int32), (p + name + ".qzeros", (k // G, n // 8), np.int32),
                    (p + name + ".scales", (k // G, n), np.float16)]
        out += [(p + "input_layernorm.weight", (H,), np.float16), (p + "post_attention_layernorm.weight", (H,), np.float16)]
    out += [("model.norm.weight", (H,), np.float16), ("lm_head.weight", (V, H), np.float16)]
    return out


if __name__ == "__main__":
    main()
