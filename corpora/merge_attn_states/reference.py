"""NumPy reference for merge_attn_states.cu (bf16 data held as uint16 bits), in float64."""

import numpy as np


def _bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def merge_attn_states(size, inputs):
    p_lse = inputs["prefix_lse"].astype(np.float64)
    s_lse = inputs["suffix_lse"].astype(np.float64)
    # +inf marks an empty partial result, as -inf does
    p_lse = np.where(np.isinf(p_lse), -np.inf, p_lse)
    s_lse = np.where(np.isinf(s_lse), -np.inf, s_lse)
    max_lse = np.maximum(p_lse, s_lse)
    p_se = np.exp(p_lse - max_lse)
    s_se = np.exp(s_lse - max_lse)
    out_se = p_se + s_se
    # [heads, tokens] -> [tokens, heads, 1] to scale the outputs
    p_scale = (p_se / out_se).T[:, :, None]
    s_scale = (s_se / out_se).T[:, :, None]
    merged = _bf16_values(inputs["prefix_output"]) * p_scale + _bf16_values(inputs["suffix_output"]) * s_scale
    return {"output": merged, "output_lse": np.log(out_se) + max_lse}
