"""ctypes declarations of the libveloxquant functions the package calls (include/veloxquant.h,
include/vq_engine.h). The library is loaded once: $VQ_LIBRARY if set, else the copy installed
inside this package. ctypes releases the GIL around every foreign call, so long calls (encode,
attend, eval, generate) do not block other Python threads."""
import ctypes as C
import os

_here = os.path.dirname(os.path.abspath(__file__))
_path = os.environ.get("VQ_LIBRARY") or os.path.join(_here, "libveloxquant.so")
try:
    lib = C.CDLL(_path)
except OSError as e:  # pragma: no cover - install problem
    raise ImportError(f"veloxquant: cannot load {_path}: {e} (reinstall with pip install ./python "
                      f"or set VQ_LIBRARY)") from e

c_int64_p = C.POINTER(C.c_int64)
c_float_p = C.POINTER(C.c_float)


class MethodInfo(C.Structure):
    """struct vq_method_info"""
    _fields_ = [("name", C.c_char_p), ("params", C.c_char_p), ("bits_formula", C.c_char_p),
                ("needs_calibration", C.c_int), ("implemented", C.c_int),
                ("default_bits", C.c_int), ("min_bits", C.c_int), ("max_bits", C.c_int),
                ("frac_bits", C.c_double), ("flags", C.c_uint)]


class PresetInfo(C.Structure):
    """struct vq_kv_preset_info"""
    _fields_ = [("name", C.c_char_p), ("config", C.c_char_p), ("description", C.c_char_p),
                ("max_bits", C.c_double), ("tier", C.c_int)]


class CacheMemory(C.Structure):
    """struct vq_cache_memory"""
    _fields_ = [(n, C.c_size_t) for n in (
        "key_bytes", "value_bytes", "window_bytes", "total_bytes", "fp16_bytes", "fp16_key_bytes",
        "key_total_bytes", "allocated_bytes", "center_bytes", "outlier_bytes")]


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = C.c_void_p
status_str = _fn("vq_status_str", C.c_char_p, C.c_int)
version = _fn("vq_version", C.c_char_p)
method_info_get = _fn("vq_method_info_get", C.c_int, C.c_int, C.POINTER(MethodInfo))
method_name = _fn("vq_method_name", C.c_char_p, C.c_int)
preset_count = _fn("vq_kv_preset_count", C.c_int)
preset_get = _fn("vq_kv_preset_get", C.c_int, C.c_int, C.POINTER(PresetInfo))

codec_create_kv = _fn("vq_codec_create_kv", P, C.c_char_p, C.c_int, C.c_int, C.c_char_p,
                      C.c_size_t, C.POINTER(C.c_int))
codec_free = _fn("vq_codec_free", None, P)
codec_block_tokens = _fn("vq_codec_block_tokens", C.c_int, P)
codec_block_bytes = _fn("vq_codec_block_bytes", C.c_size_t, P)
codec_bits_per_elem = _fn("vq_codec_bits_per_elem", C.c_double, P)
codec_encode = _fn("vq_codec_encode", C.c_int, P, c_float_p, C.c_int64, P)
codec_decode = _fn("vq_codec_decode", C.c_int, P, P, C.c_int64, c_float_p)
codec_query_bytes = _fn("vq_codec_query_bytes", C.c_size_t, P)
codec_prepare_query = _fn("vq_codec_prepare_query", None, P, c_float_p, P)
codec_score = _fn("vq_codec_score", None, P, P, P, C.c_int64, c_float_p)

cache_create_kv = _fn("vq_cache_create_kv", P, C.c_char_p, C.c_int, C.c_int, C.c_int, C.c_int64,
                      C.c_int, C.c_char_p, C.c_size_t, C.POINTER(C.c_int))
cache_free = _fn("vq_cache_free", None, P)
cache_append = _fn("vq_cache_append", C.c_int, P, C.c_int, P, P, C.c_int, C.c_int64)
cache_observe_queries = _fn("vq_cache_observe_queries", C.c_int, P, C.c_int, c_float_p, C.c_int,
                            C.c_int64)
cache_attend = _fn("vq_cache_attend", C.c_int, P, C.c_int, c_float_p, C.c_int, C.c_int64,
                   c_int64_p, C.c_float, c_float_p)
cache_read = _fn("vq_cache_read", C.c_int, P, C.c_int, C.c_int, c_float_p, c_float_p)
cache_n_tokens = _fn("vq_cache_n_tokens", C.c_int64, P, C.c_int)
cache_memory = _fn("vq_cache_memory", None, P, C.POINTER(CacheMemory))
cache_reset = _fn("vq_cache_reset", None, P)

model_load = _fn("vq_model_load", P, C.c_char_p, C.POINTER(C.c_int))
model_free = _fn("vq_model_free", None, P)
engine_last_error = _fn("vq_engine_last_error", C.c_char_p)
