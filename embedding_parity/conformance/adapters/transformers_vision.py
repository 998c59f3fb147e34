"""Hugging Face transformers' vision towers (5.24, PyTorch): the embeddings modules'
``interpolate_pos_encoding`` (ViT, CLIP, SigLIP, DINOv2, DINOv2 with registers), SigLIP2's
NaFlex ``resize_positional_embeddings``, and the rotary modules of Pixtral, Qwen2.5-VL's
vision tower, Llama 4's vision model and DINOv3, each built from its config class (nothing
downloaded) and called as the model's forward calls it.

A resize is f(table, old_grid, new_grid, prefix_tokens) (the pos2d_resize kind): the module's
position table set to the given one, then its interpolate_pos_encoding asked for an image of
new_grid patches. The module reads its pretrained grid from the table's rows, as a square
(sqrt of the patch rows a side): it takes no grid, so old_grid and prefix_tokens reach it only
as the table's shape. A rotary is f(x, positions) (rope2d): x (..., N, head_dim), positions
(N, 2) (row, column), a prefix token's (-1, -1)."""

import math

import torch
from torch import nn
from transformers import (
    CLIPVisionConfig,
    Dinov2Config,
    Dinov2WithRegistersConfig,
    DINOv3ViTConfig,
    Llama4VisionConfig,
    PixtralVisionConfig,
    Siglip2VisionConfig,
    SiglipVisionConfig,
    ViTConfig,
)
from transformers.models.clip.modeling_clip import CLIPVisionEmbeddings
from transformers.models.dinov2.modeling_dinov2 import Dinov2Embeddings
from transformers.models.dinov2_with_registers.modeling_dinov2_with_registers import (
    Dinov2WithRegistersEmbeddings,
)
from transformers.models.dinov3_vit import modeling_dinov3_vit
from transformers.models.llama4 import modeling_llama4
from transformers.models.pixtral import modeling_pixtral
from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
from transformers.models.siglip.modeling_siglip import SiglipVisionEmbeddings
from transformers.models.siglip2.modeling_siglip2 import Siglip2VisionEmbeddings
from transformers.models.vit.modeling_vit import ViTEmbeddings

PATCH = 14  # any patch size: the modules divide the image's pixels by it again


def _side(table, prefix: int) -> int:
    """The side of the square a config describes for the table's patch rows (configs give one
    image_size): the module reads its table's grid as this square itself."""
    return math.isqrt(table.shape[0] - prefix)


def _resized(make, prefix: int, parameter: bool):
    """f(table, old_grid, new_grid, prefix_tokens) by ``make(side, dim)``'s embeddings module,
    its table (a Parameter (1, rows, D), or an Embedding's weight) the given one, asked
    interpolate_pos_encoding(embeddings, height, width) for an image of new_grid patches (the
    embeddings only give their token count and width)."""

    def f(table, old_grid, new_grid, prefix_tokens):
        dim = table.shape[-1]
        module = make(_side(table, prefix), dim).eval()
        with torch.no_grad():
            if parameter:  # the module's other weights (its patch projection) are not read
                module.position_embeddings = nn.Parameter(table[None])
            else:
                module.position_embedding.weight = nn.Parameter(table)
            h, w = new_grid
            embeddings = torch.empty(1, prefix + h * w, dim, dtype=table.dtype)
            resized = module.interpolate_pos_encoding(embeddings, h * PATCH, w * PATCH)
        return resized.reshape(-1, dim)  # (prefix + h * w, D)

    return f


def _config(config_class, **fields):
    return lambda side, dim: config_class(
        hidden_size=dim,
        num_attention_heads=1,
        image_size=side * PATCH,
        patch_size=PATCH,
        **fields,
    )


vit_interpolate_pos_encoding = _resized(
    lambda side, dim: ViTEmbeddings(_config(ViTConfig)(side, dim)), 1, parameter=True
)
clip_interpolate_pos_encoding = _resized(
    lambda side, dim: CLIPVisionEmbeddings(_config(CLIPVisionConfig)(side, dim)), 1, False
)
siglip_interpolate_pos_encoding = _resized(
    lambda side, dim: SiglipVisionEmbeddings(_config(SiglipVisionConfig)(side, dim)), 0, False
)
dinov2_interpolate_pos_encoding = _resized(
    lambda side, dim: Dinov2Embeddings(_config(Dinov2Config)(side, dim)), 1, parameter=True
)
# its registers sit after the CLS row but carry no position: the table is CLS + grid
dinov2_with_registers_interpolate_pos_encoding = _resized(
    lambda side, dim: Dinov2WithRegistersEmbeddings(
        _config(Dinov2WithRegistersConfig, num_register_tokens=4)(side, dim)
    ),
    1,
    parameter=True,
)


def siglip2_naflex(table, old_grid, spatial_shapes, max_patches):
    """Siglip2VisionEmbeddings' positions as its forward makes them: the (num_patches, D) table
    read as a position_embedding_size-sided square, resized to each image's spatial_shapes
    and padded to max_patches (resize_positional_embeddings)."""
    rows, dim = table.shape
    config = Siglip2VisionConfig(hidden_size=dim, num_attention_heads=1, num_patches=rows)
    module = Siglip2VisionEmbeddings(config).to(table.dtype).eval()
    with torch.no_grad():
        module.position_embedding.weight.copy_(table)
        positional_embeddings = module.position_embedding.weight.reshape(
            module.position_embedding_size, module.position_embedding_size, -1
        )
        return module.resize_positional_embeddings(
            positional_embeddings, spatial_shapes, max_length=max_patches
        )


# --- the rotary modules: f(x, positions) ----------------------------------------------------
#
# Each module is built at the model's rope_theta (its config class's default, the checkpoints'
# own: Pixtral 10000, Qwen2.5-VL 10000, Llama 4 10000, DINOv3 100) and the head of x.


def pixtral_rotary(x, positions):
    """PixtralVisionRotaryEmbedding on the (N, 2) ids and apply_rotary_pos_emb, as
    PixtralAttention applies it (cos and sin (N, head_dim), unsqueeze_dim=0)."""
    head_dim = x.shape[-1]
    config = PixtralVisionConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim)
    cos, sin = modeling_pixtral.PixtralVisionRotaryEmbedding(config)(x, positions)
    return modeling_pixtral.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)[0]


def qwen2_5_vl_rotary(x, positions):
    """Qwen2_5_VLVisionRotaryEmbedding on the (N, 2) ids (in the tower's window order, as the
    tower permutes its cos and sin), apply_rotary_pos_emb_vision on q held (N, heads,
    head_dim) as its attention holds it."""
    head_dim = x.shape[-1]
    config = Qwen2_5_VLVisionConfig(hidden_size=head_dim, num_heads=1, depth=1)
    cos, sin = modeling_qwen2_5_vl.Qwen2_5_VLVisionRotaryEmbedding(config)(x, positions)
    q = x.movedim(-2, 0)  # (N, ..., head_dim)
    held = q.reshape(len(q), -1, head_dim)
    turned = modeling_qwen2_5_vl.apply_rotary_pos_emb_vision(held, held, cos, sin)[0]
    return turned.reshape(q.shape).movedim(0, -2)


def llama_4_rotary(x, positions):
    """Llama4VisionRotaryEmbedding's table (a square of side max(rows, columns) + 1, raster
    order, the CLS its last row) read at each token's row * side + column (the CLS's (-1, -1)
    at the last row), and vision_apply_rotary_emb on q held (1, N, heads, head_dim) as
    Llama4VisionAttention holds it."""
    head_dim = x.shape[-1]
    side = int(positions.max()) + 1
    config = Llama4VisionConfig(
        hidden_size=head_dim, num_attention_heads=1, image_size=side * PATCH, patch_size=PATCH
    )
    table = modeling_llama4.Llama4VisionRotaryEmbedding(config).freqs_ci  # (side² + 1, 1, d/2)
    rows = torch.where(positions[:, 0] >= 0, positions[:, 0] * side + positions[:, 1], side**2)
    q = x.movedim(-2, 0)  # (N, ..., head_dim)
    held = q.reshape(1, len(q), -1, head_dim)
    turned = modeling_llama4.vision_apply_rotary_emb(held, held, table[rows])[0]
    return turned.reshape(q.shape).movedim(0, -2)


def dinov3_rotary(x, positions):
    """DINOv3ViTRopePositionEmbedding at the patches' grid (its cos and sin in raster order,
    read at each patch's row * width + column) and its apply_rotary_pos_emb, which leaves the
    tokens before the patches (CLS, registers) as they are."""
    head_dim = x.shape[-1]
    patches = positions[positions[:, 0] >= 0]
    h, w = (int(n) + 1 for n in patches.max(dim=0).values)
    config = DINOv3ViTConfig(hidden_size=head_dim, num_attention_heads=1, patch_size=PATCH)
    rotary = modeling_dinov3_vit.DINOv3ViTRopePositionEmbedding(config).eval()
    # it reads the image's size and dtype (the model's: its cos and sin are cast to it)
    cos, sin = rotary(torch.empty(1, 0, h * PATCH, w * PATCH, dtype=x.dtype))
    rows = patches[:, 0] * w + patches[:, 1]
    return modeling_dinov3_vit.apply_rotary_pos_emb(x, x, cos[rows], sin[rows])[0]
