# SPDX-License-Identifier: Apache-2.0
"""The configuration of Alibaba's GTE models (`model_type` "new"), as the
tests' reference reads it: the fields and defaults of the published
Alibaba-NLP/new-impl `NewConfig`, written here (the project copies no model
code). Served from a local hub cache as `Alibaba-NLP/new-impl`, it is what
`trust_remote_code=True` loads for the stand-in folders."""
from transformers import PretrainedConfig


class NewConfig(PretrainedConfig):
    model_type = "new"

    def __init__(self,
                 vocab_size=30528,
                 hidden_size=768,
                 num_hidden_layers=12,
                 num_attention_heads=12,
                 intermediate_size=3072,
                 hidden_act="gelu",
                 hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.0,
                 max_position_embeddings=2048,
                 type_vocab_size=1,
                 initializer_range=0.02,
                 layer_norm_type="layer_norm",
                 layer_norm_eps=1e-12,
                 position_embedding_type="rope",
                 rope_theta=10000.0,
                 rope_scaling=None,
                 classifier_dropout=None,
                 pack_qkv=True,
                 unpad_inputs=False,
                 use_memory_efficient_attention=False,
                 logn_attention_scale=False,
                 logn_attention_clip1=False,
                 tie_word_embeddings=True,
                 **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_type = layer_norm_type
        self.layer_norm_eps = layer_norm_eps
        self.position_embedding_type = position_embedding_type
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.classifier_dropout = classifier_dropout
        self.pack_qkv = pack_qkv
        self.unpad_inputs = unpad_inputs
        self.use_memory_efficient_attention = use_memory_efficient_attention
        self.logn_attention_scale = logn_attention_scale
        self.logn_attention_clip1 = logn_attention_clip1
        # transformers 4's default, which the published checkpoints rely on
        # (they carry no decoder weight); transformers 5 has none.
        self.tie_word_embeddings = tie_word_embeddings
        super().__init__(**kwargs)
