"""veloxquant: KV-cache compression for transformer LLMs, from NumPy.

Binds libveloxquant (shipped inside this package) with ctypes:
  methods(), presets()              what the library offers (methods, named KV configs)
  Codec(method, bits, head_dim)     encode / decode / scores straight from the codes
  Cache(n_layers, n_kv_heads, head_dim, kv="kv4")
                                    a compressed KV cache with attention on the codes
  Model(path, kv="kv4")             a GGUF model whose KV cache is compressed
  Synth(seed), bench_data(T)        the synthetic vectors of `veloxquant bench`
  kv_bytes(kv, L, H, d, n)          the library's exact cache size for a config and geometry
  cpu()                             the CPU and the kernel variant the library runs on it
  veloxquant.transformers           VeloxCache, a Hugging Face transformers Cache of codes
                                    (optional: needs torch and transformers)
Config names ("kv4", "fp16", "turboquant_mse-3", "kivi-4:turboquant_mse-4+g64") are resolved by
the library, exactly as the veloxquant CLI resolves them. Errors raise veloxquant.Error
subclasses carrying the library's status; bad shapes and dtypes raise ValueError before any
call into C.
"""
from .core import (Cache, Codec, Codes, Synth, bench_data, config_name, cpu, kv_bits_per_elem,
                   kv_bytes, methods, presets, version)
from .model import Model, Result
from .errors import (BadFormatError, CapacityError, Error, FileError, InternalError,
                     InvalidArgumentError, NoMemoryError, NonFiniteError, NotFoundError,
                     RangeError, UnsupportedError)

__version__ = "0.1.0"
__all__ = ["Cache", "Codec", "Codes", "Model", "Result", "Synth", "bench_data", "config_name",
           "cpu", "kv_bits_per_elem", "kv_bytes",
           "methods", "presets", "version", "Error",
           "BadFormatError", "CapacityError", "FileError", "InternalError",
           "InvalidArgumentError", "NoMemoryError", "NonFiniteError", "NotFoundError",
           "RangeError", "UnsupportedError"]
