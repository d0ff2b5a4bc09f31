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
cpu_describe = _fn("vq_cpu_describe", C.c_int, C.c_char_p, C.c_size_t)
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



class Synth(C.Structure):
    """vq_synth"""
    _fields_ = [("state", C.c_uint64)]


synth_seed = _fn("vq_synth_seed", None, C.POINTER(Synth), C.c_uint64)
synth_normal = _fn("vq_synth_normal", None, C.POINTER(Synth), c_float_p, C.c_int64)
synth_keys = _fn("vq_synth_keys", None, C.POINTER(Synth), c_float_p, C.c_int64, C.c_int)

class KvSpec(C.Structure):
    """struct vq_kv_spec"""
    _fields_ = [("has_method", C.c_int), ("has_k_method", C.c_int), ("has_v_method", C.c_int),
                ("method", C.c_int), ("k_method", C.c_int), ("v_method", C.c_int),
                ("bits", C.c_double), ("k_bits", C.c_double), ("v_bits", C.c_double),
                ("group_size", C.c_int), ("residual_length", C.c_int),
                ("n_sink_tokens", C.c_int), ("jl_dim", C.c_int), ("has_seed", C.c_int),
                ("seed", C.c_uint64), ("n_k_bpl", C.c_int), ("n_v_bpl", C.c_int),
                ("k_bpl_pattern", C.c_int), ("v_bpl_pattern", C.c_int),
                ("k_bpl", C.c_int * 512), ("v_bpl", C.c_int * 512), ("fp16_first", C.c_int),
                ("fp16_last", C.c_int), ("ratequant", C.c_double), ("rq_values", C.c_int),
                ("calib_tokens", C.c_int), ("outlier_token_k", C.c_float),
                ("n_outlier_channels", C.c_int), ("n_calib_tokens", C.c_int),
                ("stream_window", C.c_int), ("stream_sinks", C.c_int), ("key_scales", C.c_int),
                ("key_channel_bits", C.c_int), ("preset", C.c_int)]


kv_spec_parse = _fn("vq_kv_spec_parse", C.c_int, C.c_char_p, C.POINTER(KvSpec), C.c_char_p,
                    C.c_size_t)
kv_spec_bits_per_elem = _fn("vq_kv_spec_bits_per_elem", C.c_int, C.POINTER(KvSpec), C.c_int,
                            C.c_int, C.c_int, C.c_int64, C.POINTER(C.c_double))

model_load = _fn("vq_model_load", P, C.c_char_p, C.POINTER(C.c_int))
model_free = _fn("vq_model_free", None, P)
engine_last_error = _fn("vq_engine_last_error", C.c_char_p)


# ---- the engine (vq_engine.h) ----

class CodecParams(C.Structure):
    """struct vq_codec_params"""
    _fields_ = [("method", C.c_int), ("role", C.c_int), ("head_dim", C.c_int), ("bits", C.c_int),
                ("seed", C.c_uint64), ("unbiased_scale", C.c_int), ("jl_dim", C.c_int),
                ("group_size", C.c_int), ("residual_length", C.c_int),
                ("n_sink_tokens", C.c_int), ("polar_bits", C.c_int * 4), ("isa", C.c_int),
                ("calib", C.c_void_p), ("calib_layer", C.c_int), ("pq_codeword_bits", C.c_int),
                ("pq_subvec_dim", C.c_int), ("spectral_waterfill", C.c_int),
                ("channel_bits", C.c_void_p)]


class CacheParams(C.Structure):
    """struct vq_cache_params"""
    _fields_ = [("n_layers", C.c_int), ("n_kv_heads", C.c_int), ("head_dim", C.c_int),
                ("max_tokens", C.c_int64), ("page_tokens", C.c_int), ("key", CodecParams),
                ("value", CodecParams), ("key_bits_per_layer", C.c_void_p),
                ("value_bits_per_layer", C.c_void_p), ("n_threads", C.c_int),
                ("center_keys", C.c_int), ("center_values", C.c_int),
                ("outlier_token_k", C.c_float), ("n_outlier_channels", C.c_int),
                ("n_calib_tokens", C.c_int), ("fp16_first_layers", C.c_int),
                ("fp16_last_layers", C.c_int), ("layer_window", C.c_void_p),
                ("stream_window", C.c_int), ("stream_sinks", C.c_int), ("key_scales", C.c_int),
                ("key_scale_pairs", C.c_int), ("key_scale_rope_dim", C.c_int),
                ("key_channel_bits", C.c_int)]


class CtxParams(C.Structure):
    """struct vq_ctx_params"""
    _fields_ = [("n_ctx", C.c_int64), ("n_threads", C.c_int), ("n_batch", C.c_int),
                ("logits_all", C.c_int), ("isa", C.c_int), ("f32_activations", C.c_int),
                ("cache", CacheParams), ("timings", C.c_int)]


class ModelInfo(C.Structure):
    """struct vq_model_info"""
    _fields_ = [("arch", C.c_char * 32), ("name", C.c_char * 96), ("n_layers", C.c_int),
                ("n_heads", C.c_int), ("n_kv_heads", C.c_int), ("head_dim", C.c_int),
                ("n_embd", C.c_int), ("n_ff", C.c_int), ("n_vocab", C.c_int),
                ("n_ctx_train", C.c_int64), ("rope_theta", C.c_float), ("rope_dim", C.c_int),
                ("rope_type", C.c_int), ("rms_eps", C.c_float), ("tied_embeddings", C.c_int),
                ("has_qkv_bias", C.c_int), ("has_qk_norm", C.c_int), ("fused_qkv", C.c_int),
                ("fused_gate_up", C.c_int), ("swa_window", C.c_int), ("n_swa_layers", C.c_int),
                ("rope_theta_swa", C.c_float), ("file_type", C.c_uint32),
                ("weight_bytes", C.c_size_t), ("step_weight_bytes", C.c_size_t)]


class SamplerParams(C.Structure):
    """struct vq_sampler_params"""
    _fields_ = [("temperature", C.c_float), ("top_k", C.c_int), ("top_p", C.c_float),
                ("seed", C.c_uint64), ("min_p", C.c_float), ("repeat_penalty", C.c_float),
                ("repeat_last_n", C.c_int)]


PIECE_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_char), C.c_size_t)


class GenParams(C.Structure):
    """struct vq_gen_params"""
    _fields_ = [("sampling", SamplerParams), ("max_tokens", C.c_int64),
                ("stop", C.POINTER(C.c_char_p)), ("n_stop", C.c_int), ("add_special", C.c_int),
                ("parse_special", C.c_int), ("on_piece", PIECE_FN), ("user", C.c_void_p)]


class CtxTimings(C.Structure):
    """struct vq_ctx_timings"""
    _fields_ = [("seconds", (C.c_double * 6) * 2), ("tokens", C.c_int64 * 2),
                ("passes", C.c_int64 * 2)]


class GenResult(C.Structure):
    """struct vq_gen_result"""
    _fields_ = [("n_prompt", C.c_int64), ("n_evaluated", C.c_int64), ("n_cached", C.c_int64),
                ("n_generated", C.c_int64), ("n_decoded", C.c_int64), ("finish", C.c_int),
                ("stop_index", C.c_int), ("prefill_s", C.c_double), ("decode_s", C.c_double),
                ("prefill_timings", CtxTimings), ("decode_timings", CtxTimings),
                ("text", C.POINTER(C.c_char)), ("text_len", C.c_size_t)]


class ChatMessage(C.Structure):
    """struct vq_chat_message"""
    _fields_ = [("role", C.c_char_p), ("content", C.c_char_p)]


TEXT_ERROR = -(2 ** 63)
model_info_get = _fn("vq_model_info_get", C.POINTER(ModelInfo), P)
ctx_params_default = _fn("vq_ctx_params_default", CtxParams)
ctx_create_kv = _fn("vq_ctx_create_kv", P, P, C.POINTER(CtxParams), C.c_char_p,
                    C.POINTER(C.c_int))
ctx_free = _fn("vq_ctx_free", None, P)
ctx_eval = _fn("vq_ctx_eval", C.c_int, P, C.POINTER(C.c_int32), C.c_int64, c_float_p)
ctx_n_past = _fn("vq_ctx_n_past", C.c_int64, P)
ctx_reset = _fn("vq_ctx_reset", None, P)
ctx_cache = _fn("vq_ctx_cache", P, P)
ctx_n_threads = _fn("vq_ctx_n_threads", C.c_int, P)
sampler_params_default = _fn("vq_sampler_params_default", SamplerParams)
tokenize = _fn("vq_tokenize", C.c_int64, P, C.c_char_p, C.c_size_t, C.c_int, C.c_int,
               C.POINTER(C.c_int32), C.c_int64)
detokenize = _fn("vq_detokenize", C.c_int64, P, C.POINTER(C.c_int32), C.c_int64, C.c_char_p,
                 C.c_size_t, C.c_int, C.c_int)
chat_apply = _fn("vq_model_chat_apply", C.c_int64, P, C.POINTER(ChatMessage), C.c_size_t, C.c_int,
                 C.c_char_p, C.c_size_t)
gen_params_default = _fn("vq_gen_params_default", GenParams)
gen_result_free = _fn("vq_gen_result_free", None, C.POINTER(GenResult))
generate = _fn("vq_generate", C.c_int, P, C.c_char_p, C.POINTER(GenParams), C.POINTER(GenResult))
generate_tokens = _fn("vq_generate_tokens", C.c_int, P, C.POINTER(C.c_int32), C.c_int64,
                      C.POINTER(GenParams), C.POINTER(GenResult))
finish_reason_name = _fn("vq_finish_reason_name", C.c_char_p, C.c_int)
conversation_create = _fn("vq_conversation_create", P, P, C.c_char_p, C.POINTER(C.c_int))
conversation_free = _fn("vq_conversation_free", None, P)
conversation_turn = _fn("vq_conversation_turn", C.c_int, P, C.c_char_p, C.POINTER(GenParams),
                        C.POINTER(GenResult))
conversation_reset = _fn("vq_conversation_reset", None, P)
conversation_n_past = _fn("vq_conversation_n_past", C.c_int64, P)
token_bos = _fn("vq_token_bos", C.c_int32, P)
token_add_bos = _fn("vq_token_add_bos", C.c_int, P)


# ---- evaluation: perplexity (vq_engine.h) ----

class PplParams(C.Structure):
    """struct vq_ppl_params"""
    _fields_ = [("ctx", C.c_int), ("n_chunks", C.c_int), ("n_batch", C.c_int),
                ("n_threads", C.c_int), ("bos", C.c_int32), ("f32_activations", C.c_int),
                ("cache", CacheParams)]


class PplResult(C.Structure):
    """struct vq_ppl_result"""
    _fields_ = [("n_chunks", C.c_int), ("n_scored", C.c_int64), ("nll_mean", C.c_double),
                ("ppl", C.c_double), ("ppl_stderr", C.c_double), ("kld_mean", C.c_double),
                ("kld_median", C.c_double), ("kld_p99", C.c_double), ("top1", C.c_double),
                ("seconds", C.c_double), ("prefill_tok_s", C.c_double), ("mem", CacheMemory)]


PPL_PROGRESS_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_int, C.c_double)
ppl_params_default = _fn("vq_ppl_params_default", PplParams)
perplexity = _fn("vq_perplexity", C.c_int, P, C.POINTER(C.c_int32), C.c_int64,
                 C.POINTER(PplParams), C.c_char_p, PPL_PROGRESS_FN, C.c_void_p,
                 C.POINTER(PplResult), C.c_char_p, C.c_size_t)
