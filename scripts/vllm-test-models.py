#!/usr/bin/env python3
"""Seeded random stand-ins for the hub models of vLLM's pooling tests.

Usage: vllm-test-models.py HF_HUB_CACHE_DIR

Writes one small checkpoint per hub name below (same architecture and
sentence-transformers pooling layout as the real model, random weights, a
WordPiece tokenizer built offline) into a Hugging Face hub cache layout
(models--ORG--NAME/refs/main + snapshots/REV/), so that vLLM's tests run
unmodified with HF_HUB_CACHE=HF_HUB_CACHE_DIR HF_HUB_OFFLINE=1: vLLM,
transformers and sentence-transformers all resolve the hub names there.
(VLLM_MODEL_REDIRECT_PATH cannot do it: in offline mode EngineArgs resolves
the name through the hub cache before the redirect is applied.)
The tests compare vLLM against HF/sentence-transformers on the same
weights, so random weights test the same code paths; they do not test the
real models' numbers. The output is byte-identical from run to run.
"""
import hashlib
import os
import sys

import torch

WORDS = """the a an of to and in is was for on that with as by at from it
this be are or its how can what which about into between first time
vllm high throughput memory efficient inference serving engine llms
briefly describe major milestones development artificial intelligence
compare contrast human terms processing information basic components
neural network trained write short story robot dreams analyze impact
covid pandemic global economic structures future business models explain
cultural significance mona lisa painting perception might vary western
versus eastern societies translate following english sentence japanese
french swahili early bird catches worm capital france germany paris berlin
calculus mathematical change motion century newton leibniz""".split()

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# RoBERTa/XLM-R layout: <pad> must be id 1 (= config.pad_token_id).
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

# hub name -> (family, head, extra config, sentence-transformers pooling)
STAND_INS = {
    # BERT
    "BAAI/bge-base-en-v1.5": ("bert", "BertModel", {}, ("cls", True, 512)),
    "sentence-transformers/all-MiniLM-L12-v2":
    ("bert", "BertModel", {}, ("mean", True, 128)),
    # The real one is the original Google checkpoint (legacy gamma/beta
    # names, no decoder tensor); this one is saved by transformers 5: a
    # tied decoder, no decoder tensor, modern names.
    "google-bert/bert-base-uncased": ("bert", "BertForMaskedLM", {}, None),
    # tests/test_pooling_params.py asks for its Matryoshka dimension (256),
    # which must fit its embedding size (768), read from its config.
    "Snowflake/snowflake-arctic-embed-m-v1.5":
    ("bert", "BertModel", {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "matryoshka_dimensions": [256]
    }, ("cls", True, 512)),
    "vllm-project/multi-label-class-classification-on-github-issues":
    ("bert", "BertForSequenceClassification", {
        "num_labels": 6,
        "problem_type": "multi_label_classification"
    }, None),
    # RoBERTa / XLM-RoBERTa (vLLM's roberta.py builds on bert.py)
    "sentence-transformers/stsb-roberta-base-v2":
    ("roberta", "RobertaModel", {}, ("mean", False, 75)),
    # Its tests check the embedding size (384): 12 heads of 32.
    "vllm-project/multilingual-e5-small":
    ("xlm-roberta", "XLMRobertaModel", {
        "hidden_size": 384,
        "num_attention_heads": 12
    }, ("mean", True, 512)),
    "vllm-project/xlm-roberta-base-ner-hrl":
    ("xlm-roberta", "XLMRobertaForTokenClassification", {
        "num_labels": 9
    }, None),
}


def vocab(specials: list[str]) -> list[str]:
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789")
    chars += list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    words = list(dict.fromkeys(WORDS))
    return (specials + chars + [w for w in words if w not in chars] +
            ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"])


def save_tokenizer(family: str, path: str) -> int:
    from tokenizers import Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors
    from transformers import BertTokenizerFast, PreTrainedTokenizerFast

    if family == "bert":
        words = vocab(BERT_SPECIALS)
        with open(os.path.join(path, "vocab.txt"), "w") as f:
            f.write("\n".join(words) + "\n")
        BertTokenizerFast(os.path.join(path, "vocab.txt"),
                          model_max_length=512).save_pretrained(path)
        return len(words)
    words = vocab(ROBERTA_SPECIALS)
    tok = Tokenizer(
        models.WordPiece({w: i
                          for i, w in enumerate(words)},
                         unk_token="<unk>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    specials = dict(bos_token="<s>",
                    eos_token="</s>",
                    cls_token="<s>",
                    sep_token="</s>",
                    unk_token="<unk>",
                    pad_token="<pad>",
                    mask_token="<mask>")
    PreTrainedTokenizerFast(tokenizer_object=tok,
                            model_max_length=512,
                            model_input_names=["input_ids", "attention_mask"],
                            **specials).save_pretrained(path)
    return len(words)


def save_model(name: str, path: str) -> None:
    import transformers

    family, head, extra, st = STAND_INS[name]
    os.makedirs(path, exist_ok=True)
    vocab_size = save_tokenizer(family, path)
    # head_dim 32: vLLM's CPU attention backend supports only some head
    # sizes (32, 64, 80, ...); 8 fails "Unsupported CPU attention
    # configuration".
    common = dict(vocab_size=vocab_size,
                  hidden_size=64,
                  num_hidden_layers=2,
                  num_attention_heads=2,
                  intermediate_size=128,
                  initializer_range=0.1,
                  # In the real configs; transformers 5 no longer writes it,
                  # and its XLM-R code reads it from configs saved that way.
                  position_embedding_type="absolute")
    common.update(extra)
    if family == "bert":
        config = transformers.BertConfig(max_position_embeddings=512,
                                         **common)
    else:
        config_cls = (transformers.RobertaConfig if family == "roberta" else
                      transformers.XLMRobertaConfig)
        config = config_cls(max_position_embeddings=514,
                            type_vocab_size=1,
                            pad_token_id=1,
                            bos_token_id=0,
                            eos_token_id=2,
                            **common)
    torch.manual_seed(0)
    model = getattr(transformers, head)(config).eval()
    model.save_pretrained(path)
    if st is None:
        return
    from sentence_transformers import SentenceTransformer, models
    pooling, normalize, max_seq_length = st
    modules = [
        models.Transformer(path, max_seq_length=max_seq_length),
        models.Pooling(config.hidden_size, pooling_mode=pooling)
    ]
    if normalize:
        modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(path)
    # sentence-transformers saves its AutoModel; put back the real model's
    # weights and architecture as they are on the hub.
    model.save_pretrained(path)


def main() -> int:
    out = os.path.abspath(sys.argv[1])
    for name in STAND_INS:
        repo = os.path.join(out, "models--" + name.replace("/", "--"))
        rev = hashlib.sha1(name.encode()).hexdigest()
        save_model(name, os.path.join(repo, "snapshots", rev))
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(rev)
    print(f"vllm-test-models: {len(STAND_INS)} stand-ins in {out}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
