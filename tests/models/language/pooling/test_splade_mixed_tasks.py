# SPDX-License-Identifier: Apache-2.0
"""embed and token_embed requests scheduled into one engine step each get
their own correct output (each pooler works on its own tokens of the flat
batch).

vLLM 0.32's LLM front end (and the server) serve one pooling task per model
(`LLM.encode(pooling_task=...)` refuses any other), but the engine core runs
every task the model's pooler supports. So the requests go straight to
`LLM.llm_engine`, which is what the front ends feed."""
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS


def _run(engine, requests: dict[str, tuple[str, str]]) -> tuple[dict, int]:
    """Add {request_id: (text, task)} and step the engine until all are
    done; returns {request_id: output} and the number of steps it took."""
    from vllm import PoolingParams
    for request_id, (text, task) in requests.items():
        engine.add_request(request_id, text, PoolingParams(task=task))
    outputs, steps = {}, 0
    while engine.has_unfinished_requests():
        steps += 1
        outputs.update((o.request_id, o) for o in engine.step())
    return outputs, steps


def test_embed_and_token_embed_in_one_engine_step(splade_llm):
    engine = splade_llm.llm_engine
    assert {"embed", "token_embed"} <= set(engine.get_supported_tasks())
    picks = [6, 45, 0, 47, 13, 30, 46, 2]  # ~480 tokens: one step
    tasks = ["embed", "token_embed"] * (len(picks) // 2)
    mixed = {
        f"mixed-{i}": (PARITY_TEXTS[pick], task)
        for i, (pick, task) in enumerate(zip(picks, tasks))
    }
    outputs, steps = _run(engine, mixed)
    # All of them were scheduled, run and pooled in that single step.
    assert steps == 1
    assert sorted(outputs) == sorted(mixed)

    tokenizer = splade_llm.get_tokenizer()
    for request_id, (text, task) in mixed.items():
        got = outputs[request_id].outputs.data
        alone, _ = _run(engine, {f"alone-{request_id}": (text, task)})
        want = alone[f"alone-{request_id}"].outputs.data
        if task == "embed":
            assert got.shape == (30522, )
            # And the same as the LLM.embed front end.
            torch.testing.assert_close(got,
                                       vllm_vectors(splade_llm, [text])[0],
                                       rtol=0,
                                       atol=1e-5)
            assert torch.equal(got > 0, want > 0), text
        else:
            n_tokens = len(tokenizer(text)["input_ids"])
            assert got.shape == (n_tokens, 128)  # per-token hidden states
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
