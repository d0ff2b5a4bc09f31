"""Hugging Face transformers integration: a KV cache stored as veloxquant codes.

    from veloxquant.transformers import VeloxCache
    out = model.generate(ids, max_new_tokens=64,
                         past_key_values=VeloxCache(kv="kv4", config=model.config))

VeloxCache is a transformers ``Cache`` whose layers keep their keys and values only as veloxquant
codes, in a ``veloxquant.Cache`` (the library's compressed cache, one per sequence of the batch)
of the named KV config: "kv4", "fp16", "turboquant_mse-3", "kivi-4:turboquant_mse-4+g64", any
name the CLI's ``--kv`` takes, resolved by the library. Each ``update`` appends the new
post-RoPE keys and values to the codes and returns the layer's keys and values decoded from them
(attention on decoded tiles: the model's own attention function runs on what the codes hold, so
the outputs show exactly the quality of the codes; no full-precision copy is kept between
steps). Works with the decoder-only models whose attention calls ``past_key_values.update`` (Llama,
Qwen2, Mistral, ...; no sliding-window layers), greedy or sampled generation, batch size >= 1.
Not supported: beam search (reorder_cache), assisted decoding (crop), torch.compile.

Needs torch and transformers (``pip install ./python[transformers]``); the rest of the package
never imports them. The cache does not see the queries: configs whose key widths or scales
learn from queries (kv5..kv2) weigh every channel equally (veloxquant.h, key_channel_bits).
"""
import numpy as np
import torch
from transformers.cache_utils import Cache

from .core import Cache as _VqCache
from .core import check_kv_name, kv_bytes

try:  # transformers >= 4.56: a Cache is a list of layer objects
    from transformers.cache_utils import CacheLayerMixin as _LayerBase
except ImportError:  # older transformers: the Cache subclass implements everything itself
    _LayerBase = None

__all__ = ["VeloxCache"]


class VeloxCache(Cache):
    """A transformers Cache whose keys and values are veloxquant codes.

    VeloxCache(kv="kv4", config=None, n_layers=None, max_tokens=None, threads=0): kv is a KV
    config name (the CLI's --kv names); the model's config (or n_layers) gives the number of
    layers, which config names with per-layer parts need; head count and head_dim come from the
    first update. max_tokens bounds each sequence (default: config.max_position_embeddings, else
    4096). threads: OpenMP threads of the library (0 = its default). Use one VeloxCache per
    generate call (or reset() it)."""

    is_compileable = False

    def __init__(self, kv="kv4", config=None, n_layers=None, max_tokens=None, threads=0):
        if n_layers is None:
            if config is None:
                raise ValueError("VeloxCache needs the model's config (config=model.config) or "
                                 "n_layers")
            cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
            n_layers = cfg.num_hidden_layers
        if max_tokens is None:
            max_tokens = getattr(config, "max_position_embeddings", None) or 4096
        self.kv = kv
        self.n_layers, self.max_tokens, self.threads = int(n_layers), int(max_tokens), threads
        self._caches = []  # one veloxquant.Cache per sequence of the batch
        self._n = [0] * self.n_layers  # tokens per layer
        check_kv_name(kv)  # an unknown name fails here (veloxquant.InvalidArgumentError)
        if _LayerBase is not None:
            super().__init__(layers=[_VeloxLayer(self, i) for i in range(self.n_layers)])
        else:
            super().__init__()

    # ---- what the model calls ----

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None, *args, **kwargs):
        """Appends key_states / value_states (batch, kv_heads, new_tokens, head_dim) to layer
        layer_idx's codes and returns the layer's keys and values decoded from the codes, each
        (batch, kv_heads, tokens, head_dim) in the dtype and device of key_states."""
        b, h, s, d = key_states.shape
        if not self._caches:
            self._caches = [_VqCache(self.n_layers, h, d, kv=self.kv, max_tokens=self.max_tokens,
                                     threads=self.threads) for _ in range(b)]
        if len(self._caches) != b:
            raise ValueError(f"VeloxCache: batch of {b} after {len(self._caches)}")
        k = key_states.detach().to("cpu", torch.float32).transpose(1, 2).contiguous().numpy()
        v = value_states.detach().to("cpu", torch.float32).transpose(1, 2).contiguous().numpy()
        ks, vs = [], []
        for i, c in enumerate(self._caches):
            c.append(layer_idx, k[i], v[i])
            kd, vd = c.read(layer_idx)
            ks.append(kd)
            vs.append(vd)
        self._n[layer_idx] += s
        kt = torch.from_numpy(np.stack(ks)).transpose(1, 2)
        vt = torch.from_numpy(np.stack(vs)).transpose(1, 2)
        return (kt.to(key_states.device, key_states.dtype),
                vt.to(value_states.device, value_states.dtype))

    def get_seq_length(self, layer_idx=0):
        """Tokens the layer holds."""
        return self._n[layer_idx] if 0 <= (layer_idx or 0) < self.n_layers else 0

    def get_max_length(self, layer_idx=None):
        """No fixed maximum: -1 (transformers >= 4.56), None before (the old API)."""
        return -1 if _LayerBase is not None else None

    def get_max_cache_shape(self, layer_idx=None):
        return self.get_max_length(layer_idx)

    def get_mask_sizes(self, query, layer_idx=0):
        """(kv_length, kv_offset) for the mask: the tokens held plus the query's."""
        q = query if isinstance(query, int) else int(query.shape[0])
        return self.get_seq_length(layer_idx) + q, 0

    def reset(self):
        """Forgets every token (the codes are freed)."""
        for c in self._caches:
            c.reset()
        self._n = [0] * self.n_layers

    def reorder_cache(self, beam_idx):
        raise NotImplementedError("VeloxCache: beam search is not supported")

    def crop(self, max_length):
        raise NotImplementedError("VeloxCache: crop (assisted decoding) is not supported")

    def __len__(self):
        return self.n_layers

    # ---- what the codes cost ----

    @property
    def nbytes(self):
        """Bytes the codes hold now (codes, side data, fp16 windows: vq_cache_memory), summed
        over the batch."""
        return sum(c.nbytes for c in self._caches)

    def expected_nbytes(self):
        """What the library's formula (vq_kv_spec_bits_per_elem) gives for this config, geometry
        and length, times the batch; equals nbytes."""
        if not self._caches:
            return 0
        c = self._caches[0]
        return len(self._caches) * kv_bytes(self.kv, self.n_layers, c.n_kv_heads, c.head_dim,
                                            self._n[0])

    def memory(self):
        """vq_cache_memory of each sequence's cache (a list of dicts)."""
        return [c.memory() for c in self._caches]


if _LayerBase is not None:
    class _VeloxLayer(_LayerBase):
        """One layer of a VeloxCache for transformers' per-layer Cache API (>= 4.56); it
        delegates to the VeloxCache, which holds the codes."""

        is_sliding = False
        is_croppable = False
        supports_early_init = False

        def __init__(self, owner, idx):
            super().__init__()
            self._owner, self._idx = owner, idx

        def lazy_initialization(self, key_states, value_states):
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            self.is_initialized = True
            return self._owner.update(key_states, value_states, self._idx)

        def get_mask_sizes(self, query_length, *args):
            return self._owner.get_mask_sizes(query_length, self._idx)

        def get_seq_length(self):
            return self._owner.get_seq_length(self._idx)

        def get_max_length(self):
            return -1

        def reset(self):
            pass  # VeloxCache.reset empties every layer

        def reorder_cache(self, beam_idx):
            raise NotImplementedError("VeloxCache: beam search is not supported")

        def crop(self, tokens_to_remove):
            raise NotImplementedError("VeloxCache: crop (assisted decoding) is not supported")

        def offload(self):
            pass

        def prefetch(self):
            pass
