# SPDX-License-Identifier: Apache-2.0
"""A reference `NewForMaskedLM` (Alibaba's GTE with its masked-LM head),
written here from the published architecture of Alibaba-NLP/new-impl for
the tests: word (and token type) embeddings and a LayerNorm; per layer,
packed q/k/v with rotary position embeddings (NTK-scaled where
`rope_scaling` says "ntk"), the attention output added to its input and
LayerNorm-ed, then a gated GELU MLP (`up_gate_proj` split into up and gate)
added and LayerNorm-ed; the head is dense, GELU, LayerNorm and a decoder
tied to the word embeddings, with a bias of its own; the token
classifier (`NewForTokenClassification`, gte-multilingual-base's lexical
head) a linear layer over the last hidden states. Plain eager PyTorch,
padded batches, no dropout: a reference, not a fast path."""
import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_outputs import (BaseModelOutput, MaskedLMOutput,
                                           TokenClassifierOutput)

from .configuration import NewConfig


def _inv_freq(config: NewConfig) -> torch.Tensor:
    dim = config.hidden_size // config.num_attention_heads
    base = config.rope_theta
    scaling = config.rope_scaling
    if scaling is not None:
        if scaling.get("type") != "ntk" or scaling.get("mixed_b") is not None:
            raise NotImplementedError(f"rope_scaling {scaling}")
        # Fixed NTK scaling: a larger base, frequencies divided again.
        base = base * scaling["factor"]
    inv_freq = 1.0 / (base**(torch.arange(0, dim, 2).float() / dim))
    if scaling is not None:
        inv_freq = inv_freq / scaling["factor"]**(2 / dim)
    return inv_freq


def _rotate(x: torch.Tensor, cos: torch.Tensor,
            sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class NewEmbeddings(nn.Module):

    def __init__(self, config: NewConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size,
                                            config.hidden_size)
        if config.type_vocab_size > 0:
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size,
                                                      config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size,
                                      eps=config.layer_norm_eps)

    def forward(self, input_ids, token_type_ids):
        x = self.word_embeddings(input_ids)
        if hasattr(self, "token_type_embeddings"):
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(x)


class NewAttention(nn.Module):

    def __init__(self, config: NewConfig):
        super().__init__()
        self.heads = config.num_attention_heads
        self.head_size = config.hidden_size // self.heads
        self.qkv_proj = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x, bias, cos, sin):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.head_size).transpose(1, 2)
                   for t in self.qkv_proj(x).chunk(3, dim=-1))
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_size) + bias
        out = scores.softmax(dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


class NewGatedMLP(nn.Module):

    def __init__(self, config: NewConfig):
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.up_gate_proj = nn.Linear(config.hidden_size,
                                      2 * config.intermediate_size,
                                      bias=False)
        self.down_proj = nn.Linear(config.intermediate_size,
                                   config.hidden_size)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x):
        up, gate = self.up_gate_proj(x).split(self.intermediate_size, dim=-1)
        return self.down_proj(self.act_fn(gate) * up)


class NewLayer(nn.Module):

    def __init__(self, config: NewConfig):
        super().__init__()
        if config.layer_norm_type != "layer_norm":
            raise NotImplementedError(config.layer_norm_type)
        self.attention = NewAttention(config)
        self.mlp = NewGatedMLP(config)
        self.attn_ln = nn.LayerNorm(config.hidden_size,
                                    eps=config.layer_norm_eps)
        self.mlp_ln = nn.LayerNorm(config.hidden_size,
                                   eps=config.layer_norm_eps)

    def forward(self, x, bias, cos, sin):
        x = self.attn_ln(x + self.attention(x, bias, cos, sin))
        return self.mlp_ln(x + self.mlp(x))


class NewEncoder(nn.Module):

    def __init__(self, config: NewConfig):
        super().__init__()
        self.layer = nn.ModuleList(
            NewLayer(config) for _ in range(config.num_hidden_layers))


class NewPreTrainedModel(PreTrainedModel):
    config_class = NewConfig
    base_model_prefix = "new"

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.normal_(module.bias, std=std)


class NewModel(NewPreTrainedModel):

    def __init__(self, config: NewConfig, add_pooling_layer: bool = False):
        super().__init__(config)
        if config.position_embedding_type != "rope":
            raise NotImplementedError(config.position_embedding_type)
        if config.logn_attention_scale:
            raise NotImplementedError("logn_attention_scale")
        self.embeddings = NewEmbeddings(config)
        self.encoder = NewEncoder(config)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        positions = torch.arange(input_ids.shape[1], device=x.device)
        freqs = positions.float()[:, None] * _inv_freq(self.config)[None]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        bias = torch.zeros(attention_mask.shape, dtype=x.dtype)
        bias = bias.masked_fill(attention_mask == 0,
                                torch.finfo(x.dtype).min)[:, None, None, :]
        for layer in self.encoder.layer:
            x = layer(x, bias, cos, sin)
        return BaseModelOutput(last_hidden_state=x)


class NewLMPredictionHead(nn.Module):

    def __init__(self, config: NewConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.norm = nn.LayerNorm(config.hidden_size,
                                 eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, x):
        return self.decoder(self.norm(self.transform_act_fn(self.dense(x))))


class NewForMaskedLM(NewPreTrainedModel):
    _tied_weights_keys = {
        "lm_head.decoder.weight": "new.embeddings.word_embeddings.weight"
    }

    def __init__(self, config: NewConfig):
        super().__init__(config)
        self.new = NewModel(config)
        self.lm_head = NewLMPredictionHead(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.new.embeddings.word_embeddings

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                **kwargs):
        hidden = self.new(input_ids, attention_mask,
                          token_type_ids).last_hidden_state
        return MaskedLMOutput(logits=self.lm_head(hidden))


@dataclass
class NewTokenClassifierOutput(TokenClassifierOutput):
    """The logits, with the last hidden states beside them, as the published
    model returns them (gte-multilingual-base's dense embedding is their
    first row)."""
    last_hidden_state: torch.Tensor | None = None


class NewForTokenClassification(NewPreTrainedModel):

    def __init__(self, config: NewConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.new = NewModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                **kwargs):
        hidden = self.new(input_ids, attention_mask,
                          token_type_ids).last_hidden_state
        return NewTokenClassifierOutput(logits=self.classifier(hidden),
                                        last_hidden_state=hidden)
