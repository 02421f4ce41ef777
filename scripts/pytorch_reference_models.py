"""GPT-2 and Llama forwards written plainly in PyTorch, for scripts/bench_distill_pytorch.py.

No transformers import: the weights are a dict of Hugging Face tensor names (without the
"transformer." / "model." prefix) -> tensors, read from a model folder's model.safetensors or made
at random for a named shape (as `hedgehog bench --shape`, engine/models/model_shapes.cpp):
  gpt2-small  GPT-2 124M: 12 layers, 12 heads of 64, 768 wide, MLP 3072 (gelu_new), vocab 50257,
              1024 positions, LayerNorm eps 1e-5, tied embeddings
  llama-1b    Llama-3.2-1B: 16 layers, 32 query heads over 8 kv heads of 64, 2048 wide, MLP 8192
              (SiLU gated), vocab 128256, rope theta 500000, RMSNorm eps 1e-5, tied embeddings.
              The llama3 rope scaling is left out (as the engine's shape does): it changes the
              rotary frequencies' values, not the cost.
Random weights: N(0, 0.02) for every matrix, zero biases, norms 1.

Precision (the engine's mixed precision, engine/config/compute_dtype.h): a model holds its weights
in whatever dtype they were given (bf16 for a frozen teacher, fp32 master weights for what trains)
and computes in `act` (float32 or bfloat16); every weight is cast to `act` where it is used (a
no-op when it already is). LayerNorm and RMSNorm compute in fp32. The attention itself is the
caller's: forward(ids, attend) calls attend(layer, q, k, v) with q, k, v [B, H, T, D] (Llama: RoPE
applied, the kv heads repeated to H, GQA) and takes y [B, H, T, D] back.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}

SHAPES = {  # Hugging Face config.json objects, as engine/models/model_shapes.cpp writes them
    "gpt2-small": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12,
                   "n_inner": 3072, "n_positions": 1024, "activation_function": "gelu_new",
                   "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True},
    "llama-1b": {"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
                 "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
                 "hidden_act": "silu", "tie_word_embeddings": True},
}


def read_safetensors(path):
    """name -> torch tensor (F32/F16/F64/I64/I32; BF16 widened by hand)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[base + start:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        out[name] = torch.from_numpy(array.copy().reshape(info["shape"]))
    return out


def shape_config(shape, positions):
    """The named shape's config; `positions`: at least what the benchmark reads."""
    config = dict(SHAPES[shape])
    key = "n_positions" if config["model_type"] == "gpt2" else "max_position_embeddings"
    config[key] = max(config[key], positions)
    return config


def load_folder(folder):
    """(config dict, weights: name -> fp32 CPU tensor without the "transformer."/"model." prefix)."""
    config = json.load(open(os.path.join(folder, "config.json")))
    weights = {}
    for name, tensor in read_safetensors(os.path.join(folder, "model.safetensors")).items():
        for prefix in ("transformer.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        weights[name] = tensor.float()
    return config, weights


def model_class(config):
    kind = config.get("model_type")
    if kind not in (Gpt2.model_type, Llama.model_type):
        raise SystemExit(f"model_type {kind!r}: this script knows gpt2 and llama")
    return Gpt2 if kind == Gpt2.model_type else Llama


def random_weights(config, device, dtype):
    """name -> tensor on `device` in `dtype` for the config: N(0, 0.02) matrices, zero biases, norms 1.
    Each tensor is drawn in fp32 and cast as it is made (the caller seeds torch)."""
    out = {}
    for name, shape in model_class(config).weight_shapes(config).items():
        if len(shape) >= 2:
            t = torch.empty(shape, device=device).normal_(0.0, 0.02)
        elif "ln_" in name or "norm" in name:
            t = torch.zeros(shape, device=device) if name.endswith(".bias") else torch.ones(shape, device=device)
        else:
            t = torch.zeros(shape, device=device)
        out[name] = t.to(dtype)
    return out


def make_model(config, weights, device, dtype, act, trainable, copy=False):
    """The model on `device` with its weights in `dtype` (bf16: a frozen teacher; fp32: master
    weights) computing in `act`; trainable: every weight requires a gradient; copy: never share a
    tensor with `weights` (which .to() does when device and dtype already match)."""
    cls = model_class(config)
    expected = cls.weight_shapes(config)
    held = {}
    for name, shape in expected.items():
        if name not in weights:
            raise SystemExit(f"missing weight {name!r}")
        t = weights[name]
        if list(t.shape) != list(shape):
            raise SystemExit(f"weight {name!r} is {list(t.shape)}, the config says {list(shape)}")
        held[name] = t.detach().to(device=device, dtype=dtype, copy=copy).requires_grad_(trainable)
    return cls(config, held, act)


def gelu_new(x):
    return F.gelu(x, approximate="tanh")  # GPT-2's gelu_new (the tanh form), as the engine


class Model:
    """Shared by Gpt2 and Llama: the weights, the compute dtype and the casts."""

    def __init__(self, config, weights, act):
        self.config, self.weights, self.act = config, weights, act

    def w(self, name):
        return self.weights[name].to(self.act)

    def parameters(self):
        return list(self.weights.values())


class Gpt2(Model):
    model_type = "gpt2"

    @staticmethod
    def dims(c):
        C, H = c["n_embd"], c["n_head"]
        return C, H, C // H, c["n_layer"]

    @staticmethod
    def weight_shapes(c):
        C, _, _, L = Gpt2.dims(c)
        inner = c.get("n_inner") or 4 * C
        if c.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
            raise SystemExit(f"activation {c['activation_function']!r}: this script has gelu_new only")
        if c.get("scale_attn_by_inverse_layer_idx") or c.get("reorder_and_upcast_attn"):
            raise SystemExit("scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported here")
        shapes = {"wte.weight": [c["vocab_size"], C], "wpe.weight": [c["n_positions"], C]}
        for l in range(L):  # Hugging Face's Conv1D layout: weight [in, out], y = x W + b
            p = f"h.{l}."
            shapes.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C], p + "attn.c_attn.weight": [C, 3 * C],
                           p + "attn.c_attn.bias": [3 * C], p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                           p + "ln_2.weight": [C], p + "ln_2.bias": [C], p + "mlp.c_fc.weight": [C, inner],
                           p + "mlp.c_fc.bias": [inner], p + "mlp.c_proj.weight": [inner, C], p + "mlp.c_proj.bias": [C]})
        shapes.update({"ln_f.weight": [C], "ln_f.bias": [C]})
        if not c.get("tie_word_embeddings", True):
            shapes["lm_head.weight"] = [c["vocab_size"], C]
        return shapes

    def heads(self):
        C, H, D, L = self.dims(self.config)
        return H, D, L

    def layer_norm(self, x, name):  # in fp32, back to the activations' dtype
        C = x.shape[-1]
        eps = self.config.get("layer_norm_epsilon", 1e-5)
        return F.layer_norm(x.float(), (C,), self.weights[name + ".weight"].float(), self.weights[name + ".bias"].float(),
                            eps).to(self.act)

    def linear(self, x, name):
        return x @ self.w(name + ".weight") + self.w(name + ".bias")

    def forward(self, ids, attend, logits=True):
        """ids [B, T] -> logits [B, T, V] (the activations' dtype), or the last layer's output."""
        B, T = ids.shape
        C, H, D, L = self.dims(self.config)
        x = (self.weights["wte.weight"][ids] + self.weights["wpe.weight"][:T]).to(self.act)  # [B, T, C]
        for l in range(L):
            p = f"h.{l}."
            qkv = self.linear(self.layer_norm(x, p + "ln_1"), p + "attn.c_attn")  # [B, T, 3C]
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=-1))  # [B, H, T, D]
            y = attend(l, q, k, v).transpose(1, 2).reshape(B, T, C)
            x = x + self.linear(y, p + "attn.c_proj")
            h = gelu_new(self.linear(self.layer_norm(x, p + "ln_2"), p + "mlp.c_fc"))
            x = x + self.linear(h, p + "mlp.c_proj")
        if not logits:
            return x
        h = self.layer_norm(x, "ln_f")
        return h @ self.w("lm_head.weight" if "lm_head.weight" in self.weights else "wte.weight").t()


class Llama(Model):
    model_type = "llama"

    @staticmethod
    def dims(c):
        C, H = c["hidden_size"], c["num_attention_heads"]
        return C, H, c.get("num_key_value_heads") or H, c.get("head_dim") or C // H, c["num_hidden_layers"]

    @staticmethod
    def weight_shapes(c):
        C, H, KV, D, L = Llama.dims(c)
        I = c["intermediate_size"]
        if c.get("hidden_act", "silu") != "silu":
            raise SystemExit(f"activation {c['hidden_act']!r}: this script has silu only")
        if c.get("rope_scaling"):
            raise SystemExit("rope_scaling is not supported here (the llama-1b shape leaves it out)")
        shapes = {"embed_tokens.weight": [c["vocab_size"], C]}
        for l in range(L):  # nn.Linear layout: weight [out, in]
            p = f"layers.{l}."
            shapes.update({p + "input_layernorm.weight": [C], p + "self_attn.q_proj.weight": [H * D, C],
                           p + "self_attn.k_proj.weight": [KV * D, C], p + "self_attn.v_proj.weight": [KV * D, C],
                           p + "self_attn.o_proj.weight": [C, H * D], p + "post_attention_layernorm.weight": [C],
                           p + "mlp.gate_proj.weight": [I, C], p + "mlp.up_proj.weight": [I, C],
                           p + "mlp.down_proj.weight": [C, I]})
            if c.get("attention_bias"):
                shapes.update({p + "self_attn.q_proj.bias": [H * D], p + "self_attn.k_proj.bias": [KV * D],
                               p + "self_attn.v_proj.bias": [KV * D], p + "self_attn.o_proj.bias": [C]})
            if c.get("mlp_bias"):
                shapes.update({p + "mlp.gate_proj.bias": [I], p + "mlp.up_proj.bias": [I], p + "mlp.down_proj.bias": [C]})
        shapes["norm.weight"] = [C]
        if not c.get("tie_word_embeddings", False):  # Hugging Face's LlamaConfig default: untied
            shapes["lm_head.weight"] = [c["vocab_size"], C]
        return shapes

    def heads(self):
        C, H, KV, D, L = self.dims(self.config)
        return H, D, L

    def rms_norm(self, x, name):
        """Hugging Face's LlamaRMSNorm: normalise in fp32, cast back, times the weight."""
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.config.get("rms_norm_eps", 1e-6))
        return self.w(name + ".weight") * normed.to(self.act)

    def linear(self, x, name):
        bias = name + ".bias"
        return F.linear(x, self.w(name + ".weight"), self.w(bias) if bias in self.weights else None)

    def rope(self, T, device):
        """cos, sin [T, D] in fp32 (as Hugging Face): the frequencies theta^(-2i/D), each twice."""
        D = self.dims(self.config)[3]
        theta = self.config.get("rope_theta", 10000.0)
        inv = (1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)).float().to(device)  # [D/2]
        freqs = torch.outer(torch.arange(T, dtype=torch.float32, device=device), inv)  # [T, D/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos(), emb.sin()

    @staticmethod
    def apply_rope(x, cos, sin):
        """Hugging Face's rotate_half: the first and second halves of each head are the pairs."""
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)

    def forward(self, ids, attend, logits=True):
        """ids [B, T] -> logits [B, T, V] (the activations' dtype), or the last layer's output."""
        B, T = ids.shape
        C, H, KV, D, L = self.dims(self.config)
        cos, sin = self.rope(T, ids.device)
        x = self.weights["embed_tokens.weight"][ids].to(self.act)  # [B, T, C]
        for l in range(L):
            p = f"layers.{l}."
            h = self.rms_norm(x, p + "input_layernorm")
            q = self.linear(h, p + "self_attn.q_proj").view(B, T, H, D).transpose(1, 2)  # [B, H, T, D]
            k = self.linear(h, p + "self_attn.k_proj").view(B, T, KV, D).transpose(1, 2)  # [B, KV, T, D]
            v = self.linear(h, p + "self_attn.v_proj").view(B, T, KV, D).transpose(1, 2)
            q, k = self.apply_rope(q, cos, sin), self.apply_rope(k, cos, sin)
            if H != KV:  # GQA: kv head j serves query heads j*g .. (j+1)*g - 1
                k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            y = attend(l, q, k, v).transpose(1, 2).reshape(B, T, H * D)
            x = x + self.linear(y, p + "self_attn.o_proj")
            m = self.rms_norm(x, p + "post_attention_layernorm")
            x = x + self.linear(F.silu(self.linear(m, p + "mlp.gate_proj")) * self.linear(m, p + "mlp.up_proj"),
                                p + "mlp.down_proj")
        if not logits:
            return x
        h = self.rms_norm(x, "norm")
        return h @ self.w("lm_head.weight" if "lm_head.weight" in self.weights else "embed_tokens.weight").t()


def softmax_attention(q, k, v):
    """Causal softmax attention, the plain way (for checks): weights in fp32, y in v's dtype."""
    T, D = q.shape[-2], q.shape[-1]
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(D)
    probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    return probs.to(v.dtype) @ v
