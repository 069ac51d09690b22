"""Attention, hands-on: small, GPU-aware helpers that the notebooks import.

Legend used in every module: B batch, Q queries, K key-value pairs, D query/key size,
V value size, H heads. Attention weights are always laid out (..., Q, K).
"""

import atexit as _atexit
import gc as _gc

from . import _assert_close

from .attention import AdditiveAttention, DotProductAttention, scaled_dot_product
from .device import get_device, set_seed
from .kernel_regression import (
    KERNELS, NWKernelRegression, RegressionData, make_regression_data, nadaraya_watson,
    target_function,
)
from .kv_cache import KVCache
from .latent_attention import LatentCache, MultiHeadLatentAttention
from .masking import (
    causal_mask, masked_softmax, sequence_mask, softmax_with_mask, valid_lens_to_mask,
)
from .multihead import MultiHeadAttention, transpose_output, transpose_qkv
from .plotting import set_theme, show_heatmaps, to_numpy
from .positional import PositionalEncoding, sinusoidal_table
from .rotary import apply_rotary
from .sinks import sink_softmax
from .tiling import tiled_attention
from .transformer import DecoderLM, TransformerBlock, generate

__all__ = [
    "AdditiveAttention", "DotProductAttention", "scaled_dot_product",
    "get_device", "set_seed",
    "KERNELS", "NWKernelRegression", "RegressionData", "make_regression_data",
    "nadaraya_watson", "target_function",
    "causal_mask", "masked_softmax", "sequence_mask", "softmax_with_mask", "valid_lens_to_mask",
    "MultiHeadAttention", "transpose_output", "transpose_qkv",
    "set_theme", "show_heatmaps", "to_numpy",
    "PositionalEncoding", "sinusoidal_table",
    "apply_rotary",
    "sink_softmax",
    "TransformerBlock", "DecoderLM",
    "KVCache", "generate",
    "MultiHeadLatentAttention", "LatentCache",
    "tiled_attention",
]


# At exit, the garbage collector's last passes walk every object torch, matplotlib and the
# notebook made (hundreds of thousands, all freed with the process anyway): a notebook's kernel
# spent 1-2.6 s shutting down. Frozen first, they are skipped: the process exits in a fraction
# of that. Nothing changes before exit: what a session makes is collected as usual until then.
_atexit.register(_gc.freeze)

# torch.testing.assert_close's first call imports torch.distributed.tensor (0.9 s) to ask
# whether its inputs are DTensors; none can exist before that import (see _assert_close.py).
_assert_close.install()
