# SPDX-License-Identifier: Apache-2.0
"""embed and encode requests scheduled into one engine step each get their
own correct output (the pooler works on its slice of the flat batch)."""
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS


def test_embed_and_encode_in_one_engine_step(splade_llm):
    from vllm import PoolingParams
    engine = splade_llm.llm_engine
    picks = [6, 45, 0, 47, 13, 30, 46, 2]  # ~480 tokens: one step
    tasks = ["embed", "encode"] * (len(picks) // 2)
    for i, (pick, task) in enumerate(zip(picks, tasks)):
        engine.add_request(f"mixed-{i}", PARITY_TEXTS[pick],
                           PoolingParams(task=task))
    outputs = {o.request_id: o for o in engine.step()}
    # All of them were scheduled, run and pooled in that single step.
    assert sorted(outputs) == sorted(f"mixed-{i}" for i in range(len(picks)))
    assert not engine.has_unfinished_requests()

    for i, (pick, task) in enumerate(zip(picks, tasks)):
        got = outputs[f"mixed-{i}"].outputs.data
        text = PARITY_TEXTS[pick]
        if task == "embed":
            want = vllm_vectors(splade_llm, [text])[0]
        else:
            (alone, ) = splade_llm.encode([text], pooling_task="encode")
            want = alone.outputs.data
            n_tokens = len(splade_llm.get_tokenizer()(text)["input_ids"])
            assert got.shape == (n_tokens, 30522)
            # Pooling the per-token weights gives the embedding.
            torch.testing.assert_close(got.amax(0),
                                       vllm_vectors(splade_llm, [text])[0],
                                       rtol=0,
                                       atol=1e-5)
        assert torch.equal(got > 0, want > 0), (task, text)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
